package console

import (
	"context"

	"github.com/rune-org/rune/store"
)

// sendsOf is the delivery status of the messages one run of an email or
// sms node sent (issue 36), for its panel; nil when it sent none.
func (c *Console) sendsOf(ctx context.Context, execID, node, branch string) []*store.Send {
	all, err := c.cfg.Store.ListSends(ctx, execID)
	if err != nil {
		c.log.Error("console: read sends", "execution", execID, "err", err)
		return nil
	}
	var out []*store.Send
	for _, s := range all {
		if s.NodeID == node && s.Branch == branch {
			out = append(out, s)
		}
	}
	return out
}
