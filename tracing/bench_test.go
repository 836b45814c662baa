package tracing_test

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/rune-org/rune/tracing"
)

// What a node run pays with tracing on and no exporter: its span, and the
// traceparent its messages carry (docs/benchmarks.md).
func BenchmarkNodeSpan(b *testing.B) {
	tr := tracing.New(sdktrace.NewTracerProvider())
	parent := ""
	b.ReportAllocs()
	for b.Loop() {
		ctx, span := tr.Start(context.Background(), tracing.Run{ExecutionID: "exec_20261124T000000_0123456789ab", WorkflowID: "bench_linear", NodeID: "step_3", Attempt: 1, Traceparent: parent})
		parent = tr.Traceparent(ctx)
		span.End()
	}
}
