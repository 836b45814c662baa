package server_test

import (
	"context"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/rune-org/rune/tracing"
)

// The server's dispatch of an execution is a span of the execution's
// trace, a child of its root, and the first node's span is its child: the
// first message carries the dispatch's traceparent.
func TestDispatchSpan(t *testing.T) {
	t.Parallel()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	a := newAPI(t, embeddedTargetTraced(t, tracing.New(tp)))
	a.pushWorkflow(wfDef("dispatched", `{"id":"one","type":"set","parameters":{"values":{"a":1}}}`, `{"id":"e1","src":"start","dst":"one"}`))
	x := a.trigger("dispatched", `{}`)
	a.waitStatus(x.ID, "completed")
	root := tracing.Root(x.ID)
	// The node's span ends after its completion is published: wait for it.
	deadline := time.Now().Add(30 * time.Second)
	var dispatch, node *tracetest.SpanStub
	for dispatch == nil || node == nil {
		if time.Now().After(deadline) {
			t.Fatalf("spans of trace %s: dispatch %v, node %v; all: %v", root.TraceID(), dispatch != nil, node != nil, spanNames(exp.GetSpans()))
		}
		time.Sleep(20 * time.Millisecond)
		dispatch, node = nil, nil
		for _, s := range exp.GetSpans() {
			if s.SpanContext.TraceID() != root.TraceID() {
				continue
			}
			switch s.Name {
			case "dispatch " + x.ID:
				dispatch = &s
			case "node one":
				node = &s
			}
		}
	}
	if dispatch.Parent.SpanID() != root.SpanID() {
		t.Errorf("dispatch span's parent %s, want the execution's root %s", dispatch.Parent.SpanID(), root.SpanID())
	}
	attrs := map[string]string{}
	for _, kv := range dispatch.Attributes {
		attrs[string(kv.Key)] = kv.Value.String()
	}
	if attrs[tracing.AttrExecution] != x.ID || attrs[tracing.AttrWorkflow] != "dispatched" || attrs[tracing.AttrVersion] != "1" {
		t.Errorf("dispatch span attributes %v, want execution %s, workflow dispatched, version 1", attrs, x.ID)
	}
	if node.Parent.SpanID() != dispatch.SpanContext.SpanID() {
		t.Errorf("first node's span has parent %s, want the dispatch span %s", node.Parent.SpanID(), dispatch.SpanContext.SpanID())
	}
}

func spanNames(spans tracetest.SpanStubs) []string {
	var names []string
	for _, s := range spans {
		names = append(names, s.Name+" "+s.SpanContext.TraceID().String())
	}
	return names
}
