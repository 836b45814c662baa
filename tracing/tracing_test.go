package tracing_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/rune-org/rune/client"
	"github.com/rune-org/rune/distributed"
	"github.com/rune-org/rune/embedded"
	"github.com/rune-org/rune/engine"
	"github.com/rune-org/rune/internal/testinfra"
	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/scheduler"
	"github.com/rune-org/rune/tracing"
	"github.com/rune-org/rune/worker"
)

// waitWorkflow runs a node, waits (a timer the scheduler fires), then
// runs another.
const waitWorkflow = `{"id": "traced", "nodes": [
  {"id": "start", "type": "trigger", "trigger": true},
  {"id": "before", "type": "set", "parameters": {"values": {"a": 1}}},
  {"id": "pause", "type": "delay", "parameters": {"duration": "PT0.2S"}},
  {"id": "after", "type": "set", "parameters": {"values": {"b": 2}}}],
 "edges": [{"id": "e1", "src": "start", "dst": "before"}, {"id": "e2", "src": "before", "dst": "pause"},
  {"id": "e3", "src": "pause", "dst": "after"}]}`

// checkTrace asserts that spans are one trace — the execution's — with a
// span per node run, each the child of the span that published its
// message: before ← root, pause ← before, resume pause ← root (the frozen
// message carries no traceparent), after ← resume pause.
func checkTrace(t *testing.T, execID string, spans tracetest.SpanStubs) {
	t.Helper()
	root := tracing.Root(execID)
	byName := map[string]tracetest.SpanStub{}
	for _, s := range spans {
		if s.SpanContext.TraceID() != root.TraceID() {
			continue // another test's execution
		}
		if _, dup := byName[s.Name]; dup {
			t.Errorf("two spans named %q", s.Name)
		}
		byName[s.Name] = s
	}
	want := map[string]string{"node before": "", "node pause": "node before", "resume pause": "", "node after": "resume pause"}
	if len(byName) != len(want) {
		names := []string{}
		for n := range byName {
			names = append(names, n)
		}
		t.Fatalf("spans of the execution's trace: %v, want %d: one per node run and the resume", names, len(want))
	}
	for name, parent := range want {
		if _, ok := byName[name]; !ok {
			t.Errorf("no span %q", name)
			continue
		}
		attrs := checkSpan(t, byName, name, parent, root)
		wantType := "set"
		if strings.HasSuffix(name, "pause") {
			wantType = "delay"
		}
		if attrs[tracing.AttrExecution] != execID || attrs[tracing.AttrWorkflow] != "traced" || attrs[tracing.AttrAttempt] != "1" || attrs[tracing.AttrNodeType] != wantType {
			t.Errorf("span %q attributes %v, want execution %s, workflow traced, attempt 1, node type %s", name, attrs, execID, wantType)
		}
	}
}

func provider(t *testing.T) (*tracing.Tracer, *tracetest.InMemoryExporter) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tracing.New(tp), exp
}

// runTraced runs def to its completion on a traced embedded runtime and
// returns the completion and every span recorded.
func runTraced(t *testing.T, def string) (*message.Completion, tracetest.SpanStubs) {
	t.Helper()
	tr, exp := provider(t)
	rt, err := embedded.New(embedded.Options{Tracer: tr, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := rt.Run(ctx, []byte(def), map[string]any{}, nil)
	if err != nil || c.Status != message.CompletionCompleted {
		t.Fatalf("run: %v %v", c, err)
	}
	rt.Close() // spans end when their handlers return
	return c, exp.GetSpans()
}

// On the embedded runtime, an execution with a wait is one trace.
func TestTraceEmbedded(t *testing.T) {
	t.Parallel()
	c, spans := runTraced(t, waitWorkflow)
	checkTrace(t, c.ExecutionID, spans)
}

// Across RabbitMQ — two workers and a scheduler on one deployment — the
// traceparent travels in message headers and the execution is one trace.
func TestTraceDistributed(t *testing.T) {
	t.Parallel()
	tr, exp := provider(t)
	prefix := testinfra.Name(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rt, err := distributed.Connect(ctx, distributed.Config{AMQPURL: testinfra.AMQPURL(t), RedisURL: testinfra.RedisURL(t), Prefix: prefix, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = rt.DeleteTopology(context.Background(), prefix)
		rt.Close()
	}()
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			_ = worker.Run(wctx, worker.Config{Broker: rt.Broker, Engine: rt.Engine, Concurrency: 2, Tracer: tr, Logger: slog.New(slog.DiscardHandler)})
		})
	}
	wg.Go(func() {
		_ = scheduler.Run(wctx, scheduler.Config{Timers: rt.Timers, Broker: rt.Broker, Engine: rt.Engine, Tracer: tr, Logger: slog.New(slog.DiscardHandler)})
	})
	wf, err := rt.Engine.Compile([]byte(waitWorkflow))
	if err != nil {
		t.Fatal(err)
	}
	execID := engine.NewExecutionID(time.Now())
	c, err := client.Run(ctx, rt.Broker, rt.Engine, wf, execID, map[string]any{}, nil)
	stop()
	wg.Wait()
	if err != nil || c.Status != message.CompletionCompleted {
		t.Fatalf("run: %v %v", c, err)
	}
	checkTrace(t, execID, exp.GetSpans())
}

// A nil Tracer starts no span and gives no traceparent.
func TestNilTracer(t *testing.T) {
	t.Parallel()
	var tr *tracing.Tracer
	ctx, span := tr.Start(context.Background(), tracing.Run{ExecutionID: "e", NodeID: "n"})
	span.End()
	if trace.SpanContextFromContext(ctx).IsValid() || tr.Traceparent(ctx) != "" {
		t.Error("a nil Tracer traced")
	}
	if tracing.New(nil) != nil {
		t.Error("New(nil) is not nil")
	}
}

// A node's HTTP call carries the node run's traceparent, unless the
// workflow set one; without a span nothing is added.
func TestInjectHTTP(t *testing.T) {
	t.Parallel()
	tr, _ := provider(t)
	ctx, span := tr.Start(context.Background(), tracing.Run{ExecutionID: "exec_1", NodeID: "call"})
	defer span.End()
	h := http.Header{}
	tracing.InjectHTTP(ctx, h)
	want := "00-" + tracing.Root("exec_1").TraceID().String() + "-" + span.SpanContext().SpanID().String() + "-01"
	if got := h.Get("traceparent"); got != want {
		t.Errorf("traceparent %q, want %q", got, want)
	}
	own := http.Header{"Traceparent": {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}
	tracing.InjectHTTP(ctx, own)
	if own.Get("traceparent") != "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" {
		t.Errorf("the workflow's own traceparent was replaced: %q", own.Get("traceparent"))
	}
	none := http.Header{}
	tracing.InjectHTTP(context.Background(), none)
	if len(none) != 0 {
		t.Errorf("without a span: headers %v, want none", none)
	}
}

// The first messages of an execution carry the traceparent of a span of
// its trace (the dispatch's), never that of another trace; a nil Tracer's
// dispatch span records nothing.
func TestExecutionTraceparent(t *testing.T) {
	t.Parallel()
	tr, _ := provider(t)
	ctx, span := tr.Dispatch(context.Background(), "exec_1", "wf", 3)
	defer span.End()
	want := "00-" + tracing.Root("exec_1").TraceID().String() + "-" + span.SpanContext().SpanID().String() + "-01"
	if got := tracing.ExecutionTraceparent(ctx, "exec_1"); got != want {
		t.Errorf("traceparent %q, want %q", got, want)
	}
	if got := tracing.ExecutionTraceparent(ctx, "exec_2"); got != "" {
		t.Errorf("traceparent for another execution %q, want none", got)
	}
	if got := tracing.ExecutionTraceparent(context.Background(), "exec_1"); got != "" {
		t.Errorf("traceparent without a span %q, want none", got)
	}
	var off *tracing.Tracer
	octx, ospan := off.Dispatch(ctx, "exec_1", "wf", 3)
	ospan.End()
	if ospan.IsRecording() || !span.IsRecording() || octx != ctx {
		t.Error("a nil Tracer's dispatch recorded or ended the caller's span")
	}
}

// With fusion on, the pure nodes run in the hop of the node before them
// still have a span each, a child of the span of the node before: a span
// per node run, as with fusion off.
func TestTraceFused(t *testing.T) {
	t.Parallel()
	c, spans := runTraced(t, `{"id": "fused", "nodes": [
	  {"id": "start", "type": "trigger", "trigger": true},
	  {"id": "one", "type": "set", "parameters": {"values": {"a": 1}}},
	  {"id": "two", "type": "set", "parameters": {"values": {"b": 2}}},
	  {"id": "three", "type": "log", "parameters": {"message": "x"}}],
	 "edges": [{"id": "e1", "src": "start", "dst": "one"}, {"id": "e2", "src": "one", "dst": "two"},
	  {"id": "e3", "src": "two", "dst": "three"}]}`)
	root := tracing.Root(c.ExecutionID)
	byName := map[string]tracetest.SpanStub{}
	for _, s := range spans {
		if s.SpanContext.TraceID() == root.TraceID() {
			byName[s.Name] = s
		}
	}
	if len(byName) != 3 {
		for _, s := range spans {
			t.Logf("%s %s %s parent %s", s.Name, s.SpanContext.TraceID(), s.SpanContext.SpanID(), s.Parent.SpanID())
		}
		t.Fatalf("spans of the execution's trace: %v, want node one, two and three", spanNames(byName))
	}
	for name, parent := range map[string]string{"node one": "", "node two": "node one", "node three": "node two"} {
		if _, ok := byName[name]; !ok {
			t.Fatalf("no span %q: %v", name, spanNames(byName))
		}
		attrs := checkSpan(t, byName, name, parent, root)
		wantType := "set"
		if name == "node three" {
			wantType = "log"
		}
		if attrs[tracing.AttrExecution] != c.ExecutionID || attrs[tracing.AttrNode] != strings.TrimPrefix(name, "node ") || attrs[tracing.AttrAttempt] != "1" || attrs[tracing.AttrNodeType] != wantType {
			t.Errorf("span %q attributes %v", name, attrs)
		}
	}
}

func spanNames(m map[string]tracetest.SpanStub) []string {
	var names []string
	for n := range m {
		names = append(names, n)
	}
	return names
}

// checkSpan checks that the span name has as parent the span named parent
// ("": the execution's root) and returns its attributes.
func checkSpan(t *testing.T, byName map[string]tracetest.SpanStub, name, parent string, root trace.SpanContext) map[string]string {
	t.Helper()
	s := byName[name]
	wantParent := root.SpanID()
	if parent != "" {
		wantParent = byName[parent].SpanContext.SpanID()
	}
	if s.Parent.SpanID() != wantParent {
		t.Errorf("span %q has parent %s, want %s (%s)", name, s.Parent.SpanID(), wantParent, parent)
	}
	attrs := map[string]string{}
	for _, a := range s.Attributes {
		attrs[string(a.Key)] = a.Value.String()
	}
	return attrs
}

// A chain longer than a fused hop may be (64 nodes) runs in two hops: the
// first node of the second hop is a child of the last node of the first,
// as every node of the chain is of the node before it.
func TestTraceFusedPastTheBound(t *testing.T) {
	t.Parallel()
	const n = 70
	nodes := []string{`{"id": "start", "type": "trigger", "trigger": true}`}
	var edges []string
	prev := "start"
	for i := range n {
		id := fmt.Sprintf("n%02d", i)
		nodes = append(nodes, fmt.Sprintf(`{"id": %q, "type": "set", "parameters": {"values": {"v": %d}}}`, id, i))
		edges = append(edges, fmt.Sprintf(`{"id": "e%02d", "src": %q, "dst": %q}`, i, prev, id))
		prev = id
	}
	c, spans := runTraced(t, fmt.Sprintf(`{"id": "long", "nodes": [%s], "edges": [%s]}`, strings.Join(nodes, ","), strings.Join(edges, ",")))
	root := tracing.Root(c.ExecutionID)
	byName := map[string]tracetest.SpanStub{}
	for _, s := range spans {
		if s.SpanContext.TraceID() == root.TraceID() {
			byName[s.Name] = s
		}
	}
	if len(byName) != n {
		t.Fatalf("%d spans in the execution's trace, want %d", len(byName), n)
	}
	for i := 1; i < n; i++ {
		checkSpan(t, byName, fmt.Sprintf("node n%02d", i), fmt.Sprintf("node n%02d", i-1), root)
	}
}
