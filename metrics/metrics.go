// Package metrics is Rune's Prometheus instrumentation: one Recorder that
// the engine, the worker and the scheduler call at a few points, and
// samplers of queue depths and the timer store. A nil *Recorder is valid
// and records nothing: instrumentation that is off costs a nil check.
//
// Names follow Prometheus conventions (rune_ prefix, _total counters,
// _seconds durations); labels are bounded: a workflow id, a node type, an
// outcome, a queue or topic name — never an execution or message id. Past
// Config.MaxWorkflows distinct workflow ids, further ones are counted as
// workflow "other".
package metrics

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/rune-org/rune/broker"
	"github.com/rune-org/rune/coord"
)

// OtherWorkflow is the workflow label of workflows past Config.MaxWorkflows.
const OtherWorkflow = "other"

// Config configures a Recorder.
type Config struct {
	// MaxWorkflows bounds the distinct values of the workflow label.
	// Default 200.
	MaxWorkflows int
	// Logger receives the samplers' errors. Default slog.Default().
	Logger *slog.Logger
}

// Recorder holds Rune's metrics in a registry of its own (with the Go
// runtime's and the process's collectors). It is safe for concurrent use.
type Recorder struct {
	reg *prometheus.Registry
	log *slog.Logger
	max int

	mu        sync.Mutex
	workflows map[string]bool
	// series caches the series of a node run by (workflow, type, outcome):
	// a node run then costs one lock-free lookup, not three label hashes.
	// Workflows past MaxWorkflows are not cached, which bounds it.
	series sync.Map
	// inFlightBy caches the in-flight gauge of each topic (a few).
	inFlightBy sync.Map

	nodeRuns    *prometheus.CounterVec
	nodeSeconds *prometheus.HistogramVec
	retries     *prometheus.CounterVec
	halts       *prometheus.CounterVec
	completions *prometheus.CounterVec
	splitItems  *prometheus.HistogramVec
	barrierWait *prometheus.HistogramVec
	deadLetters *prometheus.CounterVec
	failures    *prometheus.CounterVec
	inFlight    *prometheus.GaugeVec
	concurrency prometheus.Gauge
	prefetch    prometheus.Gauge
	queueDepth  *prometheus.GaugeVec
	queueErrors prometheus.Counter
	published   *prometheus.CounterVec
	amqpSent    *prometheus.CounterVec
	timers      *prometheus.GaugeVec
	timerAge    prometheus.Gauge
	lateness    prometheus.Histogram
	fired       *prometheus.CounterVec
	// Flow control (deferrals.go).
	deferrals     *prometheus.CounterVec
	deferralDelay *prometheus.HistogramVec
}

// New returns a Recorder with every metric registered.
func New(cfg Config) *Recorder {
	if cfg.MaxWorkflows <= 0 {
		cfg.MaxWorkflows = 200
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	r := &Recorder{reg: prometheus.NewRegistry(), log: cfg.Logger, max: cfg.MaxWorkflows, workflows: map[string]bool{}}
	r.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	f := registrar{r.reg}
	// Node durations: pure nodes take microseconds, HTTP calls seconds.
	durations := prometheus.ExponentialBuckets(0.0001, 4, 10) // 100µs … 26s
	r.nodeRuns = f.counter("rune_node_executions_total", "Node runs by workflow, node type and outcome (success, failed, retrying, skipped).", "workflow", "node_type", "outcome")
	r.nodeSeconds = f.histogram("rune_node_duration_seconds", "How long a node ran, by node type.", durations, "node_type")
	r.retries = f.counter("rune_node_retries_total", "Node failures that will be retried, by workflow and node type.", "workflow", "node_type")
	r.halts = f.counter("rune_halts_total", "Node failures that halted their execution, by workflow.", "workflow")
	r.completions = f.counter("rune_executions_completed_total", "Executions ended, by workflow and completion status (completed, failed; halted: cancelled).", "workflow", "status")
	r.splitItems = f.histogram("rune_split_items", "Items a split fanned out into, by workflow.", prometheus.ExponentialBuckets(1, 4, 10), "workflow")
	r.barrierWait = f.histogram("rune_barrier_wait_seconds", "How long an aggregator or merge waited, from its first branch's arrival to its release, by workflow and node type.", prometheus.ExponentialBuckets(0.001, 4, 10), "workflow", "node_type")
	r.deadLetters = f.counter("rune_dead_letters_total", "Messages a worker rejected to the dead-letter queue, by topic.", "topic")
	r.failures = f.counter("rune_worker_redeliveries_total", "Messages a worker handed back to be delivered again after a transient failure, by topic.", "topic")
	r.inFlight = f.gauge("rune_worker_messages_in_flight", "Messages being handled now, by topic.", "topic")
	r.concurrency = f.plainGauge("rune_worker_concurrency", "Messages a worker handles at once at most (--concurrency).")
	r.prefetch = f.plainGauge("rune_worker_prefetch", "Unacknowledged messages RabbitMQ may hand a worker (--prefetch).")
	r.queueDepth = f.gauge("rune_queue_messages", "Messages ready in each of Rune's queues, sampled every few seconds.", "queue")
	r.queueErrors = f.plainCounter("rune_queue_sample_errors_total", "Failed samples of queue depths.")
	r.published = f.counter("rune_broker_published_total", "Messages this process published to RabbitMQ, by topic; each message of a batch counts. Sampled.", "topic")
	r.amqpSent = f.counter("rune_broker_amqp_messages_total", "RabbitMQ messages those went in, by topic: fewer than the messages when they shared batches (--message-batch). Sampled.", "topic")
	r.timers = f.gauge("rune_timers", "Timers of waiting branches in the timer store, by state (waiting, claimed), sampled.", "state")
	r.timerAge = f.plainGauge("rune_timers_overdue_seconds", "How long ago the earliest waiting timer came due (0 when none is due): the schedulers' backlog, sampled.")
	r.lateness = f.plainHistogram("rune_timer_lateness_seconds", "Claim time minus due time of each fired timer.", prometheus.ExponentialBuckets(0.001, 4, 10))
	r.fired = f.counter("rune_timers_fired_total", "Timers fired, by result (resumed, dropped, failed).", "result")
	r.registerDeferrals(f)
	return r
}

// Handler serves the metrics in Prometheus's text format.
func (r *Recorder) Handler() http.Handler {
	return promhttp.HandlerFor(r.reg, promhttp.HandlerOpts{Registry: r.reg})
}

// Registry is where the metrics are registered; tests gather from it.
func (r *Recorder) Registry() *prometheus.Registry { return r.reg }

// workflow is id, or OtherWorkflow once MaxWorkflows ids have been seen.
func (r *Recorder) workflow(id string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.workflows[id] {
		return id
	}
	if len(r.workflows) >= r.max {
		return OtherWorkflow
	}
	r.workflows[id] = true
	return id
}

type nodeKey struct{ workflow, nodeType, outcome string }

type nodeSeries struct {
	runs    prometheus.Counter
	seconds prometheus.Observer
	retries prometheus.Counter // nil unless outcome is retrying
}

// nodeSeriesOf returns the series of a node run, cached.
func (r *Recorder) nodeSeriesOf(k nodeKey) *nodeSeries {
	if v, ok := r.series.Load(k); ok {
		return v.(*nodeSeries)
	}
	wf := r.workflow(k.workflow)
	ns := &nodeSeries{
		runs:    r.nodeRuns.WithLabelValues(wf, k.nodeType, k.outcome),
		seconds: r.nodeSeconds.WithLabelValues(k.nodeType),
	}
	if k.outcome == "retrying" {
		ns.retries = r.retries.WithLabelValues(wf, k.nodeType)
	}
	if wf != OtherWorkflow {
		r.series.Store(k, ns)
	}
	return ns
}

// NodeRun records one node run that its execution recorded (replays of a
// run that finished before are not runs): outcome is the node's status,
// d how long the node ran.
func (r *Recorder) NodeRun(workflowID, nodeType, outcome string, d time.Duration) {
	if r == nil {
		return
	}
	ns := r.nodeSeriesOf(nodeKey{workflowID, nodeType, outcome})
	ns.runs.Inc()
	ns.seconds.Observe(d.Seconds())
	if ns.retries != nil {
		ns.retries.Inc()
	}
}

// Halt records a node failure that halts its execution.
func (r *Recorder) Halt(workflowID string) {
	if r == nil {
		return
	}
	r.halts.WithLabelValues(r.workflow(workflowID)).Inc()
}

// Completed records an execution's end with its completion status.
func (r *Recorder) Completed(workflowID, status string) {
	if r == nil {
		return
	}
	r.completions.WithLabelValues(r.workflow(workflowID), status).Inc()
}

// Split records a split fanning out into n items.
func (r *Recorder) Split(workflowID string, n int) {
	if r == nil {
		return
	}
	r.splitItems.WithLabelValues(r.workflow(workflowID)).Observe(float64(n))
}

// BarrierWait records an aggregator or merge (nodeType) released after
// waiting d since its first branch arrived.
func (r *Recorder) BarrierWait(workflowID, nodeType string, d time.Duration) {
	if r == nil {
		return
	}
	r.barrierWait.WithLabelValues(r.workflow(workflowID), nodeType).Observe(max(d, 0).Seconds())
}

// DeadLetter records a message a worker rejected.
func (r *Recorder) DeadLetter(topic string) {
	if r == nil {
		return
	}
	r.deadLetters.WithLabelValues(topic).Inc()
}

// Redelivery records a message handed back after a transient failure.
func (r *Recorder) Redelivery(topic string) {
	if r == nil {
		return
	}
	r.failures.WithLabelValues(topic).Inc()
}

// InFlight adds delta to the messages of topic being handled.
func (r *Recorder) InFlight(topic string, delta int) {
	if r == nil {
		return
	}
	g, ok := r.inFlightBy.Load(topic)
	if !ok {
		g, _ = r.inFlightBy.LoadOrStore(topic, r.inFlight.WithLabelValues(topic))
	}
	g.(prometheus.Gauge).Add(float64(delta))
}

// WorkerLimits records a worker's configured concurrency and prefetch, and
// starts its per-topic dead-letter and redelivery counters at 0: a series
// born at 1 has no earlier sample, and increase() or rate() over it (the
// alerts of deploy/prometheus/rules.yml) would miss the first one.
func (r *Recorder) WorkerLimits(concurrency, prefetch int) {
	if r == nil {
		return
	}
	r.concurrency.Set(float64(concurrency))
	r.prefetch.Set(float64(prefetch))
	for _, topic := range []broker.Topic{broker.Execution, broker.Timeout} {
		r.deadLetters.WithLabelValues(string(topic))
		r.failures.WithLabelValues(string(topic))
	}
}

// TimerFired records a fired timer: result is "resumed", "dropped" (it can
// never fire) or "failed" (it fires again when its lease ends); late is its
// claim time minus its due time.
func (r *Recorder) TimerFired(result string, late time.Duration) {
	if r == nil {
		return
	}
	r.fired.WithLabelValues(result).Inc()
	r.lateness.Observe(max(late, 0).Seconds())
}

// SampleQueues sets rune_queue_messages from depths every interval until
// ctx is done. depths returns messages ready by queue name (without the
// deployment's prefix, so that the label stays bounded).
func (r *Recorder) SampleQueues(ctx context.Context, every time.Duration, depths func(context.Context) (map[string]int, error)) {
	if r == nil {
		return
	}
	sample(ctx, every, func(ctx context.Context) {
		d, err := depths(ctx)
		if err != nil {
			r.queueErrors.Inc()
			r.log.Warn("metrics: cannot sample queue depths", "err", err)
		}
		for q, n := range d {
			r.queueDepth.WithLabelValues(q).Set(float64(n))
		}
	})
}

// Published is what a process published on one topic since it started:
// messages, and the RabbitMQ messages they went in.
type Published struct{ Messages, AMQP int64 }

// SamplePublished adds to rune_broker_published_total and
// rune_broker_amqp_messages_total what published (counts since the
// process started, by topic) gained since the last sample, every interval
// until ctx is done.
func (r *Recorder) SamplePublished(ctx context.Context, every time.Duration, published func() map[string]Published) {
	if r == nil {
		return
	}
	last := map[string]Published{}
	sample(ctx, every, func(context.Context) {
		for topic, p := range published() {
			r.published.WithLabelValues(topic).Add(float64(p.Messages - last[topic].Messages))
			r.amqpSent.WithLabelValues(topic).Add(float64(p.AMQP - last[topic].AMQP))
			last[topic] = p
		}
	})
}

// SampleTimers sets rune_timers and rune_timers_overdue_seconds from
// stats every interval until ctx is done.
func (r *Recorder) SampleTimers(ctx context.Context, every time.Duration, stats func(context.Context) (coord.TimerStats, error), now func() time.Time) {
	if r == nil {
		return
	}
	sample(ctx, every, func(ctx context.Context) {
		s, err := stats(ctx)
		if err != nil {
			r.log.Warn("metrics: cannot sample the timer store", "err", err)
			return
		}
		r.timers.WithLabelValues("waiting").Set(float64(s.Scheduled))
		r.timers.WithLabelValues("claimed").Set(float64(s.Claimed))
		overdue := 0.0
		if !s.NextDue.IsZero() {
			overdue = max(now().Sub(s.NextDue).Seconds(), 0)
		}
		r.timerAge.Set(overdue)
	})
}

// sample runs f now and then every interval until ctx is done; one sample
// is bounded by the interval.
func sample(ctx context.Context, every time.Duration, f func(context.Context)) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		sctx, cancel := context.WithTimeout(ctx, every)
		f(sctx)
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// registrar registers the metrics it makes.
type registrar struct{ reg *prometheus.Registry }

func (p registrar) counter(name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	p.reg.MustRegister(c)
	return c
}

func (p registrar) plainCounter(name, help string) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	p.reg.MustRegister(c)
	return c
}

func (p registrar) gauge(name, help string, labels ...string) *prometheus.GaugeVec {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
	p.reg.MustRegister(g)
	return g
}

func (p registrar) plainGauge(name, help string) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
	p.reg.MustRegister(g)
	return g
}

func (p registrar) histogram(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
	p.reg.MustRegister(h)
	return h
}

func (p registrar) plainHistogram(name, help string, buckets []float64) prometheus.Histogram {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets})
	p.reg.MustRegister(h)
	return h
}
