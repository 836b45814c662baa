package server_test

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/rune-org/rune/metrics/metricstest"
)

// testMetrics runs executions and checks the server's own metrics on its
// API port: the counters grew by at least what this test ran (other
// subtests share the server, so by at least, not exactly), and every
// histogram observed it. /readyz answers without a token.
func testMetrics(t *testing.T, a *api, id string) {
	scrape := func() map[string]float64 {
		r := a.want(http.StatusOK, "GET", "/metrics", nil, nil)
		return metricstest.Parse(t, "/metrics", bytes.NewReader(r.body))
	}
	before := scrape()
	a.pushWorkflow(strings.Replace(readExample(t, "hello.json"), `"id": "hello"`, `"id": "`+id+`"`, 1))
	const n = 3
	for range n {
		x := a.trigger(id, `{"name": "Ada"}`)
		a.waitStatus(x.ID, "completed")
	}
	a.want(http.StatusCreated, "POST", "/v1/workflows/"+id+"/executions", []byte(`{}`), nil, "Idempotency-Key", "k")
	a.want(http.StatusOK, "POST", "/v1/workflows/"+id+"/executions", []byte(`{}`), nil, "Idempotency-Key", "k")
	// The counters grow once a batch's write returns, which can be just
	// after the API shows the completion: scrape until they have grown.
	metricstest.Until(t, scrape, func(after map[string]float64) (wrong []string) {
		for _, c := range []struct {
			series string
			min    float64
		}{
			{`rune_server_triggers_total{result="created"}`, n + 1},
			{`rune_server_triggers_total{result="repeated"}`, 1},
			{`rune_server_dispatched_total`, n},
			{`rune_server_dispatch_lag_seconds_count`, n},
			// A completion each, and at least a status per node run (3 nodes).
			{`rune_server_history_events_total{kind="completion"}`, n},
			{`rune_server_history_events_total{kind="status"}`, 3 * n},
			{`rune_server_history_write_lag_seconds_count`, 4 * n},
			{`rune_server_history_batch_size_count`, 1},
			{"rune_server_history_batch_size_sum", 4 * n}, // events in all batches
		} {
			if got := after[c.series] - before[c.series]; got < c.min {
				wrong = append(wrong, fmt.Sprintf("%s grew by %v, want at least %v", c.series, got, c.min))
			}
		}
		return wrong
	})
	var ready struct {
		Status string            `json:"status"`
		Checks map[string]string `json:"checks"`
	}
	a.want(http.StatusOK, "GET", "/readyz", nil, &ready, "Authorization", "")
	if ready.Status != "ready" || ready.Checks["store"] != "ok" {
		t.Fatalf("readyz %+v, want ready with the store ok", ready)
	}
	for name, st := range ready.Checks {
		if st != "ok" {
			t.Errorf("readyz: %s %s", name, st)
		}
	}
}
