package server_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"
	"time"
)

// TestRateLimitKillNine: `rune server` (its durable embedded runtime on
// SQLite) killed with kill -9 while most runs of a rate-limited node wait
// for their slots, then started again: the API shows why they wait
// (reason RATE_LIMITED), and after the restart every run runs once, none
// before its slot (5 per second).
func TestRateLimitKillNine(t *testing.T) {
	if testing.Short() {
		t.Skip("kills real processes")
	}
	t.Parallel()
	r := newScheduleRig(t, "sqlite")
	p := r.server()
	a := r.api(p)
	a.pushWorkflow(wfDef("paced", `
		{"id":"each","type":"split","parameters":{"input_array":"{{ $trigger.xs }}"}},
		{"id":"send","type":"set","parameters":{"values":{"at":"{{ $now }}"}},"rate_limit":{"key":"paced-sends","limit":5,"per":"1s"}},
		{"id":"agg","type":"aggregator"}`,
		`{"id":"e1","src":"start","dst":"each"},{"id":"e2","src":"each","dst":"send"},{"id":"e3","src":"send","dst":"agg"}`))
	x := a.trigger("paced", `{"xs":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20]}`)
	type run struct {
		NodeID   string     `json:"node_id"`
		Status   string     `json:"status"`
		ResumeAt *time.Time `json:"resume_at"`
		Reason   string     `json:"reason"`
	}
	var seen run
	deadline := time.Now().Add(60 * time.Second)
	for seen.Reason == "" {
		var v struct {
			Nodes []run `json:"nodes"`
		}
		a.want(http.StatusOK, "GET", "/v1/executions/"+x.ID, nil, &v)
		for _, n := range v.Nodes {
			if n.NodeID == "send" && n.Status == "waiting" && n.Reason != "" {
				seen = n
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no waiting run of send with a reason within 60 s: %+v", v.Nodes)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if seen.Reason != "RATE_LIMITED" || seen.ResumeAt == nil {
		t.Fatalf("waiting run %+v: want reason RATE_LIMITED and resume_at", seen)
	}
	p.kill()
	p2 := r.server()
	defer p2.stop()
	a = r.api(p2)
	done := a.waitStatus(x.ID, "completed", "failed")
	var c struct {
		Status       string `json:"status"`
		FinalContext struct {
			Agg struct {
				Items     []struct{ At time.Time } `json:"items"`
				Succeeded int                      `json:"succeeded"`
			} `json:"$agg"`
		} `json:"final_context"`
	}
	if err := json.Unmarshal(done.Completion, &c); err != nil {
		t.Fatal(err)
	}
	if c.Status != "completed" || c.FinalContext.Agg.Succeeded != 20 {
		t.Fatalf("completion %s, want completed with 20 runs", done.Completion)
	}
	var starts []time.Time
	for _, it := range c.FinalContext.Agg.Items {
		starts = append(starts, it.At)
	}
	slices.SortFunc(starts, func(a, b time.Time) int { return a.Compare(b) })
	// The k-th start is no earlier than its slot, 200ms·k after the
	// first slot. The first run may itself start late (its reservation
	// and its start are SQLite writes, slow on a loaded machine), by up to
	// 300ms allowed here: 20 runs still take at least 3.5 s, not 0.
	for k := range starts {
		if d := starts[k].Sub(starts[0]); d < time.Duration(k)*200*time.Millisecond-300*time.Millisecond {
			t.Fatalf("run %d started %v after the first, before its slot (5 per second): %v", k, d, starts)
		}
	}
}
