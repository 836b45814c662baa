package server

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/rune-org/rune/store"
)

// ReadyCheck is one dependency GET /readyz checks (the store is always
// checked when it can be pinged).
type ReadyCheck struct {
	Name string
	// Check returns nil when the dependency is reachable.
	Check func(ctx context.Context) error
}

// Pinger is implemented by stores /readyz can check.
type Pinger interface {
	Ping(ctx context.Context) error
}

// serverMetrics are the server's own metrics (rune_server_*), registered
// beside the Recorder's on Config.Metrics. Labels are bounded: a result,
// an event kind.
type serverMetrics struct {
	triggers      *prometheus.CounterVec
	dispatched    prometheus.Counter
	dispatchLag   prometheus.Histogram
	historyBatch  prometheus.Histogram
	historyLag    prometheus.Histogram
	historyEvents *prometheus.CounterVec
}

// lagBuckets span a loaded machine's milliseconds to a backlog's minutes.
var lagBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}

func newServerMetrics(reg prometheus.Registerer) *serverMetrics {
	m := &serverMetrics{
		triggers: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rune_server_triggers_total",
			Help: "Triggers accepted by the API (result: created, or repeated for a known Idempotency-Key)."}, []string{"result"}),
		dispatched: prometheus.NewCounter(prometheus.CounterOpts{Name: "rune_server_dispatched_total",
			Help: "Executions whose first messages the dispatcher published."}),
		dispatchLag: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "rune_server_dispatch_lag_seconds",
			Help: "Time from an execution's available_at to its claim by a dispatcher.", Buckets: lagBuckets}),
		historyBatch: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "rune_server_history_batch_size",
			Help: "Statuses and completions written per history transaction.", Buckets: prometheus.ExponentialBuckets(1, 2, 11)}),
		historyLag: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "rune_server_history_write_lag_seconds",
			Help: "Time from a status's executed_at (a completion's completed_at) to its commit in the store.", Buckets: lagBuckets}),
		historyEvents: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rune_server_history_events_total",
			Help: "Statuses and completions persisted (kind: status, completion)."}, []string{"kind"}),
	}
	reg.MustRegister(m.triggers, m.dispatched, m.dispatchLag, m.historyBatch, m.historyLag, m.historyEvents)
	for _, r := range []string{"created", "repeated"} {
		m.triggers.WithLabelValues(r)
	}
	for _, k := range []string{"status", "completion"} {
		m.historyEvents.WithLabelValues(k)
	}
	return m
}

// meteredStore observes the history writes of every caller (the history
// consumer and the dispatcher's own completions) without their knowing.
type meteredStore struct {
	store.Store
	m   *serverMetrics
	now func() time.Time
}

func (s meteredStore) AppendHistory(ctx context.Context, events []store.HistoryEvent) ([]store.Event, error) {
	recorded, err := s.Store.AppendHistory(ctx, events)
	if err != nil {
		return recorded, err
	}
	now := s.now()
	s.m.historyBatch.Observe(float64(len(events)))
	for _, ev := range events {
		switch {
		case ev.Status != nil:
			s.m.historyEvents.WithLabelValues("status").Inc()
			if !ev.Status.ExecutedAt.IsZero() {
				s.m.historyLag.Observe(max(0, now.Sub(ev.Status.ExecutedAt).Seconds()))
			}
		case ev.Completion != nil:
			s.m.historyEvents.WithLabelValues("completion").Inc()
			if !ev.Completion.CompletedAt.IsZero() {
				s.m.historyLag.Observe(max(0, now.Sub(ev.Completion.CompletedAt).Seconds()))
			}
		}
	}
	return recorded, nil
}

// metrics serves the Prometheus metrics of this process.
func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request) error {
	promhttp.HandlerFor(s.cfg.Metrics.Registry(), promhttp.HandlerOpts{}).ServeHTTP(w, r)
	return nil
}

// readyz answers 200 when the store and every Config.ReadyChecks
// dependency answer within 2 s, else 503 naming the failures.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	checks := s.cfg.ReadyChecks
	if p, ok := s.cfg.Store.(Pinger); ok {
		checks = append([]ReadyCheck{{Name: "store", Check: p.Ping}}, checks...)
	}
	status := map[string]string{}
	var failed []string
	for _, c := range checks {
		if err := c.Check(ctx); err != nil {
			status[c.Name] = "unreachable"
			failed = append(failed, c.Name)
			s.log.Warn("readyz: dependency unreachable", "dependency", c.Name, "err", err)
			continue
		}
		status[c.Name] = "ok"
	}
	if len(failed) > 0 {
		return errorf(http.StatusServiceUnavailable, CodeUnavailable, "not ready: %s unreachable", strings.Join(failed, ", "))
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ready", "checks": status})
	return nil
}
