// Package storetest is the conformance suite every store.Store passes
// (Exercise), its benchmark (BenchAppendHistory), and fresh stores for other
// packages' tests (SQLite, Postgres).
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rune-org/rune/store"
)

// Option adjusts the suite.
type Option func(*config)

type config struct {
	twin func(t *testing.T, s store.Store) store.Store
}

// WithTwin gives the suite a second handle on a store's database, with its
// own connections (as another server process would have): claim tests then
// claim through both. twin registers its own cleanup with t.
func WithTwin(twin func(t *testing.T, s store.Store) store.Store) Option {
	return func(c *config) { c.twin = twin }
}

// Exercise runs the suite. open returns a new, empty store isolated from
// every other call's and closes it at t's cleanup. Subtests run in parallel.
func Exercise(ctx context.Context, t *testing.T, open func(t *testing.T) store.Store, opts ...Option) {
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	cases := []struct {
		name string
		fn   func(ctx context.Context, t *testing.T, h *harness)
	}{
		{"WorkflowConditions", testWorkflowConditions},
		{"WorkflowVersions", testWorkflowVersions},
		{"WorkflowDelete", testWorkflowDelete},
		{"WorkflowList", testWorkflowList},
		{"WorkflowInvalid", testWorkflowInvalid},
		{"ExecutionCreate", testExecutionCreate},
		{"ExecutionCreateErrors", testExecutionCreateErrors},
		{"ExecutionIdempotency", testExecutionIdempotency},
		{"ExecutionIdempotencyConcurrent", testExecutionIdempotencyConcurrent},
		{"ExecutionCreateConcurrentMixed", testExecutionCreateConcurrentMixed},
		{"ExecutionList", testExecutionList},
		{"ExecutionListPages", testExecutionListPages},
		{"ExecutionCancel", testExecutionCancel},
		{"ClaimDue", testClaimDue},
		{"ClaimConcurrent", testClaimConcurrent},
		{"ClaimExpired", testClaimExpired},
		{"ClaimInvalid", testClaimInvalid},
		{"MarkDispatchedAll", testMarkDispatchedAll},
		{"PruneHistory", testPruneHistory},
		{"Stats", testStats},
		{"HistoryRetry", testHistoryRetry},
		{"HistoryOutOfOrder", testHistoryOutOfOrder},
		{"HistorySplit", testHistorySplit},
		{"HistoryWait", testHistoryWait},
		{"HistoryCancel", testHistoryCancel},
		{"HistoryDeadLetter", testHistoryDeadLetter},
		{"HistoryUnknownExecution", testHistoryUnknownExecution},
		{"HistoryConcurrent", testHistoryConcurrent},
		{"EventsOrder", testEventsOrder},
		{"EventsLargeBatch", testEventsLargeBatch},
		{"EventsConcurrent", testEventsConcurrent},
		{"Credentials", testCredentials},
		{"Tokens", testTokens},
		{"Sessions", testSessions},
		{"Audit", testAudit},
		{"Hooks", testHooks},
		{"Schedules", testSchedules},
		{"ScheduleFireConcurrent", testScheduleFireConcurrent},
		{"Sends", testSends}, // issue 36
		{"Subscribers", testSubscribers},
		// Issue 38: the list's trigger and input filters.
		{"ExecutionSearch", testExecutionSearch},
		// Pause and re-run (issue 34).
		{"WorkflowPause", testWorkflowPause},
		{"ExecutionPauseRerun", testExecutionPauseRerun},
		// issue 34: child executions (children.go)
		{"ChildLinks", testChildLinks},
		// issue 38: a hook's last deliveries (deliveries.go)
		{"HookDeliveries", testHookDeliveries},
		// issue 36: versioned message templates (templates.go)
		{"Templates", testTemplates},
		// issue 35: a full key's arrivals are held at create (flow.go)
		{"FlowHoldAtCreate", testFlowHoldAtCreate},
		{"FlowPriorities", testFlowPriorities},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := &harness{s: open(t), cfg: cfg}
			h.twin = func(t *testing.T) store.Store {
				if cfg.twin == nil {
					return h.s
				}
				return cfg.twin(t, h.s)
			}
			tc.fn(ctx, t, h)
		})
	}
}

type harness struct {
	s    store.Store
	cfg  config
	twin func(t *testing.T) store.Store
}

// t0 is the suite's clock: a fixed time, so the tests decide what is due.
var t0 = time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)

func at(sec float64) time.Time { return t0.Add(time.Duration(sec * float64(time.Second))) }

var definition = json.RawMessage(`{"id":"wf","nodes":[{"id":"start","type":"trigger"}],"edges":[]}`)

func (h *harness) workflow(ctx context.Context, t *testing.T, id string) *store.Workflow {
	t.Helper()
	w, err := h.s.CreateWorkflow(ctx, store.WorkflowInput{ID: id, Name: "Workflow " + id, Definition: definition, At: t0})
	if err != nil {
		t.Fatalf("CreateWorkflow(%q): %v", id, err)
	}
	return w
}

func (h *harness) execution(ctx context.Context, t *testing.T, in store.ExecutionInput) *store.Execution {
	t.Helper()
	if in.At.IsZero() {
		in.At = t0
	}
	x, created, err := h.s.CreateExecution(ctx, in)
	if err != nil || !created {
		t.Fatalf("CreateExecution(%q): %v (created %v)", in.ID, err, created)
	}
	return x
}

func (h *harness) get(ctx context.Context, t *testing.T, id string) *store.Execution {
	t.Helper()
	x, err := h.s.GetExecution(ctx, id)
	if err != nil {
		t.Fatalf("GetExecution(%q): %v", id, err)
	}
	return x
}

func (h *harness) append(ctx context.Context, t *testing.T, evs ...store.HistoryEvent) []store.Event {
	t.Helper()
	out, err := h.s.AppendHistory(ctx, evs)
	if err != nil {
		t.Fatalf("AppendHistory: %v", err)
	}
	return out
}

func wantErr(t *testing.T, what string, err, want error, mention string) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: error %v, want %v", what, err, want)
	}
	if mention != "" && !strings.Contains(err.Error(), mention) {
		t.Errorf("%s: error %q does not name %q", what, err, mention)
	}
}

func equalTimePtr(a *time.Time, b time.Time) bool { return a != nil && a.Equal(b) }

func ids[T any](items []T, id func(T) string) []string {
	out := make([]string, len(items))
	for i, v := range items {
		out[i] = id(v)
	}
	return out
}

func execID(x *store.Execution) string { return x.ID }

func name(prefix string, i int) string { return fmt.Sprintf("%s%04d", prefix, i) }
