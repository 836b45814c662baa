package store

import (
	"context"
	"time"
)

// Flow control by key (issue 35; docs/dsl.md "Flow control"): the parts of
// it that live in the database. The server decides what a workflow's
// settings ask (server/flow.go); a FlowStore keeps the slots, the queues
// and the debounces, durably and safely for several servers.

// Priorities of an execution: the claim takes the highest first.
const (
	PriorityMin     = 1
	PriorityDefault = 5
	PriorityMax     = 10
)

// HeldUntil is the available_at of an execution queued for a concurrency
// slot: no claim reaches it until a promotion sets it to now.
var HeldUntil = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)

// Concurrency outcomes of FlowStore.Admit when the key's slots are taken.
const (
	OnLimitQueue        = "queue"
	OnLimitDrop         = "drop"
	OnLimitCancelOldest = "cancel_oldest"
)

// FlowCreate is what FlowStore.CreateFlowExecution adds to a create.
type FlowCreate struct {
	// Priority, 1…10; 0 is PriorityDefault.
	Priority int
	// DebounceKey, when not empty, collapses the create into the enqueued
	// execution of the same workflow and key, if there is one: its input
	// becomes in.Input and it becomes available Period from now, but no
	// later than MaxWait (when > 0) after its first trigger.
	DebounceKey string
	Period      time.Duration
	MaxWait     time.Duration
	// Limit > 0 is the workflow's concurrency limit (on_limit "queue") and
	// ConcurrencyKey the execution's key, and the create decides the slot
	// of an execution due at once, as Admit would on its first claim: it
	// takes a free slot of its key when none of the key's executions is
	// queued, else it is created queued for a slot, held, so the claim
	// never sees it and the promoter serves the keys round-robin from its
	// first turn. Otherwise (no limit, due later) Admit decides its slot.
	ConcurrencyKey string
	Limit          int
}

// Admission is the concurrency setting of a claimed execution.
type Admission struct {
	Key     string
	Limit   int
	OnLimit string // OnLimitQueue when empty
	Owner   string // the claimer, whose claim a queued execution gives up
	Now     time.Time
}

// Admitted is FlowStore.Admit's answer.
type Admitted struct {
	// Run: the execution holds a slot; dispatch it. Otherwise it was put
	// back enqueued (queued) or, with Drop, is to be ended.
	Run  bool
	Drop bool
	// Cancel names the execution on_limit cancel_oldest displaces (to be
	// cancelled by the caller), "" for none.
	Cancel string
}

// FlowState is why an execution is enqueued, as far as flow control goes.
type FlowState struct {
	Priority int
	// Key and Limit are its concurrency key and limit; Queued says it waits
	// for a slot, Position its place in the key's queue (1: next) and
	// Running how many of the key's executions hold a slot.
	Key      string
	Limit    int
	Queued   bool
	Position int
	Running  int
	// Debounced: later triggers of DebounceKey still collapse into it.
	Debounced   bool
	DebounceKey string
}

// FlowStore is the flow-control part of a store (store/sqlite and
// store/postgres implement it). Every method is safe for concurrent use,
// also from several servers sharing one database.
type FlowStore interface {
	// CreateFlowExecution is CreateExecution with a priority and a
	// debounce. debounced reports that the create collapsed into an
	// existing execution, which it returns (created false).
	CreateFlowExecution(ctx context.Context, in ExecutionInput, f FlowCreate) (x *Execution, created, debounced bool, err error)
	// SetPriority sets the priority of enqueued executions ids.
	SetPriority(ctx context.Context, ids []string, priority int) error
	// Admit decides a claimed execution's concurrency slot: one it holds
	// already (a claim after a lost dispatch, a promotion) is kept; else it
	// takes a free slot of its key when no execution of the key is queued,
	// or, slots full, is queued (put back enqueued, held, its claim
	// released), dropped or displaces the oldest execution of its key as
	// a.OnLimit says. Concurrent Admits of one key never admit past a.Limit.
	Admit(ctx context.Context, x *Execution, a Admission) (Admitted, error)
	// Promote frees the slots of ended executions and gives them to the
	// queued ones, visiting up to keys keys with a queue, least recently
	// served first (round-robin), each in its priority and arrival order.
	// It returns how many executions it made available at now.
	Promote(ctx context.Context, now time.Time, keys int) (int, error)
	// Priorities returns the priority of each of executions ids whose
	// priority is not PriorityDefault (the dispatcher's claimed batch: its
	// node messages carry it).
	Priorities(ctx context.Context, ids []string) (map[string]int, error)
	// FlowState returns execution id's flow state (zero when none).
	FlowState(ctx context.Context, id string) (FlowState, error)
	// QueuedByWorkflow counts the enqueued executions of each workflow.
	QueuedByWorkflow(ctx context.Context) (map[string]int, error)
}
