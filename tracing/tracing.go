// Package tracing makes one execution one OpenTelemetry trace: a span per
// node run, carried from message to message as a W3C traceparent
// (broker.Message.Trace), whichever worker or scheduler handles each. A nil
// *Tracer traces nothing and costs a nil check.
//
// Every span of an execution has the trace id derived from the execution
// id, so that branches resumed by the scheduler (whose frozen messages
// carry no traceparent) and the first nodes (started by a client that
// traces nothing) join the same trace: their parent is the execution's
// root span context, derived likewise, which no process records. Trace
// viewers show it as the trace's missing root.
package tracing

import (
	"context"
	"crypto/sha256"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Span attribute keys.
const (
	AttrExecution = "rune.execution_id"
	AttrWorkflow  = "rune.workflow_id"
	AttrNode      = "rune.node_id"
	AttrLineage   = "rune.lineage"
	AttrAttempt   = "rune.attempt"
	AttrTimer     = "rune.resumed_by_scheduler"
	AttrVersion   = "rune.workflow_version"
)

// Tracer starts Rune's spans.
type Tracer struct {
	t    trace.Tracer
	prop propagation.TraceContext
}

// New returns a Tracer on tp (nil tp: nil, no tracing).
func New(tp trace.TracerProvider) *Tracer {
	if tp == nil {
		return nil
	}
	return &Tracer{t: tp.Tracer(scope)}
}

// scope is the instrumentation scope of Rune's spans.
const scope = "github.com/rune-org/rune"

// Run names one node run for a span.
type Run struct {
	ExecutionID, WorkflowID, NodeID, Lineage string
	Attempt                                  int
	// Traceparent is the W3C traceparent the message carried ("" for none).
	Traceparent string
	// Resumed is set for a wait's branch resumed by the scheduler.
	Resumed bool
}

// Start starts the span of a node run: a child of the span that published
// its message, or of the execution's root when the message carried none.
// The caller ends the span.
func (t *Tracer) Start(ctx context.Context, r Run) (context.Context, trace.Span) {
	if t == nil {
		return ctx, trace.SpanFromContext(ctx)
	}
	parent := ctx
	if r.Traceparent != "" {
		parent = t.prop.Extract(ctx, propagation.MapCarrier{"traceparent": r.Traceparent})
	}
	if !trace.SpanContextFromContext(parent).IsValid() {
		parent = trace.ContextWithRemoteSpanContext(ctx, Root(r.ExecutionID))
	}
	name := "node " + r.NodeID
	if r.Resumed {
		name = "resume " + r.NodeID
	}
	return t.t.Start(parent, name, trace.WithAttributes(r.attrs()...), trace.WithSpanKind(trace.SpanKindConsumer))
}

// Fused starts the span of a node run inside a hop (a fused node, run
// without a message of its own): a child of ctx's span — the hop's or the
// fused node's before it, ended or not — made by the same TracerProvider,
// so that there is a span per node run with fusion on as off. When ctx has
// no span (tracing off) it returns ctx and a span that records nothing.
// The caller ends the span.
func Fused(ctx context.Context, r Run) (context.Context, trace.Span) {
	sp := trace.SpanFromContext(ctx)
	if !sp.SpanContext().IsValid() {
		return ctx, trace.SpanFromContext(context.Background())
	}
	return sp.TracerProvider().Tracer(scope).Start(ctx, "node "+r.NodeID, trace.WithAttributes(r.attrs()...), trace.WithSpanKind(trace.SpanKindInternal))
}

// attrs are the span attributes of the node run r.
func (r Run) attrs() []attribute.KeyValue {
	attrs := []attribute.KeyValue{
		attribute.String(AttrExecution, r.ExecutionID),
		attribute.String(AttrWorkflow, r.WorkflowID),
		attribute.String(AttrNode, r.NodeID),
		attribute.Int(AttrAttempt, r.Attempt),
	}
	if r.Lineage != "" {
		attrs = append(attrs, attribute.String(AttrLineage, r.Lineage))
	}
	if r.Resumed {
		attrs = append(attrs, attribute.Bool(AttrTimer, true))
	}
	return attrs
}

// Dispatch starts the span of a server dispatching execution executionID
// (publishing its first messages): a child of the execution's root. The
// messages published under the returned context carry its traceparent
// (Traceparent), so the first nodes' spans are its children. The caller
// ends the span.
func (t *Tracer) Dispatch(ctx context.Context, executionID, workflowID string, version int) (context.Context, trace.Span) {
	if t == nil {
		// A span that records nothing, never ctx's own: the caller ends it.
		return ctx, trace.SpanFromContext(context.Background())
	}
	parent := trace.ContextWithRemoteSpanContext(ctx, Root(executionID))
	return t.t.Start(parent, "dispatch "+executionID, trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(
		attribute.String(AttrExecution, executionID),
		attribute.String(AttrWorkflow, workflowID),
		attribute.Int(AttrVersion, version),
	))
}

// Traceparent is the W3C traceparent of ctx's span ("" when none), for the
// messages published under it.
func (t *Tracer) Traceparent(ctx context.Context) string {
	if t == nil {
		return ""
	}
	return traceparent(ctx)
}

// ExecutionTraceparent is the W3C traceparent of ctx's span when that span
// is in execution executionID's trace, else "": the first messages of an
// execution started under a span of another trace (a caller's own) must
// not take the execution out of its trace.
func ExecutionTraceparent(ctx context.Context, executionID string) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() || sc.TraceID() != Root(executionID).TraceID() {
		return ""
	}
	return traceparent(ctx)
}

// SpanTraceparent is the W3C traceparent of ctx's span ("" when none).
func SpanTraceparent(ctx context.Context) string { return traceparent(ctx) }

func traceparent(ctx context.Context) string {
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	return c["traceparent"]
}

// Root is the span context every span of an execution descends from: its
// trace id and span id are derived from the execution id.
func Root(executionID string) trace.SpanContext {
	h := sha256.Sum256([]byte("rune trace " + executionID))
	var tid trace.TraceID
	var sid trace.SpanID
	copy(tid[:], h[:16])
	copy(sid[:], h[16:24])
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true})
}

// InjectHTTP sets the W3C traceparent of ctx's span on h, so that a service
// a node calls joins the execution's trace. It does nothing when ctx has no
// span (tracing off) or h has a traceparent already (the workflow's own).
func InjectHTTP(ctx context.Context, h http.Header) {
	if h.Get("traceparent") != "" || !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(h))
}

// AttrNodeType is the span attribute of the node's type.
const AttrNodeType = "rune.node_type"

// NodeType adds the node's type to ctx's span, when it records: the
// engine knows it once it has compiled the message's definition.
func NodeType(ctx context.Context, nodeType string) {
	if sp := trace.SpanFromContext(ctx); sp.IsRecording() {
		sp.SetAttributes(attribute.String(AttrNodeType, nodeType))
	}
}
