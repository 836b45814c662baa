package console

import (
	"encoding/json"
	"net/http"
	"slices"
	"time"

	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/store"
)

// The Approvals page (issue 34): the wait_for_event nodes with an
// "approval" now waiting, with Approve and Reject, which post to the API's
// POST /v1/executions/{id}/approvals/{node} through /ui/api (so the
// token's role decides, as for every write).

// approval is one waiting approval as the page shows it.
type approval struct {
	ExecutionID, WorkflowID, NodeID, Branch string
	Title, Key                              string
	Since                                   time.Time
	TimeoutAt                               *time.Time
}

// approvalsScan bounds the running executions the page reads.
const approvalsScan = store.ListLimitMax

func (c *Console) approvalsPage(w http.ResponseWriter, r *http.Request) {
	acc := accessOf(r)
	// Running: processing, or waiting when every unfinished node waits.
	var running []*store.Execution
	for _, st := range []string{store.StatusWaiting, store.StatusProcessing} {
		page, err := c.cfg.Store.ListExecutions(r.Context(), store.ExecutionFilter{Status: st, Limit: approvalsScan})
		if err != nil {
			c.fail(w, r, "the approvals", err)
			return
		}
		running = append(running, page.Items...)
	}
	var items []approval
	for _, x := range running {
		if !acc.sees(x.WorkflowID) {
			continue
		}
		runs, err := c.cfg.Store.NodeRuns(r.Context(), x.ID)
		if err != nil {
			c.fail(w, r, "the approvals", err)
			return
		}
		for _, run := range runs {
			if a, ok := approvalOf(x, run); ok {
				items = append(items, a)
			}
		}
	}
	slices.SortStableFunc(items, func(a, b approval) int { return a.Since.Compare(b.Since) })
	c.render(w, r, "approvals", map[string]any{"Title": "Approvals", "Items": items})
}

// approvalOf reads a waiting approval from a node run's waiting details
// (the engine's: {"event", "key", "approval": {"title"}}).
func approvalOf(x *store.Execution, run *store.NodeRun) (approval, bool) {
	if run.Status != message.StatusWaiting || len(run.Details) == 0 {
		return approval{}, false
	}
	var d struct {
		Event, Key string
		Approval   *struct{ Title string }
	}
	if json.Unmarshal(run.Details, &d) != nil || d.Approval == nil || d.Event == "" {
		return approval{}, false
	}
	a := approval{ExecutionID: x.ID, WorkflowID: x.WorkflowID, NodeID: run.NodeID, Branch: run.Branch,
		Title: d.Approval.Title, Key: d.Key, Since: run.ReportedAt, TimeoutAt: run.ResumeAt}
	if run.StartedAt != nil {
		a.Since = *run.StartedAt
	}
	return a, true
}
