package sqlstore

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/rune-org/rune/store"
)

// An update's conditions: a stale IfVersion is ErrPrecondition; IfChanged
// answers the stored version, marked Unchanged, when the definition is the
// same JSON whatever its key order and spacing, and nothing otherwise.
func TestUpdateCheck(t *testing.T) {
	cur := func() (*store.Workflow, error) {
		return &store.Workflow{ID: "w", Version: 3, Definition: json.RawMessage(`{"a": 1, "b": [1, 2]}`)}, nil
	}
	if _, err := UpdateCheck(&store.WorkflowInput{ID: "w", IfVersion: 2}, 3, cur); !errors.Is(err, store.ErrPrecondition) {
		t.Errorf("stale IfVersion: %v, want ErrPrecondition", err)
	}
	same := &store.WorkflowInput{ID: "w", IfVersion: 3, IfChanged: true, Definition: json.RawMessage(`{"b":[1,2],"a":1}`)}
	if w, err := UpdateCheck(same, 3, cur); err != nil || w == nil || !w.Unchanged || w.Version != 3 {
		t.Errorf("same definition: %+v, %v; want version 3 unchanged", w, err)
	}
	other := &store.WorkflowInput{ID: "w", IfChanged: true, Definition: json.RawMessage(`{"a":2,"b":[1,2]}`)}
	if w, err := UpdateCheck(other, 3, cur); err != nil || w != nil {
		t.Errorf("changed definition: %+v, %v; want nothing (store a version)", w, err)
	}
	if w, err := UpdateCheck(&store.WorkflowInput{ID: "w", Definition: same.Definition}, 3, cur); err != nil || w != nil {
		t.Errorf("without IfChanged: %+v, %v; want nothing", w, err)
	}
}

// Bad input is ErrInvalid naming what is wrong; defaults are filled in.
func TestChecks(t *testing.T) {
	for name, err := range map[string]error{
		"update without id": CheckWorkflow(&store.WorkflowInput{Definition: json.RawMessage(`{}`)}, true),
		"definition":        CheckWorkflow(&store.WorkflowInput{ID: "w", Definition: json.RawMessage(`{`)}, false),
		"claim owner":       CheckClaim(&store.Claim{Lease: time.Second, Limit: 1}),
		"claim lease":       CheckClaim(&store.Claim{Owner: "o", Limit: 1}),
		"filter status":     CheckExecutionFilter(store.ExecutionFilter{Status: "done"}),
	} {
		if !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	in := store.WorkflowInput{Definition: json.RawMessage(`{}`)}
	if err := CheckWorkflow(&in, false); err != nil || in.ID == "" || in.At.IsZero() {
		t.Errorf("create: %+v, %v; want an id and a time", in, err)
	}
	if _, err := NewExecution(store.ExecutionInput{ID: "x", WorkflowID: "w", Input: json.RawMessage(`[`)}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("bad input: %v, want ErrInvalid", err)
	}
	x, err := NewExecution(store.ExecutionInput{ID: "x", WorkflowID: "w"})
	if err != nil || x.Status != store.StatusEnqueued || string(x.Input) != "{}" || !x.AvailableAt.Equal(x.CreatedAt) {
		t.Errorf("NewExecution: %+v, %v; want enqueued, input {}, available at creation", x, err)
	}
}

// A cancel ends an enqueued execution at once, asks a running one to halt,
// is recorded once, and does nothing to an ended one.
func TestCancel(t *testing.T) {
	at := time.Now()
	x := &store.Execution{Status: store.StatusEnqueued}
	if change, ok := Cancel(x, at); !ok || change != store.ChangeCancelled || x.Status != store.StatusCancelled || x.FinishedAt == nil {
		t.Errorf("enqueued: %q %v %+v", change, ok, x)
	}
	x = &store.Execution{Status: store.StatusProcessing}
	if change, ok := Cancel(x, at); !ok || change != store.ChangeCancelRequested || !x.CancelRequested || x.Status != store.StatusProcessing {
		t.Errorf("processing: %q %v %+v", change, ok, x)
	}
	if change, ok := Cancel(x, at); !ok || change != "" {
		t.Errorf("again: %q %v, want nothing more to record", change, ok)
	}
	if _, ok := Cancel(&store.Execution{Status: store.StatusCompleted}, at); ok {
		t.Error("an ended execution was cancelled")
	}
}

// Pages are read with one row more than the limit, which says a next
// page exists; NotMarked keeps want's order.
func TestPageOfAndNotMarked(t *testing.T) {
	p := PageOf([]int{1, 2, 3}, 2, func(last int) string { return "after" + string(rune('0'+last)) })
	if !slices.Equal(p.Items, []int{1, 2}) || p.Next != "after2" {
		t.Errorf("page %+v, want [1 2] and a cursor after 2", p)
	}
	if p := PageOf([]int{1, 2}, 2, func(int) string { return "x" }); p.Next != "" {
		t.Errorf("last page has a cursor %q", p.Next)
	}
	if got := NotMarked([]string{"a", "b", "c"}, []string{"c", "a"}); !slices.Equal(got, []string{"b"}) {
		t.Errorf("NotMarked: %v, want [b]", got)
	}
}
