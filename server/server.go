// Package server is `rune server`, the master (RFC 001 §12.2): the HTTP API
// over workflows, executions (trigger instances) and credentials; the
// dispatcher that claims due executions and publishes their first messages;
// the history consumer that persists statuses and completions; and the live
// Server-Sent Events streams. Its state lives in a store.Store, so several
// servers may share one PostgreSQL database.
package server

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/rune-org/rune/broker"
	"github.com/rune-org/rune/engine"
	"github.com/rune-org/rune/metrics"
	"github.com/rune-org/rune/secrets"
	"github.com/rune-org/rune/store"
	"github.com/rune-org/rune/tracing"
)

// Defaults of Config.
const (
	MaxBodyDefault        = 6 << 20 // a definition (5 MiB) and some slack
	MaxTriggerDefault     = 1 << 20
	DispatchPollDefault   = 25 * time.Millisecond
	DispatchLeaseDefault  = 30 * time.Second
	DispatchBatchDefault  = 200
	HistoryBatchDefault   = 500
	HistoryWindowDefault  = 20 * time.Millisecond
	HistoryHoldMaxDefault = 5 * time.Second
	StreamPollDefault     = 100 * time.Millisecond
	HeartbeatDefault      = 10 * time.Second
	TokenCacheTTLDefault  = 2 * time.Second
	SessionTTLDefault     = 12 * time.Hour
	StreamRecheckDefault  = 2 * time.Second
	MaxStreamsDefault     = 16
	SchedulePollDefault   = 200 * time.Millisecond
	ScheduleGraceDefault  = time.Second
	RetentionEveryDefault = time.Minute
	RetentionBatchDefault = 500
	dispatchParallelism   = 32
	historyConsumerFactor = 2
)

// Config configures a Server. Store, Broker and Engine are required; every
// other field has the default its comment states.
type Config struct {
	// Store holds workflows, executions, history, credentials and tokens. Required.
	Store store.Store
	// Broker carries first messages out and statuses and completions in. Required.
	Broker broker.Broker
	// Engine compiles definitions (validation exactly as `rune validate`),
	// starts and halts executions. Required.
	Engine *engine.Engine
	// Keys encrypt credentials. Defaults to none: the credential endpoints
	// then answer 503 unavailable.
	Keys *secrets.Keyring
	// APIToken is accepted as a bearer token besides the stored ones
	// (RUNE_API_TOKEN). Defaults to "": only stored tokens.
	APIToken string
	// ID names this server in execution claims. Defaults to host-pid-random.
	ID string
	// Logger receives the server's logs. Defaults to slog.Default().
	Logger *slog.Logger
	// MaxBody bounds a request body in bytes (413 above). Defaults to MaxBodyDefault.
	MaxBody int64
	// MaxTrigger bounds a trigger payload in bytes (413 above). Defaults to MaxTriggerDefault.
	MaxTrigger int64
	// DispatchPoll is the dispatcher's pause when nothing is due (a trigger
	// through this server's API wakes it at once). Defaults to DispatchPollDefault.
	DispatchPoll time.Duration
	// DispatchLease is how long a claimed, not yet dispatched execution is
	// this server's before another may dispatch it. Defaults to DispatchLeaseDefault.
	DispatchLease time.Duration
	// DispatchBatch is how many executions one claim takes. Defaults to DispatchBatchDefault.
	DispatchBatch int
	// HistoryBatch is how many statuses and completions one store write
	// takes at most. Defaults to HistoryBatchDefault.
	HistoryBatch int
	// HistoryWindow is how long the history consumer gathers a batch after
	// its first event. Defaults to HistoryWindowDefault.
	HistoryWindow time.Duration
	// HistoryHoldMax is how long the history consumer holds a completion
	// back while statuses of the nodes in its final context are missing
	// (they travel on another queue, and under load arrive after it), so
	// that an execution shows completed only with its node runs recorded.
	// Past it the completion is recorded anyway (a status that expired or
	// was purged never comes). Defaults to HistoryHoldMaxDefault.
	HistoryHoldMax time.Duration
	// StreamPoll is how often a live stream reads new events when no commit
	// of this process woke it (events committed by other replicas).
	// Defaults to StreamPollDefault.
	StreamPoll time.Duration
	// Heartbeat is the interval of SSE heartbeat comments. Defaults to HeartbeatDefault.
	Heartbeat time.Duration
	// TokenCacheTTL is how long a verified stored token is trusted without
	// asking the store again (a revoked token works at most this long).
	// Defaults to TokenCacheTTLDefault.
	TokenCacheTTL time.Duration
	// SessionTTL is how long a console session lasts after its login (it
	// ends sooner with its token's revocation or expiry, or at logout).
	// Defaults to SessionTTLDefault.
	SessionTTL time.Duration
	// StreamRecheck is how often a live stream checks, in the store, that
	// its token or console session still holds, and ends when it does not
	// (a revocation through any process, an expiry). Defaults to
	// StreamRecheckDefault.
	StreamRecheck time.Duration
	// MaxStreams bounds the event streams one token (its console sessions
	// included) has open on this server at once; one more is refused with
	// 429. Defaults to MaxStreamsDefault.
	MaxStreams int
	// SchedulePoll is how often the scheduler looks for due schedule slots.
	// Defaults to SchedulePollDefault.
	SchedulePoll time.Duration
	// ScheduleGrace: a slot that came due more than this before this
	// server's scheduler started was missed (no server ran it) and is
	// handled by its schedule's policy; later slots always fire, however
	// late. Defaults to ScheduleGraceDefault.
	ScheduleGrace time.Duration
	// NoSchedules turns the scheduler off (for benchmarks and tests of
	// other parts). Defaults to false: every replica runs it.
	NoSchedules bool
	// Now returns the current time. Defaults to time.Now.
	Now func() time.Time
	// Metrics is the registry GET /metrics serves; the server registers
	// its rune_server_* metrics on it. Defaults to a new metrics.Recorder.
	Metrics *metrics.Recorder
	// Tracer makes a span of each dispatch, in the execution's trace, whose
	// traceparent the first messages carry. Defaults to nil: no spans.
	Tracer *tracing.Tracer
	// ReadyChecks are the dependencies GET /readyz checks besides the
	// store (the broker, Redis). Defaults to none.
	ReadyChecks []ReadyCheck
	// Retention, when positive, prunes the node runs and events of
	// executions finished longer ago than this (retention.go). Defaults to
	// 0: history is kept forever.
	Retention time.Duration
	// RetentionEvery is the pause between pruning rounds. Defaults to
	// RetentionEveryDefault.
	RetentionEvery time.Duration
}

func (c Config) withDefaults() Config {
	c.Logger = cmp.Or(c.Logger, slog.Default())
	c.MaxBody = cmp.Or(c.MaxBody, MaxBodyDefault)
	c.MaxTrigger = cmp.Or(c.MaxTrigger, MaxTriggerDefault)
	c.DispatchPoll = cmp.Or(c.DispatchPoll, DispatchPollDefault)
	c.DispatchLease = cmp.Or(c.DispatchLease, DispatchLeaseDefault)
	c.DispatchBatch = cmp.Or(c.DispatchBatch, DispatchBatchDefault)
	c.HistoryBatch = cmp.Or(c.HistoryBatch, HistoryBatchDefault)
	c.HistoryWindow = cmp.Or(c.HistoryWindow, HistoryWindowDefault)
	c.HistoryHoldMax = cmp.Or(c.HistoryHoldMax, HistoryHoldMaxDefault)
	c.StreamPoll = cmp.Or(c.StreamPoll, StreamPollDefault)
	c.Heartbeat = cmp.Or(c.Heartbeat, HeartbeatDefault)
	c.TokenCacheTTL = cmp.Or(c.TokenCacheTTL, TokenCacheTTLDefault)
	c.SessionTTL = cmp.Or(c.SessionTTL, SessionTTLDefault)
	c.StreamRecheck = cmp.Or(c.StreamRecheck, StreamRecheckDefault)
	c.MaxStreams = cmp.Or(c.MaxStreams, MaxStreamsDefault)
	c.SchedulePoll = cmp.Or(c.SchedulePoll, SchedulePollDefault)
	c.ScheduleGrace = cmp.Or(c.ScheduleGrace, ScheduleGraceDefault)
	c.RetentionEvery = cmp.Or(c.RetentionEvery, RetentionEveryDefault)
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Metrics == nil {
		c.Metrics = metrics.New(metrics.Config{Logger: c.Logger})
	}
	if c.ID == "" {
		host, _ := os.Hostname()
		var b [4]byte
		_, _ = rand.Read(b[:])
		c.ID = fmt.Sprintf("%s-%d-%s", cmp.Or(host, "server"), os.Getpid(), hex.EncodeToString(b[:]))
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.Store == nil:
		return errors.New("server: Config.Store is required")
	case c.Broker == nil:
		return errors.New("server: Config.Broker is required")
	case c.Engine == nil:
		return errors.New("server: Config.Engine is required")
	case c.MaxBody < 0:
		return fmt.Errorf("server: Config.MaxBody is %d, want positive", c.MaxBody)
	case c.MaxTrigger < 0:
		return fmt.Errorf("server: Config.MaxTrigger is %d, want positive", c.MaxTrigger)
	case c.Retention < 0:
		return fmt.Errorf("server: Config.Retention is %v, want positive (or 0: keep history)", c.Retention)
	case c.SessionTTL < 0 || c.StreamRecheck < 0:
		return errors.New("server: Config.SessionTTL and Config.StreamRecheck must be positive")
	case c.MaxStreams < 0:
		return fmt.Errorf("server: Config.MaxStreams is %d, want positive", c.MaxStreams)
	case c.DispatchBatch < 0 || c.HistoryBatch < 0:
		return errors.New("server: Config.DispatchBatch and Config.HistoryBatch must be positive")
	}
	return nil
}

// Server is one `rune server`: Handler serves the API, Run runs the
// dispatcher and the history consumer.
type Server struct {
	cfg   Config
	store store.Store
	log   *slog.Logger
	mux   *http.ServeMux

	// wake tells the dispatcher an execution is available now.
	wake chan struct{}
	// commits is closed and replaced after every history commit, waking
	// the live streams of this process.
	commitMu sync.Mutex
	commits  chan struct{}

	metrics *serverMetrics

	tokens tokenCache
	// sessions caches console sessions as tokens caches tokens.
	sessions tokenCache
	// streams counts the open event streams of each token.
	streams streamCounts
	defs    defCache
	vars    varCache
	// hookLimits are the webhooks' rate limits on this replica.
	hookLimits rateLimits
}

// New builds a server from cfg.
func New(cfg Config) (*Server, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	m := newServerMetrics(cfg.Metrics.Registry())
	s := &Server{
		cfg:     cfg,
		store:   meteredStore{Store: cfg.Store, m: m, now: cfg.Now},
		log:     cfg.Logger,
		wake:    make(chan struct{}, 1),
		commits: make(chan struct{}),
		metrics: m,
	}
	s.tokens.ttl = cfg.TokenCacheTTL
	s.sessions.ttl = cfg.TokenCacheTTL
	s.defs.s = s
	s.mux = http.NewServeMux()
	for _, rt := range s.routes() {
		s.mux.Handle(rt.Method+" "+rt.Path, s.endpoint(rt))
	}
	s.mux.HandleFunc("/", s.noRoute)
	return s, nil
}

// Handler returns the HTTP API.
func (s *Server) Handler() http.Handler { return s.mux }

// Run runs the dispatcher and the history consumer until ctx is done, or
// until one of them fails (then both stop and Run returns the error).
func (s *Server) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	run := func(name string, f func(context.Context) error) {
		wg.Go(func() {
			if err := f(ctx); err != nil && ctx.Err() == nil {
				cancel(fmt.Errorf("server: %s: %w", name, err))
			}
		})
	}
	run("dispatcher", s.dispatch)
	run("history", s.consumeHistory)
	if !s.cfg.NoSchedules {
		run("schedules", s.runSchedules)
	}
	if s.cfg.Retention > 0 {
		run("retention", s.prune)
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// notifyCommit wakes the live streams waiting for new events.
func (s *Server) notifyCommit() {
	s.commitMu.Lock()
	close(s.commits)
	s.commits = make(chan struct{})
	s.commitMu.Unlock()
}

// commitSignal returns the channel the next commit closes.
func (s *Server) commitSignal() <-chan struct{} {
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	return s.commits
}

// wakeDispatcher tells the dispatcher to claim now.
func (s *Server) wakeDispatcher() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}
