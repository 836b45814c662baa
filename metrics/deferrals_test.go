package metrics_test

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/rune-org/rune/embedded"
	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/metrics"
	"github.com/rune-org/rune/metrics/metricstest"
)

// Flow control's deferrals are counted by reason: a run of the embedded
// runtime over a rate limit of 2 per second (four runs: two start within
// the inline wait, two are deferred) and over a throttle of one per hour
// (two runs: one skipped).
func TestDeferralMetrics(t *testing.T) {
	t.Parallel()
	rec := metrics.New(metrics.Config{})
	rt, err := embedded.New(embedded.Options{Metrics: rec})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	def := `{"id":"limited","nodes":[
	  {"id":"start","type":"trigger","trigger":true},
	  {"id":"each","type":"split","parameters":{"input_array":"{{ $trigger.xs }}"}},
	  {"id":"send","type":"set","parameters":{"values":{"v":"{{ $item }}"}},"rate_limit":{"key":"metrics-rl","limit":2,"per":"1s"}},
	  {"id":"note","type":"set","parameters":{"values":{"v":1}},"throttle":{"key":"metrics-th","limit":1,"per":"1h"}},
	  {"id":"all","type":"aggregator"}],
	 "edges":[{"id":"e1","src":"start","dst":"each"},{"id":"e2","src":"each","dst":"send"},{"id":"e3","src":"send","dst":"all"},{"id":"e4","src":"all","dst":"note"}]}`
	for range 2 {
		c, err := rt.Run(ctx, []byte(def), map[string]any{"xs": []any{1, 2}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if c.Status != message.CompletionCompleted {
			t.Fatalf("completion %s (%v)", c.Status, c.FailureReason)
		}
	}
	srv := httptest.NewServer(rec.Handler())
	defer srv.Close()
	got := metricstest.Wait(t, srv.URL, map[string]float64{
		`rune_node_deferrals_total{reason="THROTTLED_SKIPPED",workflow="limited"}`: 1,
	})
	// Four runs at 2 per second: the slots are 0, 0.5, 1 and 1.5 s; the
	// first two start in hand (within 200 ms at most), the last two
	// are deferred.
	if n := got[`rune_node_deferrals_total{reason="RATE_LIMITED",workflow="limited"}`]; n < 2 {
		t.Errorf("RATE_LIMITED deferrals %v, want at least 2", n)
	}
	if n := got[`rune_node_deferral_seconds_count{reason="RATE_LIMITED"}`]; n < 2 {
		t.Errorf("deferral delays observed %v, want at least 2", n)
	}
}

// A nil Recorder records no deferral and does not panic.
func TestNilRecorderDeferral(t *testing.T) {
	var r *metrics.Recorder
	r.NodeDeferred("w", message.ReasonRateLimited, time.Second)
}
