package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Flow control (issues 35, 36): node runs deferred by a rate limit or a
// throttle, and how far ahead they were put.

func (r *Recorder) registerDeferrals(f registrar) {
	r.deferrals = f.counter("rune_node_deferrals_total", "Node runs put off by flow control, by workflow and reason (RATE_LIMITED, THROTTLED); a throttled run that is skipped counts under THROTTLED_SKIPPED.", "workflow", "reason")
	r.deferralDelay = f.histogram("rune_node_deferral_seconds", "How far ahead a deferred node run was put (its start minus the time it was ready), by reason.", prometheus.ExponentialBuckets(0.01, 4, 10), "reason")
}

// NodeDeferred records a node run of workflowID put off by flow control for
// reason, d ahead (0 for a run skipped rather than deferred).
func (r *Recorder) NodeDeferred(workflowID, reason string, d time.Duration) {
	if r == nil {
		return
	}
	r.deferrals.WithLabelValues(r.workflow(workflowID), reason).Inc()
	if d > 0 {
		r.deferralDelay.WithLabelValues(reason).Observe(d.Seconds())
	}
}
