package storetest

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/rune-org/rune/store"
)

// Every update is a new immutable version; the old ones stay readable.
func testWorkflowVersions(ctx context.Context, t *testing.T, h *harness) {
	w := h.workflow(ctx, t, "orders")
	if w.ID != "orders" || w.Version != 1 || w.Name != "Workflow orders" || !w.CreatedAt.Equal(t0) || w.DeletedAt != nil {
		t.Fatalf("created %+v", w)
	}
	def2 := json.RawMessage(`{"id":"wf","nodes":[{"id":"start","type":"trigger"},{"id":"log","type":"log"}],"edges":[]}`)
	w2, err := h.s.UpdateWorkflow(ctx, store.WorkflowInput{ID: "orders", Name: "Orders v2", Definition: def2, At: at(10)})
	if err != nil || w2.Version != 2 {
		t.Fatalf("UpdateWorkflow = %+v, %v", w2, err)
	}
	latest, err := h.s.GetWorkflow(ctx, "orders", 0)
	if err != nil || latest.Version != 2 || latest.Name != "Orders v2" || !jsonEqual(latest.Definition, def2) || !latest.CreatedAt.Equal(at(10)) {
		t.Fatalf("GetWorkflow(latest) = %+v, %v", latest, err)
	}
	v1, err := h.s.GetWorkflow(ctx, "orders", 1)
	if err != nil || v1.Version != 1 || !jsonEqual(v1.Definition, definition) {
		t.Fatalf("GetWorkflow(v1) = %+v, %v", v1, err)
	}
	vs, err := h.s.ListVersions(ctx, "orders", 0, "")
	if err != nil || len(vs.Items) != 2 || vs.Items[0].Version != 2 || vs.Items[1].Version != 1 || vs.Next != "" ||
		vs.Items[0].Definition != nil || vs.Items[0].Name != "Orders v2" {
		t.Fatalf("ListVersions = %+v, %v, want versions 2 and 1 without definitions", vs, err)
	}
	p1, err := h.s.ListVersions(ctx, "orders", 1, "")
	if err != nil || len(p1.Items) != 1 || p1.Items[0].Version != 2 || p1.Next == "" {
		t.Fatalf("ListVersions(limit 1) = %+v, %v", p1, err)
	}
	p2, err := h.s.ListVersions(ctx, "orders", 1, p1.Next)
	if err != nil || len(p2.Items) != 1 || p2.Items[0].Version != 1 || p2.Next != "" {
		t.Fatalf("ListVersions(page 2) = %+v, %v", p2, err)
	}
	_, err = h.s.GetWorkflow(ctx, "orders", 3)
	wantErr(t, "GetWorkflow(v3)", err, store.ErrNotFound, "orders")
	_, err = h.s.GetWorkflow(ctx, "nope", 0)
	wantErr(t, "GetWorkflow(unknown)", err, store.ErrNotFound, "nope")
	_, err = h.s.ListVersions(ctx, "nope", 0, "")
	wantErr(t, "ListVersions(unknown)", err, store.ErrNotFound, "nope")
	_, err = h.s.UpdateWorkflow(ctx, store.WorkflowInput{ID: "nope", Definition: definition})
	wantErr(t, "UpdateWorkflow(unknown)", err, store.ErrNotFound, "nope")
	_, err = h.s.CreateWorkflow(ctx, store.WorkflowInput{ID: "orders", Definition: definition})
	wantErr(t, "CreateWorkflow(existing)", err, store.ErrConflict, "orders")

	gen, err := h.s.CreateWorkflow(ctx, store.WorkflowInput{Definition: definition})
	if err != nil || gen.ID == "" || gen.Version != 1 {
		t.Fatalf("CreateWorkflow without id = %+v, %v", gen, err)
	}
}

// An update conditional on the latest version (If-Match) is refused once
// another stored a version; an unchanged definition with IfChanged stores
// nothing, whatever its key order and spacing.
func testWorkflowConditions(ctx context.Context, t *testing.T, h *harness) {
	h.workflow(ctx, t, "cond")
	def2 := json.RawMessage(`{"id":"cond","nodes":[{"id":"start","type":"trigger"}],"edges":[]}`)
	w2, err := h.s.UpdateWorkflow(ctx, store.WorkflowInput{ID: "cond", Definition: def2, IfVersion: 1, At: at(1)})
	if err != nil || w2.Version != 2 || w2.Unchanged {
		t.Fatalf("UpdateWorkflow(IfVersion 1) = %+v, %v, want version 2", w2, err)
	}
	_, err = h.s.UpdateWorkflow(ctx, store.WorkflowInput{ID: "cond", Definition: definition, IfVersion: 1, At: at(2)})
	wantErr(t, "UpdateWorkflow(stale IfVersion)", err, store.ErrPrecondition, "cond")
	same := json.RawMessage(`{ "edges": [], "nodes": [{"type":"trigger", "id":"start"}], "id": "cond" }`)
	w, err := h.s.UpdateWorkflow(ctx, store.WorkflowInput{ID: "cond", Definition: same, IfChanged: true, At: at(3)})
	if err != nil || !w.Unchanged || w.Version != 2 || !w.CreatedAt.Equal(at(1)) {
		t.Fatalf("UpdateWorkflow(unchanged) = %+v, %v, want version 2 unchanged", w, err)
	}
	vs, err := h.s.ListVersions(ctx, "cond", 0, "")
	if err != nil || len(vs.Items) != 2 {
		t.Fatalf("ListVersions after an unchanged update = %+v, %v, want 2 versions", vs, err)
	}
	w3, err := h.s.UpdateWorkflow(ctx, store.WorkflowInput{ID: "cond", Definition: definition, IfChanged: true, IfVersion: 2, At: at(4)})
	if err != nil || w3.Unchanged || w3.Version != 3 {
		t.Fatalf("UpdateWorkflow(changed, IfChanged) = %+v, %v, want version 3", w3, err)
	}
}

// A deleted workflow disappears from lists and latest reads; its versions
// stay readable for its executions; its id is not reused.
func testWorkflowDelete(ctx context.Context, t *testing.T, h *harness) {
	h.workflow(ctx, t, "a")
	h.workflow(ctx, t, "b")
	if err := h.s.DeleteWorkflow(ctx, "a", at(5)); err != nil {
		t.Fatal(err)
	}
	_, err := h.s.GetWorkflow(ctx, "a", 0)
	wantErr(t, "GetWorkflow(deleted, latest)", err, store.ErrNotFound, "a")
	v1, err := h.s.GetWorkflow(ctx, "a", 1)
	if err != nil || v1.DeletedAt == nil || !v1.DeletedAt.Equal(at(5)) {
		t.Fatalf("GetWorkflow(deleted, v1) = %+v, %v", v1, err)
	}
	page, err := h.s.ListWorkflows(ctx, 0, "")
	if err != nil || !slices.Equal(ids(page.Items, wfID), []string{"b"}) {
		t.Fatalf("ListWorkflows = %v, %v", ids(page.Items, wfID), err)
	}
	_, err = h.s.UpdateWorkflow(ctx, store.WorkflowInput{ID: "a", Definition: definition})
	wantErr(t, "UpdateWorkflow(deleted)", err, store.ErrNotFound, "a")
	wantErr(t, "DeleteWorkflow twice", h.s.DeleteWorkflow(ctx, "a", at(6)), store.ErrNotFound, "a")
	wantErr(t, "DeleteWorkflow(unknown)", h.s.DeleteWorkflow(ctx, "nope", at(6)), store.ErrNotFound, "nope")
	_, err = h.s.CreateWorkflow(ctx, store.WorkflowInput{ID: "a", Definition: definition})
	wantErr(t, "CreateWorkflow(deleted id)", err, store.ErrConflict, "a")
}

func wfID(w *store.Workflow) string { return w.ID }

// Pages of workflows by id, each once, the latest version of each.
func testWorkflowList(ctx context.Context, t *testing.T, h *harness) {
	var want []string
	for i := range 7 {
		id := name("wf_", 6-i) // created out of id order
		h.workflow(ctx, t, id)
		want = append(want, id)
	}
	slices.Sort(want)
	if _, err := h.s.UpdateWorkflow(ctx, store.WorkflowInput{ID: want[0], Definition: definition}); err != nil {
		t.Fatal(err)
	}
	var got []string
	cursor, pages := "", 0
	for {
		page, err := h.s.ListWorkflows(ctx, 3, cursor)
		if err != nil {
			t.Fatalf("ListWorkflows page %d: %v", pages, err)
		}
		pages++
		if len(page.Items) > 3 {
			t.Fatalf("page of %d, limit 3", len(page.Items))
		}
		for _, w := range page.Items {
			got = append(got, w.ID)
			if w.ID == want[0] && w.Version != 2 {
				t.Errorf("%s listed at version %d, want the latest (2)", w.ID, w.Version)
			}
		}
		if cursor = page.Next; cursor == "" {
			break
		}
	}
	if !slices.Equal(got, want) || pages != 3 {
		t.Errorf("listed %v in %d pages, want %v in 3", got, pages, want)
	}
	_, err := h.s.ListWorkflows(ctx, 3, "garbage!")
	wantErr(t, "ListWorkflows(bad cursor)", err, store.ErrInvalid, "cursor")
}

func testWorkflowInvalid(ctx context.Context, t *testing.T, h *harness) {
	_, err := h.s.CreateWorkflow(ctx, store.WorkflowInput{ID: "x", Definition: json.RawMessage(`{"id":`)})
	wantErr(t, "CreateWorkflow(bad JSON)", err, store.ErrInvalid, "definition")
	_, err = h.s.CreateWorkflow(ctx, store.WorkflowInput{ID: strings.Repeat("x", 129), Definition: definition})
	wantErr(t, "CreateWorkflow(long id)", err, store.ErrInvalid, "workflow id")
	_, err = h.s.UpdateWorkflow(ctx, store.WorkflowInput{Definition: definition})
	wantErr(t, "UpdateWorkflow(no id)", err, store.ErrInvalid, "workflow id")
}

func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	ja, _ := json.Marshal(x)
	jb, _ := json.Marshal(y)
	return string(ja) == string(jb)
}
