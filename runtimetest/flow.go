package runtimetest

import (
	"slices"
	"time"

	"github.com/rune-org/rune/message"
)

// Flow control by key (issues 35, 36): a node's rate_limit defers the runs
// over it (waiting, RATE_LIMITED) and starts each at its slot; a throttle
// skips the runs over it, or defers them with "on_limit": "wait". Keys
// carry the execution id so that runs of the suite do not share them.
func init() { scenarios = append(scenarios, flowScenarios...) }

var flowScenarios = []scenario{
	{
		name: "RateLimitSpacesRuns",
		def: wf("ratelimited", `
			{"id":"each","type":"split","parameters":{"input_array":"{{ $trigger.xs }}"}},
			{"id":"send","type":"set","parameters":{"values":{"at":"{{ $now }}"}},
			 "rate_limit":{"key":"rl-{{ $execution.id }}","limit":5,"per":"1s"}},
			{"id":"agg","type":"aggregator"}`,
			`{"id":"e1","src":"start","dst":"each"},{"id":"e2","src":"each","dst":"send"},{"id":"e3","src":"send","dst":"agg"}`),
		input: `{"xs":[1,2,3,4,5,6]}`,
		check: func(r *result) {
			r.status(message.CompletionCompleted)
			items, _ := r.get("$agg.items").([]any)
			if len(items) != 6 {
				r.t.Fatalf("aggregated %d items, want 6: %s", len(items), r.dump())
			}
			var starts []time.Time
			for _, it := range items {
				m, _ := it.(map[string]any)
				at, err := time.Parse(time.RFC3339Nano, m["at"].(string))
				if err != nil {
					r.t.Fatalf("item %v: %v", it, err)
				}
				starts = append(starts, at)
			}
			slices.SortFunc(starts, func(a, b time.Time) int { return a.Compare(b) })
			// 5 per second, evenly spaced: the k-th start is no earlier
			// than its slot, k·200ms after the first (which starts at
			// once), less 50ms: $now is read a moment after the slot is
			// taken (the running status goes out in between), a moment
			// that varies under load. A run whose
			// timer fires late starts late, so starts may be closer.
			for k := 1; k < len(starts); k++ {
				if d := starts[k].Sub(starts[0]); d < time.Duration(k)*200*time.Millisecond-50*time.Millisecond {
					r.t.Fatalf("run %d started %v after the first, before its slot at %v (5 per second): %v", k, d, time.Duration(k)*200*time.Millisecond, starts)
				}
			}
			deferred := 0
			for _, s := range r.statuses {
				if s.NodeID == "send" && s.Status == message.StatusWaiting {
					if s.Reason != message.ReasonRateLimited || s.ResumeAt == nil {
						r.t.Fatalf("waiting status of send: reason %q, resume_at %v; want RATE_LIMITED with a time", s.Reason, s.ResumeAt)
					}
					deferred++
				}
			}
			if deferred < 3 {
				r.t.Fatalf("%d runs reported waiting, want at least 3 (those more than 200ms from their slot)", deferred)
			}
		},
	},
	{
		name: "ThrottleSkips",
		def: wf("throttled", `
			{"id":"each","type":"split","parameters":{"input_array":"{{ $trigger.xs }}"}},
			{"id":"note","type":"set","parameters":{"values":{"sent":true}},
			 "throttle":{"key":"th-{{ $execution.id }}","limit":2,"per":"1h"}},
			{"id":"agg","type":"aggregator"}`,
			`{"id":"e1","src":"start","dst":"each"},{"id":"e2","src":"each","dst":"note"},{"id":"e3","src":"note","dst":"agg"}`),
		input: `{"xs":[1,2,3,4]}`,
		check: func(r *result) {
			r.status(message.CompletionCompleted)
			items, _ := r.get("$agg.items").([]any)
			sent, throttled := 0, 0
			for _, it := range items {
				m, _ := it.(map[string]any)
				switch {
				case m["sent"] == true:
					sent++
				case m["sent"] == false && m["reason"] == message.ReasonThrottled:
					throttled++
				default:
					r.t.Fatalf("item %v: want {\"sent\": true} or the throttled output", it)
				}
			}
			if sent != 2 || throttled != 2 {
				r.t.Fatalf("%d sent, %d throttled, want 2 and 2: %s", sent, throttled, r.dump())
			}
		},
	},
	{
		name: "ThrottleWaits",
		def: wf("throttlewait", `
			{"id":"each","type":"split","parameters":{"input_array":"{{ $trigger.xs }}"}},
			{"id":"note","type":"set","parameters":{"values":{"at":"{{ $now }}"}},
			 "throttle":{"key":"th-{{ $execution.id }}","limit":2,"per":"1s","on_limit":"wait"}},
			{"id":"agg","type":"aggregator"}`,
			`{"id":"e1","src":"start","dst":"each"},{"id":"e2","src":"each","dst":"note"},{"id":"e3","src":"note","dst":"agg"}`),
		input: `{"xs":[1,2,3]}`,
		check: func(r *result) {
			r.status(message.CompletionCompleted)
			items, _ := r.get("$agg.items").([]any)
			var starts []time.Time
			for _, it := range items {
				m, _ := it.(map[string]any)
				at, err := time.Parse(time.RFC3339Nano, m["at"].(string))
				if err != nil {
					r.t.Fatalf("item %v: want a start time (every run runs): %v", it, err)
				}
				starts = append(starts, at)
			}
			if len(starts) != 3 {
				r.t.Fatalf("%d runs, want 3", len(starts))
			}
			slices.SortFunc(starts, func(a, b time.Time) int { return a.Compare(b) })
			// The window counts admissions; $now is read a moment after
			// (less 50ms for how that moment varies under load).
			if gap := starts[2].Sub(starts[0]); gap < 950*time.Millisecond {
				r.t.Fatalf("the third run started %v after the first, want a second (2 per second)", gap)
			}
			waited := 0
			for _, s := range r.statuses {
				if s.NodeID == "note" && s.Status == message.StatusWaiting && s.Reason == message.ReasonThrottled {
					waited++
				}
			}
			if waited < 1 {
				r.t.Fatal("no waiting status with reason THROTTLED")
			}
		},
	},
}
