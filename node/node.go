// Package node defines what a node type is: the contract between the engine and
// the code behind each "type" of dsl.md, and the registry that maps names to types.
//
// A node type knows nothing of queues, retries or routing beyond its own
// parameters: the engine owns those.
package node

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"github.com/rune-org/rune/expr"
	"github.com/rune-org/rune/workflow"
)

// Type is one node type of dsl.md.
type Type interface {
	// Check reports every problem with the node's parameters through c.
	// It is called once per node during validation and never panics on any input.
	Check(c *workflow.NodeCheck)
	// Compile prepares a valid node to run: it compiles every expression and
	// template of its parameters once, so running does no parsing.
	Compile(n *workflow.Node, c *expr.Compiler) (Runner, error)
}

// Runner runs one compiled node. It is safe for concurrent use.
type Runner interface {
	// Run executes the node once. A failure is returned as an *Error, which
	// says whether trying again may help. Run honours ctx: when ctx is done it
	// returns promptly with ctx's error.
	Run(ctx context.Context, in *Input) (Result, error)
}

// Pure is implemented by runners that do no I/O: their work is bounded by
// the expression limits, so the engine runs them without a deadline of
// their own (which costs a timer per run).
type Pure interface {
	Pure()
}

// Eager is implemented by runners that may start before the coordinator
// has said their message should run, when the message is a first copy on
// its first delivery (engine.Delivery.First): one coordination round trip per
// node instead of two. The price, for such a node: a halt (or cancel) that
// lands while its message is queued is seen after the node ran, whose
// result is then discarded and which reports skipped; and in the rare race
// of a first copy delivered after a replayed copy of the same message has
// finished, the node runs a second time (as it does today when both copies
// run at once). Nodes whose repetition must not happen (email, sms) keep
// their own record and do not implement it; the http node does.
type Eager interface {
	Eager()
}

// Vars is implemented by runners whose output is also recorded under
// $vars.<VarName()> (the notification steps' email_<id> and sms_<id>): the
// engine adds it to the context that later nodes and the completion see.
type Vars interface {
	VarName() string
}

// Router is implemented by runners that choose which of their outgoing
// edges to follow (conditional, switch). RoutingEdges are the edges they
// choose among: when such a node fails and its error strategy is ignore,
// none of them is followed, since there is no decision to follow.
type Router interface {
	RoutingEdges() []string
}

// Input is what a node sees when it runs.
type Input struct {
	// Env is the expression environment: the accumulated context ("$trigger",
	// "$<node_id>", "$item", ...) plus "$execution", "$node" and "$now".
	// Runners must not modify it.
	Env map[string]any
	// NodeID is the id of the node being run.
	NodeID string
	// ExecutionID and Attempt identify this attempt; together with NodeID and
	// the lineage they make an idempotency key for side effects.
	ExecutionID string
	Attempt     int
	// WorkflowID is the workflow of the execution.
	WorkflowID string
	// IdempotencyKey is the same for every attempt and every redelivery of this
	// node on this branch of this execution. Nodes with side effects pass it to
	// the systems they call so a repeated attempt is not a repeated effect.
	IdempotencyKey string
	// Secrets resolves the node's credentials reference; nil when the runtime has no store.
	Secrets Secrets
	// Now is the time the engine started this attempt.
	Now time.Time
	// StartedAt is when the execution started, the same for every node and
	// attempt: what a node pins to a version current then (the message
	// templates of email and sms).
	StartedAt time.Time
	// Logger is for the node's own lines; the engine's carries the run's
	// execution id, workflow id, node id, attempt and lineage on each.
	Logger *slog.Logger
}

// Secrets resolves a credential reference to its fields (token, username, ...).
// Values it returns must never be logged, put in an output or in an error.
type Secrets interface {
	Resolve(ctx context.Context, ref string) (map[string]string, error)
}

// Result is a successful run.
type Result struct {
	// Output lands in the context as "$<node_id>". It must be JSON-compatible:
	// nil, bool, float64/int/int64, string, []any, map[string]any.
	Output any
	// Route lists the outgoing edge ids to follow. Nil means every outgoing
	// edge but the error edge; a non-nil empty slice ends the branch.
	Route []string
	// Items, for split nodes, are the elements to fan out over: one branch
	// per element (RFC 004).
	Items []any
}

// Error is a node failure (RFC 001 §6.2 error object, plus retryability).
type Error struct {
	Code      string
	Message   string
	Details   map[string]any
	Retryable bool
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Defer is returned by a runner (as its error) that must not run yet: the
// engine parks the run durably until Until (the message waits in the
// timer store, as a wait does) and reports the node waiting, with
// resume_at Until and reason Reason (message.NodeStatus.Reason); at Until
// it runs the node again, from the start, with the same input and
// idempotency key. A runtime without a timer store fails the node with
// UNSUPPORTED_NODE instead, as it does for a wait. Only nodes run with the
// coordinator's Begin (neither Pure nor Eager) may defer; elsewhere a
// Defer fails the node the same way. Reason is upper snake case
// ("QUIET_HOURS").
type Defer struct {
	Until  time.Time
	Reason string
}

func (d *Defer) Error() string {
	return "deferred until " + d.Until.UTC().Format(time.RFC3339) + " (" + d.Reason + ")"
}

// Errorf returns a non-retryable *Error.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Registry maps type names to node types. It is read-only after set-up.
type Registry struct {
	types map[string]Type
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{types: map[string]Type{}} }

// Register adds a type under name, replacing any earlier one.
func (r *Registry) Register(name string, t Type) { r.types[name] = t }

// Lookup returns the type registered under name.
func (r *Registry) Lookup(name string) (Type, bool) {
	t, ok := r.types[name]
	return t, ok
}

// Names returns the registered type names, sorted.
func (r *Registry) Names() []string {
	names := make([]string, 0, len(r.types))
	for n := range r.types {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// CheckNode implements workflow.NodeChecker: it reports an unknown type, or
// lets the node's type check its parameters.
func (r *Registry) CheckNode(c *workflow.NodeCheck) {
	t, ok := r.types[c.Node.Type]
	if !ok {
		c.Report("type", "unknown node type %q (known: %v)", c.Node.Type, r.Names())
		return
	}
	t.Check(c)
}
