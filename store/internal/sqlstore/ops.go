package sqlstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/rune-org/rune/store"
)

// The steps of the stores' operations that do not depend on the database:
// each driver reads and writes, these decide, so that both answer alike.

// Wrap returns the error of operation what of a driver ("sqlite",
// "postgres"): the store's own errors (ErrNotFound, ErrConflict,
// ErrInvalid) as they are, any other prefixed with the driver and what.
func Wrap(driver, what string, err error) error {
	if err == nil || errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrInvalid) {
		return err
	}
	return fmt.Errorf("%s: %s: %w", driver, what, err)
}

// Got returns the error of a read of one row of what: none (the driver
// found no row) is ErrNotFound naming what; another error is prefixed with
// the driver and op.
func Got(driver, op, what string, none bool, err error) error {
	switch {
	case none:
		return fmt.Errorf("%s: %w", what, store.ErrNotFound)
	case err != nil:
		return fmt.Errorf("%s: %s: %w", driver, op, err)
	}
	return nil
}

// WorkflowPage checks a workflow list's cursor and limit: the workflow after which the
// page starts ("" for the first) and the limit, defaulted and capped.
func WorkflowPage(limit int, cursor string) (after string, l int, err error) {
	after, err = store.DecodeWorkflowCursor(cursor)
	return after, ListLimit(limit), err
}

// ExecutionPage checks an execution list's filter: the position after
// which the page starts and its limit, defaulted and capped.
func ExecutionPage(f store.ExecutionFilter) (store.PageCursor, int, error) {
	if err := CheckExecutionFilter(f); err != nil {
		return store.PageCursor{}, 0, err
	}
	cur, err := store.DecodeCursor(f.Cursor)
	return cur, ListLimit(f.Limit), err
}

// CheckHead applies a read of x's workflow head (its latest version;
// missing: no such workflow, or deleted) to the execution x: ErrNotFound
// when the workflow or the version x asks for does not exist; a version 0
// becomes the latest.
func CheckHead(x *store.Execution, latest int, missing bool) error {
	switch {
	case missing:
		return fmt.Errorf("execution %s: workflow %s: %w", x.ID, x.WorkflowID, store.ErrNotFound)
	case x.Version > latest:
		return fmt.Errorf("execution %s: workflow %s version %d: %w", x.ID, x.WorkflowID, x.Version, store.ErrNotFound)
	case x.Version == 0:
		x.Version = latest
	}
	return nil
}

// Dispatchable reports whether x, claimed by owner, is still to be marked
// dispatched: ErrConflict when another dispatcher claimed it since, false
// when it is marked already.
func Dispatchable(x *store.Execution, owner string) (bool, error) {
	if x.ClaimedBy != owner {
		return false, fmt.Errorf("execution %s: %w: claimed by another dispatcher", x.ID, store.ErrConflict)
	}
	return x.DispatchedAt == nil, nil
}

// CancelEvent applies a cancel at at to x (Cancel) and returns the event to
// record, nil when a cancel was already requested, or ErrConflict when x
// has ended.
func CancelEvent(x *store.Execution, at time.Time) (*store.Event, error) {
	change, ok := Cancel(x, at)
	if !ok {
		return nil, fmt.Errorf("execution %s: %w: it is %s", x.ID, store.ErrConflict, x.Status)
	}
	if change == "" {
		return nil, nil
	}
	e := ChangeEvent(x, change, at)
	return &e, nil
}

// AuditObjects checks e (CheckAudit) and returns its objects as stored.
func AuditObjects(e *store.AuditEntry) ([]byte, error) {
	if err := CheckAudit(e); err != nil {
		return nil, err
	}
	return json.Marshal(e.Objects)
}

// CheckPrune checks a prune's limit; what names the prune.
func CheckPrune(what string, limit int) error {
	if limit <= 0 {
		return fmt.Errorf("prune %s: %w: limit %d, want positive", what, store.ErrInvalid, limit)
	}
	return nil
}

// NewWorkflow checks in (CheckWorkflow) and returns the version it stores:
// version 1 on create; on update the driver sets the version it reads.
func NewWorkflow(in *store.WorkflowInput, update bool) (*store.Workflow, error) {
	if err := CheckWorkflow(in, update); err != nil {
		return nil, err
	}
	w := &store.Workflow{ID: in.ID, Name: in.Name, Definition: in.Definition, CreatedAt: in.At}
	if !update {
		w.Version = 1
	}
	return w, nil
}

// Splits is Store.Splits from a NodeRuns answer.
func Splits(runs []*store.NodeRun, err error) ([]store.SplitProgress, error) {
	if err != nil {
		return nil, err
	}
	return store.SplitsOf(runs), nil
}
