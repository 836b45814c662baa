package store

import (
	"context"
	"time"
)

// ChildLink ties a child execution (the workflow node, issue 34) to the
// parent that started it.
type ChildLink struct {
	// ChildID is the child's execution id; it may be linked before the
	// execution exists (the link is written first, so that the child's
	// completion always finds its parent).
	ChildID string
	// ParentID is the parent's execution id; ParentNode its workflow node.
	ParentID   string
	ParentNode string
	// Wake is the timer id the parent's node is parked under ("" when the
	// parent does not wait for the child).
	Wake string
	// Chain lists the workflow ids of the parent and its ancestors, the
	// root first: its length is the child's depth.
	Chain     []string
	CreatedAt time.Time
}

// ChildStore links child executions to their parents.
type ChildStore interface {
	// LinkChild records l; linking a ChildID again keeps the first link
	// and returns it with false.
	LinkChild(ctx context.Context, l *ChildLink) (*ChildLink, bool, error)
	// ParentOf returns the link of child execution id; ErrNotFound for an
	// execution that no parent started.
	ParentOf(ctx context.Context, id string) (*ChildLink, error)
	// Children returns up to limit (1 to ListLimitMax) links of parent
	// execution id's children, oldest first.
	Children(ctx context.Context, id string, limit int) ([]*ChildLink, error)
}
