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

// at is the time of node's first status st.
func (r *result) at(node, st string) time.Time {
	for _, s := range r.statuses {
		if s.NodeID == node && s.Status == st {
			return s.ExecutedAt
		}
	}
	r.t.Fatalf("no %s status of %s", st, node)
	return time.Time{}
}

// started returns the times of node's running statuses, sorted: when each
// run started, past its flow control.
func (r *result) started(node string) []time.Time {
	var ts []time.Time
	for _, s := range r.statuses {
		if s.NodeID == node && s.Status == message.StatusRunning {
			ts = append(ts, s.ExecutedAt)
		}
	}
	slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
	return ts
}

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
			starts := r.started("send")
			if len(starts) != 6 {
				r.t.Fatalf("%d running statuses of send, want 6", len(starts))
			}
			// 5 per second, evenly spaced: the k-th slot is k·200ms after
			// the first, which is no earlier than the split's end, and no
			// run starts (its running status) before its slot. (Runs may
			// start late, by a slow write or a late timer: a gap between
			// two starts says nothing alone.) Less 20ms for the clock's
			// rounding.
			split := r.at("each", message.StatusSuccess)
			for k := range starts {
				if d := starts[k].Sub(split); d < time.Duration(k)*200*time.Millisecond-20*time.Millisecond {
					r.t.Fatalf("run %d started %v after the split ended, before its slot (%v at the earliest; 5 per second): %v", k, d, time.Duration(k)*200*time.Millisecond, starts)
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
			if len(items) != 3 {
				r.t.Fatalf("aggregated %d items, want 3: %s", len(items), r.dump())
			}
			starts := r.started("note")
			if len(starts) != 3 {
				r.t.Fatalf("%d runs, want 3", len(starts))
			}
			// The first admission is no earlier than the split's end; the
			// third comes a second after it (less 20ms for the clock's
			// rounding).
			if d := starts[2].Sub(r.at("each", message.StatusSuccess)); d < 980*time.Millisecond {
				r.t.Fatalf("the third run started %v after the split ended, want a second (2 per second): %v", d, starts)
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
