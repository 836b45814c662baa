package console

import (
	"context"
	"errors"
	"strings"

	"github.com/rune-org/rune/engine"
	"github.com/rune-org/rune/store"
)

// maxChildLinks bounds the children the execution page links.
const maxChildLinks = 50

// family reads the links of execution id to its parent and children
// (issue 34, the workflow node) for the execution page.
func (c *Console) family(ctx context.Context, id string) (parent string, kids []*store.ChildLink, err error) {
	if strings.HasPrefix(id, engine.ChildIDPrefix) {
		l, err := c.cfg.Store.ParentOf(ctx, id)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return "", nil, err
		}
		if l != nil {
			parent = l.ParentID
		}
	}
	kids, err = c.cfg.Store.Children(ctx, id, maxChildLinks)
	return parent, kids, err
}
