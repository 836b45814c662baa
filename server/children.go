package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/rune-org/rune/engine"
	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/store"
)

// Child executions (issue 34, the workflow node). The history consumer
// carries them out after each commit, before the batch's messages are
// acked (a failure delivers them again, and every step is idempotent):
//
//   - a waiting status with a message.ChildStart starts the child through
//     the trigger path: its link to the parent first (so its completion
//     always finds the parent), then the execution, whose id the engine
//     derived from the parent's node message and which is also its
//     idempotency key: a redelivered node starts no second child;
//   - the completion of a child ("exec_child_…") is delivered to its
//     waiting parent (engine.DeliverChild wakes the parent's timer).
//
// A child the depth limit or a cycle refuses never runs: its refusal is
// delivered as its end (CHILD_DEPTH, CHILD_CYCLE, CHILD_NOT_FOUND).
type children struct {
	store  store.Store
	engine *engine.Engine
	log    *slog.Logger
	now    func() time.Time
	// wake tells the dispatcher a child is enqueued; halt cancels one.
	wake func()
	halt func(ctx context.Context, x *store.Execution) error
}

// afterCommit starts the children the batch's statuses ask for and
// delivers the ends of the children it completed.
func (c *children) afterCommit(ctx context.Context, evs []store.HistoryEvent) error {
	if c == nil {
		return nil
	}
	for _, ev := range evs {
		var err error
		switch {
		case ev.Status != nil && ev.Status.Child != nil:
			err = c.start(ctx, ev.Status)
		case ev.Completion != nil && strings.HasPrefix(ev.Completion.ExecutionID, engine.ChildIDPrefix):
			err = c.ended(ctx, ev.Completion)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// start starts the child st asks for, once.
func (c *children) start(ctx context.Context, st *message.NodeStatus) error {
	req := st.Child
	if !strings.HasPrefix(req.ExecutionID, engine.ChildIDPrefix) {
		return nil // not the engine's: never started from a status
	}
	parent, err := c.store.GetExecution(ctx, st.ExecutionID)
	if errors.Is(err, store.ErrNotFound) {
		return nil // a run the server does not track (rune start)
	}
	if err != nil {
		return err
	}
	if parent.CancelRequested || (req.Wait && store.Final(parent.Status)) {
		// Its branch is dropped: no child wanted any more. (Without wait,
		// the parent may well have ended before its status is recorded.)
		return nil
	}
	var chain []string
	switch up, err := c.store.ParentOf(ctx, parent.ID); {
	case err == nil:
		chain = append(slices.Clone(up.Chain), parent.WorkflowID)
	case errors.Is(err, store.ErrNotFound):
		chain = []string{parent.WorkflowID}
	default:
		return err
	}
	wake := ""
	if req.Wait {
		wake = req.Wake
	}
	switch {
	case len(chain) > engine.MaxChildDepth:
		return c.refuse(ctx, req, engine.CodeChildDepth, fmt.Sprintf("node %q of execution %s would start a child at depth %d; children nest at most %d deep",
			st.NodeID, parent.ID, len(chain), engine.MaxChildDepth))
	case slices.Contains(chain, req.WorkflowID):
		return c.refuse(ctx, req, engine.CodeChildCycle, fmt.Sprintf("node %q of execution %s would start workflow %q, which is already running above it (%s)",
			st.NodeID, parent.ID, req.WorkflowID, strings.Join(append(chain, req.WorkflowID), " → ")))
	}
	version, err := c.versionAt(ctx, req, parent.CreatedAt)
	if errors.Is(err, store.ErrNotFound) {
		return c.refuse(ctx, req, engine.CodeChildNotFound, fmt.Sprintf("workflow %q does not exist", req.WorkflowID))
	}
	if err != nil {
		return err
	}
	input, err := json.Marshal(req.Input)
	if err != nil || req.Input == nil {
		input = []byte("{}")
	}
	now := c.now()
	if _, _, err := c.store.LinkChild(ctx, &store.ChildLink{ChildID: req.ExecutionID, ParentID: parent.ID, ParentNode: st.NodeID,
		Wake: wake, Chain: chain, CreatedAt: now}); err != nil {
		return err
	}
	x, created, err := c.store.CreateExecution(ctx, store.ExecutionInput{ID: req.ExecutionID, WorkflowID: req.WorkflowID, Version: version,
		Input: input, IdempotencyKey: req.ExecutionID, Trigger: "workflow:" + parent.ID, At: now})
	switch {
	case errors.Is(err, store.ErrNotFound):
		return c.refuse(ctx, req, engine.CodeChildNotFound, fmt.Sprintf("workflow %q version %d does not exist (or was deleted)", req.WorkflowID, version))
	case errors.Is(err, store.ErrConflict):
		return nil // created by an earlier delivery
	case err != nil:
		return err
	}
	if created {
		c.wake()
	}
	// A cancel of the parent that came meanwhile cancels the child: the
	// cancel reads the links after it marked the parent, this reads the
	// parent after it linked the child, so one of them sees the other.
	if cur, err := c.store.GetExecution(ctx, parent.ID); err == nil && (cur.CancelRequested || (req.Wait && store.Final(cur.Status))) {
		return c.cancel(ctx, x.ID, 0)
	}
	return nil
}

// versionAt is the child's version: the one asked for, else the one
// current when the parent started (the latest if every version is newer).
func (c *children) versionAt(ctx context.Context, req *message.ChildStart, started time.Time) (int, error) {
	if req.Version > 0 {
		return req.Version, nil
	}
	cursor, latest := "", 0
	for range 20 { // 10,000 versions back at most
		page, err := c.store.ListVersions(ctx, req.WorkflowID, store.ListLimitMax, cursor)
		if err != nil {
			return 0, err
		}
		for _, v := range page.Items {
			if latest == 0 {
				latest = v.Version
			}
			if !v.CreatedAt.After(started) {
				return v.Version, nil
			}
		}
		if page.Next == "" {
			break
		}
		cursor = page.Next
	}
	return latest, nil
}

// refuse delivers a child's refusal as its end (it never runs).
func (c *children) refuse(ctx context.Context, req *message.ChildStart, code, msg string) error {
	c.log.Info("child execution refused", "child", req.ExecutionID, "code", code, "reason", msg)
	if !req.Wait {
		return nil
	}
	return c.deliver(ctx, req.Wake, engine.ChildEnd{ExecutionID: req.ExecutionID, Status: store.StatusFailed,
		FinalContext: map[string]any{}, FailureReason: &message.Failure{Error: message.Error{Code: code, Message: msg}}})
}

// ended delivers the end of child comp.ExecutionID to its waiting parent.
func (c *children) ended(ctx context.Context, comp *message.Completion) error {
	link, err := c.store.ParentOf(ctx, comp.ExecutionID)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil || link.Wake == "" {
		return err
	}
	status := comp.Status
	if x, err := c.store.GetExecution(ctx, comp.ExecutionID); err == nil && store.Final(x.Status) {
		status = x.Status // as the API shows it: a cancel shows cancelled
	}
	return c.deliver(ctx, link.Wake, engine.ChildEnd{ExecutionID: comp.ExecutionID, Status: status,
		FinalContext: comp.FinalContext, FailureReason: comp.FailureReason})
}

func (c *children) deliver(ctx context.Context, wake string, end engine.ChildEnd) error {
	err := c.engine.DeliverChild(ctx, wake, end)
	if errors.Is(err, engine.ErrNoChildren) {
		c.log.Warn("a child execution ended, but this server's engine keeps no child results", "child", end.ExecutionID)
		return nil
	}
	return err
}

// maxChildCancels bounds the children one cancel reaches per level.
const maxChildCancels = 500

// cancel cancels execution id and, depth levels down at most, its
// children that have not ended.
func (c *children) cancel(ctx context.Context, id string, depth int) error {
	x, err := c.store.CancelExecution(ctx, id, c.now())
	switch {
	case errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrConflict):
		return nil // not created yet (its start sees the cancel), or ended
	case err != nil:
		return err
	}
	if x.CancelRequested && !store.Final(x.Status) {
		if err := c.halt(ctx, x); err != nil {
			return err
		}
	}
	return c.cancelChildren(ctx, id, depth+1)
}

// cancelChildren cancels the children of parent that have not ended.
func (c *children) cancelChildren(ctx context.Context, parent string, depth int) error {
	if c == nil || depth > engine.MaxChildDepth+1 {
		return nil
	}
	kids, err := c.store.Children(ctx, parent, maxChildCancels)
	if err != nil {
		return err
	}
	var errs []error
	for _, k := range kids {
		errs = append(errs, c.cancel(ctx, k.ChildID, depth))
	}
	return errors.Join(errs...)
}
