package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rune-org/rune/store"
)

// Hooks: found by id and by secret hash; updates (rotation, disabling)
// replace what the server owns; a taken id or secret is a conflict.
func testHooks(ctx context.Context, t *testing.T, h *harness) {
	h.workflow(ctx, t, "wf-hooks")
	secret := bytes.Repeat([]byte{7}, 32)
	hk := &store.Hook{ID: "hk_1", WorkflowID: "wf-hooks", Name: "github", SecretHash: secret,
		Settings: []byte(`{"max_body":100}`), SigningKeyID: "k1", SigningSecret: []byte("sealed"), CreatedAt: at(1)}
	if err := h.s.CreateHook(ctx, hk); err != nil {
		t.Fatal(err)
	}
	if err := h.s.CreateHook(ctx, &store.Hook{ID: "hk_2", WorkflowID: "wf-hooks", Name: "plain",
		SecretHash: bytes.Repeat([]byte{8}, 32), CreatedAt: at(2)}); err != nil {
		t.Fatal(err)
	}
	got, err := h.s.HookBySecret(ctx, secret)
	if err != nil || got.ID != "hk_1" || got.WorkflowID != "wf-hooks" || string(got.Settings) != `{"max_body":100}` ||
		got.SigningKeyID != "k1" || string(got.SigningSecret) != "sealed" || got.Disabled || !got.CreatedAt.Equal(at(1)) {
		t.Fatalf("HookBySecret = %+v, %v", got, err)
	}
	plain, err := h.s.GetHook(ctx, "hk_2")
	if err != nil || plain.SigningKeyID != "" || plain.SigningSecret != nil || string(plain.Settings) != "{}" {
		t.Fatalf("GetHook(hk_2) = %+v, %v", plain, err)
	}
	wantErr(t, "CreateHook(same id)", h.s.CreateHook(ctx, &store.Hook{ID: "hk_1", WorkflowID: "wf-hooks",
		SecretHash: []byte("other")}), store.ErrConflict, "hk_1")
	wantErr(t, "CreateHook(same secret)", h.s.CreateHook(ctx, &store.Hook{ID: "hk_3", WorkflowID: "wf-hooks",
		SecretHash: secret}), store.ErrConflict, "hk_3")
	wantErr(t, "CreateHook(no secret)", h.s.CreateHook(ctx, &store.Hook{ID: "hk_4", WorkflowID: "wf-hooks"}), store.ErrInvalid, "secret")

	// Rotation: the old secret finds nothing, the new one the hook.
	rotated := bytes.Repeat([]byte{9}, 32)
	got.SecretHash, got.Disabled, got.UpdatedAt = rotated, true, at(5)
	if err := h.s.UpdateHook(ctx, got); err != nil {
		t.Fatal(err)
	}
	_, err = h.s.HookBySecret(ctx, secret)
	wantErr(t, "HookBySecret(rotated away)", err, store.ErrNotFound, "")
	got, err = h.s.HookBySecret(ctx, rotated)
	if err != nil || got.ID != "hk_1" || !got.Disabled || !got.UpdatedAt.Equal(at(5)) || !got.CreatedAt.Equal(at(1)) {
		t.Fatalf("after rotation: %+v, %v", got, err)
	}
	list, err := h.s.ListHooks(ctx, "wf-hooks")
	if err != nil || !slices.Equal(ids(list, func(h *store.Hook) string { return h.ID }), []string{"hk_1", "hk_2"}) {
		t.Fatalf("ListHooks = %v, %v", list, err)
	}
	if err := h.s.DeleteHook(ctx, "hk_1"); err != nil {
		t.Fatal(err)
	}
	_, err = h.s.GetHook(ctx, "hk_1")
	wantErr(t, "GetHook(deleted)", err, store.ErrNotFound, "hk_1")
	wantErr(t, "DeleteHook(deleted)", h.s.DeleteHook(ctx, "hk_1"), store.ErrNotFound, "hk_1")
	wantErr(t, "UpdateHook(deleted)", h.s.UpdateHook(ctx, got), store.ErrNotFound, "hk_1")
}

// Schedules: due when not paused, NextAt passed and the workflow not
// deleted; a fire moves NextAt and enqueues the slot's executions once.
func testSchedules(ctx context.Context, t *testing.T, h *harness) {
	h.workflow(ctx, t, "wf-sched")
	h.workflow(ctx, t, "wf-gone")
	next := at(10)
	sc := &store.Schedule{ID: "sc_1", WorkflowID: "wf-sched", Name: "nightly", Settings: []byte(`{"cron":"@every 10s"}`),
		NextAt: &next, CreatedAt: at(0)}
	if err := h.s.CreateSchedule(ctx, sc); err != nil {
		t.Fatal(err)
	}
	paused := &store.Schedule{ID: "sc_paused", WorkflowID: "wf-sched", Paused: true, NextAt: &next, CreatedAt: at(1)}
	gone := &store.Schedule{ID: "sc_gone", WorkflowID: "wf-gone", NextAt: &next, CreatedAt: at(1)}
	ended := &store.Schedule{ID: "sc_ended", WorkflowID: "wf-sched", CreatedAt: at(2)}
	for _, s := range []*store.Schedule{paused, gone, ended} {
		if err := h.s.CreateSchedule(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	wantErr(t, "CreateSchedule(same id)", h.s.CreateSchedule(ctx, &store.Schedule{ID: "sc_1", WorkflowID: "wf-sched"}), store.ErrConflict, "sc_1")
	if err := h.s.DeleteWorkflow(ctx, "wf-gone", at(3)); err != nil {
		t.Fatal(err)
	}
	due, err := h.s.DueSchedules(ctx, at(9), 10)
	if err != nil || len(due) != 0 {
		t.Fatalf("DueSchedules(before the slot) = %v, %v", due, err)
	}
	due, err = h.s.DueSchedules(ctx, at(10), 10)
	if err != nil || !slices.Equal(ids(due, func(s *store.Schedule) string { return s.ID }), []string{"sc_1"}) {
		t.Fatalf("DueSchedules(at the slot) = %v, %v", due, err)
	}
	got := due[0]
	if string(got.Settings) != `{"cron":"@every 10s"}` || got.Name != "nightly" || !equalTimePtr(got.NextAt, at(10)) || got.LastSlot != nil {
		t.Fatalf("due schedule = %+v", got)
	}

	// Fire the slot: NextAt moves on, the execution is enqueued with the
	// slot as its key and the schedule as its trigger.
	next2 := at(20)
	fire := store.Fire{ScheduleID: "sc_1", From: at(10), Next: &next2, LastSlot: at(10), At: at(10.2),
		Executions: []store.ExecutionInput{{ID: "x-slot-10", WorkflowID: "wf-sched", IdempotencyKey: "schedule:sc_1:10",
			Trigger: "schedule:sc_1", AvailableAt: at(10)}}}
	xs, err := h.s.FireSchedule(ctx, fire)
	if err != nil || len(xs) != 1 || xs[0].ID != "x-slot-10" || xs[0].Trigger != "schedule:sc_1" || xs[0].Version != 1 {
		t.Fatalf("FireSchedule = %v, %v", xs, err)
	}
	x := h.get(ctx, t, "x-slot-10")
	if x.Status != store.StatusEnqueued || x.IdempotencyKey != "schedule:sc_1:10" || !x.AvailableAt.Equal(at(10)) {
		t.Fatalf("fired execution = %+v", x)
	}
	// The same slot again (another replica that read the old NextAt): a
	// conflict, and no second execution.
	fire.Executions[0].ID = "x-slot-10-again"
	_, err = h.s.FireSchedule(ctx, fire)
	wantErr(t, "FireSchedule(fired slot)", err, store.ErrConflict, "sc_1")
	if _, err := h.s.GetExecution(ctx, "x-slot-10-again"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a second fire of a slot enqueued an execution: %v", err)
	}
	got, err = h.s.GetSchedule(ctx, "sc_1")
	if err != nil || !equalTimePtr(got.NextAt, at(20)) || !equalTimePtr(got.LastSlot, at(10)) {
		t.Fatalf("after the fire: %+v, %v", got, err)
	}

	// A slot whose execution exists (the key) is skipped, the rest enqueued.
	next3 := at(40)
	xs, err = h.s.FireSchedule(ctx, store.Fire{ScheduleID: "sc_1", From: at(20), Next: &next3, LastSlot: at(30), At: at(30.5),
		Executions: []store.ExecutionInput{
			{ID: "x-dup", WorkflowID: "wf-sched", IdempotencyKey: "schedule:sc_1:10"},
			{ID: "x-slot-20", WorkflowID: "wf-sched", IdempotencyKey: "schedule:sc_1:20", AvailableAt: at(20)},
			{ID: "x-slot-30", WorkflowID: "wf-sched", IdempotencyKey: "schedule:sc_1:30", AvailableAt: at(30)}}})
	if err != nil || !slices.Equal(ids(xs, execID), []string{"x-slot-20", "x-slot-30"}) {
		t.Fatalf("FireSchedule(catch up) = %v, %v", ids(xs, execID), err)
	}

	// Paused: not due, and a fire read before the pause is refused.
	got.Paused, got.UpdatedAt = true, at(31)
	got.NextAt = &next3
	if err := h.s.UpdateSchedule(ctx, got); err != nil {
		t.Fatal(err)
	}
	if due, err := h.s.DueSchedules(ctx, at(100), 10); err != nil || len(due) != 0 {
		t.Fatalf("DueSchedules(paused) = %v, %v", due, err)
	}
	_, err = h.s.FireSchedule(ctx, store.Fire{ScheduleID: "sc_1", From: at(40), LastSlot: at(40)})
	wantErr(t, "FireSchedule(paused)", err, store.ErrConflict, "sc_1")
	list, err := h.s.ListSchedules(ctx, "wf-sched")
	if err != nil || !slices.Equal(ids(list, func(s *store.Schedule) string { return s.ID }), []string{"sc_1", "sc_paused", "sc_ended"}) {
		t.Fatalf("ListSchedules = %v, %v", list, err)
	}
	if err := h.s.DeleteSchedule(ctx, "sc_1"); err != nil {
		t.Fatal(err)
	}
	_, err = h.s.GetSchedule(ctx, "sc_1")
	wantErr(t, "GetSchedule(deleted)", err, store.ErrNotFound, "sc_1")
	wantErr(t, "UpdateSchedule(deleted)", h.s.UpdateSchedule(ctx, got), store.ErrNotFound, "sc_1")
	_, err = h.s.FireSchedule(ctx, store.Fire{ScheduleID: "sc_gone", From: at(10), LastSlot: at(10),
		Executions: []store.ExecutionInput{{ID: "x-none", WorkflowID: "wf-sched"}}})
	wantErr(t, "FireSchedule(no key)", err, store.ErrInvalid, "idempotency key")
}

// Replicas (twin handles on one database) firing the same slots at once:
// each slot is fired by exactly one and enqueues exactly one execution.
func testScheduleFireConcurrent(ctx context.Context, t *testing.T, h *harness) {
	h.workflow(ctx, t, "wf-race")
	first := at(0)
	if err := h.s.CreateSchedule(ctx, &store.Schedule{ID: "sc_race", WorkflowID: "wf-race", NextAt: &first, CreatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	stores := []store.Store{h.s, h.twin(t), h.s, h.twin(t)}
	const slots = 20
	var mu sync.Mutex
	fired := map[int]int{}
	var wg sync.WaitGroup
	for r, st := range stores {
		wg.Go(func() {
			for {
				due, err := st.DueSchedules(ctx, at(slots), 10)
				if err != nil {
					t.Error(err)
					return
				}
				if len(due) == 0 {
					return
				}
				sc := due[0]
				slot := int(sc.NextAt.Sub(t0) / time.Second)
				var next *time.Time
				if slot+1 < slots {
					n := at(float64(slot + 1))
					next = &n
				}
				xs, err := st.FireSchedule(ctx, store.Fire{ScheduleID: sc.ID, From: *sc.NextAt, Next: next, LastSlot: *sc.NextAt,
					Executions: []store.ExecutionInput{{ID: fmt.Sprintf("x-%d-%d", r, slot), WorkflowID: "wf-race",
						IdempotencyKey: fmt.Sprintf("slot-%d", slot), AvailableAt: *sc.NextAt}}})
				if errors.Is(err, store.ErrConflict) {
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				fired[slot] += len(xs)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for slot := range slots {
		if fired[slot] != 1 {
			t.Errorf("slot %d enqueued %d executions, want 1", slot, fired[slot])
		}
	}
	page, err := h.s.ListExecutions(ctx, store.ExecutionFilter{WorkflowID: "wf-race", Limit: 100})
	if err != nil || len(page.Items) != slots {
		t.Fatalf("%d executions, want %d (%v)", len(page.Items), slots, err)
	}
}
