package storetest

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/rune-org/rune/store"
)

// testExecutionSearch: the list's trigger filter (a kind or one trigger)
// and its input filter (scalars at paths, all of them; the JSON type
// counts: 42 is not "42").
func testExecutionSearch(ctx context.Context, t *testing.T, h *harness) {
	h.workflow(ctx, t, "wf")
	for i, in := range []struct{ input, trigger string }{
		{`{"user_id":42,"plan":"pro"}`, "api"},
		{`{"user_id":"42","plan":"pro"}`, "hook:h1"},
		{`{"user_id":7,"plan":"free","address":{"country":"NO","zip":"0150"}}`, "hook:h2"},
		{`{"user_id":42,"plan":"free","address":{"country":"SE"},"tags":[42]}`, "schedule:s1"},
		{`{"user_id":null,"ok":true}`, "rerun:x0000"},
	} {
		h.execution(ctx, t, store.ExecutionInput{ID: name("x", i), WorkflowID: "wf", Input: json.RawMessage(in.input),
			Trigger: in.trigger, At: at(float64(i))})
	}
	m := func(v string, path ...string) store.InputMatch {
		return store.InputMatch{Path: path, Value: json.RawMessage(v)}
	}
	for _, tc := range []struct {
		name string
		f    store.ExecutionFilter
		want []string
	}{
		{"trigger kind", store.ExecutionFilter{Trigger: "hook"}, []string{"x0002", "x0001"}},
		{"one trigger", store.ExecutionFilter{Trigger: "hook:h2"}, []string{"x0002"}},
		{"api", store.ExecutionFilter{Trigger: "api"}, []string{"x0000"}},
		{"not a prefix of an id", store.ExecutionFilter{Trigger: "hook:h"}, nil},
		{"number", store.ExecutionFilter{Input: []store.InputMatch{m("42", "user_id")}}, []string{"x0003", "x0000"}},
		{"string", store.ExecutionFilter{Input: []store.InputMatch{m(`"42"`, "user_id")}}, []string{"x0001"}},
		{"two conditions", store.ExecutionFilter{Input: []store.InputMatch{m("42", "user_id"), m(`"free"`, "plan")}}, []string{"x0003"}},
		{"nested", store.ExecutionFilter{Input: []store.InputMatch{m(`"NO"`, "address", "country")}}, []string{"x0002"}},
		{"null and true", store.ExecutionFilter{Input: []store.InputMatch{m("null", "user_id"), m("true", "ok")}}, []string{"x0004"}},
		{"not inside an array", store.ExecutionFilter{Input: []store.InputMatch{m("42", "tags")}}, nil},
		{"absent key", store.ExecutionFilter{Input: []store.InputMatch{m("1", "nope")}}, nil},
		{"with trigger and workflow", store.ExecutionFilter{WorkflowID: "wf", Trigger: "schedule", Input: []store.InputMatch{m("42", "user_id")}}, []string{"x0003"}},
	} {
		page, err := h.s.ListExecutions(ctx, tc.f)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := ids(page.Items, execID); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	// Pages of an input filter.
	page, err := h.s.ListExecutions(ctx, store.ExecutionFilter{Limit: 1, Input: []store.InputMatch{m("42", "user_id")}})
	if err != nil || len(page.Items) != 1 || page.Next == "" {
		t.Fatalf("first page %v, %v", page, err)
	}
	page, err = h.s.ListExecutions(ctx, store.ExecutionFilter{Limit: 1, Cursor: page.Next, Input: []store.InputMatch{m("42", "user_id")}})
	if got := ids(page.Items, execID); err != nil || !slices.Equal(got, []string{"x0000"}) {
		t.Errorf("second page %v, %v", got, err)
	}
	for _, tc := range []struct {
		f       store.ExecutionFilter
		mention string
	}{
		{store.ExecutionFilter{Input: []store.InputMatch{m(`{"a":1}`, "x")}}, "input.x"},
		{store.ExecutionFilter{Input: []store.InputMatch{m(`[1]`, "x")}}, "input.x"},
		{store.ExecutionFilter{Input: []store.InputMatch{m(`nope`, "x")}}, "not JSON"},
		{store.ExecutionFilter{Input: []store.InputMatch{m(`1`)}}, "keys"},
		{store.ExecutionFilter{Input: []store.InputMatch{m(`1`, "a", "")}}, "input.a."},
		{store.ExecutionFilter{Input: []store.InputMatch{m(`1`, "a"), m(`2`, "a", "b")}}, "input.a.b"},
	} {
		_, err := h.s.ListExecutions(ctx, tc.f)
		wantErr(t, "ListExecutions(bad input)", err, store.ErrInvalid, tc.mention)
	}
}
