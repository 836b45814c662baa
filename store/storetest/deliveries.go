package storetest

import (
	"bytes"
	"context"
	"testing"

	"github.com/rune-org/rune/store"
)

// testHookDeliveries: a hook's deliveries are listed newest first with
// what they were answered, only the newest keep are kept, other hooks'
// are apart, and deleting the hook deletes them.
func testHookDeliveries(ctx context.Context, t *testing.T, h *harness) {
	h.workflow(ctx, t, "wf-deliveries")
	for i, id := range []string{"hk_d1", "hk_d2"} {
		if err := h.s.CreateHook(ctx, &store.Hook{ID: id, WorkflowID: "wf-deliveries", Name: id,
			SecretHash: bytes.Repeat([]byte{byte(20 + i)}, 32), CreatedAt: at(1)}); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := h.s.ListHookDeliveries(ctx, "hk_d1", 10); err != nil || len(got) != 0 {
		t.Fatalf("ListHookDeliveries(none yet) = %v, %v; want none", got, err)
	}
	accepted := &store.HookDelivery{HookID: "hk_d1", ReceivedAt: at(2), Status: 202, ExecutionID: "x-1", Size: 17}
	refused := &store.HookDelivery{HookID: "hk_d1", ReceivedAt: at(3), Status: 401, Code: "unauthorized", Size: 5}
	event := &store.HookDelivery{HookID: "hk_d1", ReceivedAt: at(3), Status: 202, EventID: "ev-1", Size: 2}
	other := &store.HookDelivery{HookID: "hk_d2", ReceivedAt: at(4), Status: 413, Code: "too_large", Size: 1 << 20}
	for _, d := range []*store.HookDelivery{accepted, refused, event, other} {
		if err := h.s.RecordHookDelivery(ctx, d, 3); err != nil {
			t.Fatalf("RecordHookDelivery(%+v): %v", d, err)
		}
		if d.Seq == 0 {
			t.Fatalf("RecordHookDelivery(%+v) set no Seq", d)
		}
	}
	got, err := h.s.ListHookDeliveries(ctx, "hk_d1", 10)
	if err != nil {
		t.Fatal(err)
	}
	want := []*store.HookDelivery{event, refused, accepted} // newest first; equal times keep their order
	if len(got) != len(want) {
		t.Fatalf("ListHookDeliveries = %d deliveries, want %d", len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.Seq != w.Seq || g.HookID != w.HookID || !g.ReceivedAt.Equal(w.ReceivedAt) || g.Status != w.Status ||
			g.Code != w.Code || g.ExecutionID != w.ExecutionID || g.EventID != w.EventID || g.Size != w.Size {
			t.Errorf("delivery %d = %+v, want %+v", i, g, w)
		}
	}
	if got, _ := h.s.ListHookDeliveries(ctx, "hk_d1", 1); len(got) != 1 || got[0].Seq != event.Seq {
		t.Errorf("ListHookDeliveries(limit 1) = %v, want the newest", got)
	}

	// Over keep: the oldest go.
	for i := range 3 {
		if err := h.s.RecordHookDelivery(ctx, &store.HookDelivery{HookID: "hk_d1", ReceivedAt: at(5 + float64(i)), Status: 429, Code: "rate_limited"}, 3); err != nil {
			t.Fatal(err)
		}
	}
	got, _ = h.s.ListHookDeliveries(ctx, "hk_d1", 10)
	if len(got) != 3 {
		t.Fatalf("after 6 deliveries kept 3: listed %d", len(got))
	}
	for _, d := range got {
		if d.Code != "rate_limited" {
			t.Errorf("kept %+v: want only the 3 newest (rate_limited)", d)
		}
	}
	if got, _ := h.s.ListHookDeliveries(ctx, "hk_d2", 10); len(got) != 1 || got[0].Code != "too_large" {
		t.Errorf("hk_d2's deliveries = %v, want its one", got)
	}

	if err := h.s.DeleteHook(ctx, "hk_d1"); err != nil {
		t.Fatal(err)
	}
	if got, err := h.s.ListHookDeliveries(ctx, "hk_d1", 10); err != nil || len(got) != 0 {
		t.Errorf("deliveries of a deleted hook = %v, %v; want none", got, err)
	}
}
