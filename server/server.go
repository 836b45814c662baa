// Package server is `rune server`, the master (RFC 001 §12.2): the HTTP API
// over workflows, executions (trigger instances) and credentials, with its
// live Server-Sent Events streams, and four components that Server composes
// and Run runs, each with its own Config and Run(ctx):
//
//   - the dispatcher (dispatcher.go) claims due executions and publishes
//     their first messages;
//   - the history consumer (history.go) persists statuses and completions;
//   - the cron triggers (crons.go) fire the slots of workflows' schedules;
//   - retention (retention.go) prunes the history of old executions.
//
// Its state lives in a store.Store, so several servers may share one
// PostgreSQL database.
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
	"github.com/rune-org/rune/templates"
	"github.com/rune-org/rune/tracing"
)

// Defaults of Config.
const (
	MaxBodyDefault       = 6 << 20 // a definition (5 MiB) and some slack
	MaxTriggerDefault    = 1 << 20
	StreamPollDefault    = 100 * time.Millisecond
	HeartbeatDefault     = 10 * time.Second
	TokenCacheTTLDefault = 2 * time.Second
	SessionTTLDefault    = 12 * time.Hour
	StreamRecheckDefault = 2 * time.Second
	MaxStreamsDefault    = 16
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

	// Dispatch configures the dispatcher (dispatcher.go).
	Dispatch DispatchConfig
	// History configures the history consumer (history.go).
	History HistoryConfig
	// Crons configures the cron triggers, which fire schedules' slots
	// (crons.go); every replica runs them unless Crons.Off.
	Crons CronConfig
	// Retention configures the pruning of old history (retention.go); off
	// unless Retention.After is set.
	Retention RetentionConfig
	// PublicURL is the server's URL as providers and recipients reach it
	// ("https://rune.example.com"): the base of the status callback URLs
	// whose signatures it checks (issue 36). Defaults to the request's
	// own scheme and host.
	PublicURL string
	// Flow configures the promoter of flow control by key (flow.go).
	Flow FlowConfig
}

func (c Config) withDefaults() Config {
	c.Logger = cmp.Or(c.Logger, slog.Default())
	c.MaxBody = cmp.Or(c.MaxBody, MaxBodyDefault)
	c.MaxTrigger = cmp.Or(c.MaxTrigger, MaxTriggerDefault)
	c.StreamPoll = cmp.Or(c.StreamPoll, StreamPollDefault)
	c.Heartbeat = cmp.Or(c.Heartbeat, HeartbeatDefault)
	c.TokenCacheTTL = cmp.Or(c.TokenCacheTTL, TokenCacheTTLDefault)
	c.SessionTTL = cmp.Or(c.SessionTTL, SessionTTLDefault)
	c.StreamRecheck = cmp.Or(c.StreamRecheck, StreamRecheckDefault)
	c.MaxStreams = cmp.Or(c.MaxStreams, MaxStreamsDefault)
	c.Dispatch = c.Dispatch.withDefaults()
	c.History = c.History.withDefaults()
	c.Crons = c.Crons.withDefaults()
	c.Retention = c.Retention.withDefaults()
	c.Flow = c.Flow.withDefaults()
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
	case c.SessionTTL < 0 || c.StreamRecheck < 0:
		return errors.New("server: Config.SessionTTL and Config.StreamRecheck must be positive")
	case c.MaxStreams < 0:
		return fmt.Errorf("server: Config.MaxStreams is %d, want positive", c.MaxStreams)
	case c.PublicURL != "" && !publicURLOK(c.PublicURL):
		return fmt.Errorf("server: Config.PublicURL %q is not an http(s) URL without a query or user info", c.PublicURL)
	}
	return errors.Join(c.Dispatch.validate(), c.History.validate(), c.Retention.validate())
}

// Server is one `rune server`: Handler serves the API, Run runs its
// components.
type Server struct {
	cfg   Config
	store store.Store
	log   *slog.Logger
	mux   *http.ServeMux

	dispatcher *dispatcher
	history    *historyConsumer
	children   *children // issue 34
	crons      *crons
	retention  *retention
	// commits wakes the live streams of this process after every history
	// commit.
	commits *commits

	metrics *serverMetrics

	tokens tokenCache
	// sessions caches console sessions as tokens caches tokens.
	sessions tokenCache
	// streams counts the open event streams of each token.
	streams streamCounts
	// hookLimits are the webhooks' rate limits on this replica.
	hookLimits rateLimits
	// unsubscribeLimits bound the open unsubscribe routes (subscribers.go).
	unsubscribeLimits rateLimits
	// flow is flow control by key (flow.go).
	flow *flow
	// templates renders template previews (templates.go, issue 36).
	templates templates.Renderer
}

// New builds a server from cfg.
func New(cfg Config) (*Server, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	m := newServerMetrics(cfg.Metrics.Registry())
	st := meteredStore{Store: cfg.Store, m: m, now: cfg.Now}
	s := &Server{
		cfg:     cfg,
		store:   st,
		log:     cfg.Logger,
		commits: newCommits(),
		metrics: m,
	}
	s.dispatcher = newDispatcher(cfg.Dispatch, dispatcherDeps{store: st, broker: cfg.Broker, engine: cfg.Engine, tracer: cfg.Tracer,
		log: cfg.Logger, now: cfg.Now, owner: cfg.ID, metrics: m, commits: s.commits})
	s.flow = newFlow(cfg.Flow, st, cfg.Store, cfg.Engine, cfg.Logger, cfg.Now, cfg.Metrics.Registry())
	s.dispatcher.flow = s.flow
	s.flow.defs = &s.dispatcher.defs
	s.flow.paused = func(ctx context.Context, workflowID string) (bool, error) { // the "paused" reason (issue 34)
		p, err := st.WorkflowPaused(ctx, workflowID)
		return p != nil, err
	}
	s.history = newHistoryConsumer(cfg.History, st, cfg.Broker, cfg.Engine, cfg.Logger, s.commits)
	// issue 34: child executions (children.go)
	s.children = &children{store: st, engine: cfg.Engine, log: cfg.Logger, now: cfg.Now, wake: s.wakeDispatcher, halt: s.halt}
	s.history.children = s.children
	s.crons = newCrons(cfg.Crons, st, cfg.Logger, cfg.Now, cfg.ID, s.dispatcher.wakeUp)
	s.crons.flow = s.flow
	s.retention = newRetention(cfg.Retention, st, cfg.Logger, cfg.Now)
	s.tokens.ttl = cfg.TokenCacheTTL
	s.sessions.ttl = cfg.TokenCacheTTL
	s.mux = http.NewServeMux()
	for _, rt := range s.routes() {
		s.mux.Handle(rt.Method+" "+rt.Path, s.endpoint(rt))
	}
	s.mux.HandleFunc("/", s.noRoute)
	return s, nil
}

// Handler returns the HTTP API.
func (s *Server) Handler() http.Handler { return s.mux }

// Run runs the components (the dispatcher and the history consumer, the
// cron triggers unless Config.Crons.Off, retention when
// Config.Retention.After is set) until ctx is done, or until one of them
// fails (then all stop and Run returns the error).
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
	run("dispatcher", s.dispatcher.Run)
	run("history", s.history.Run)
	run("flow", func(ctx context.Context) error { return s.flow.Run(ctx, s.commits, s.dispatcher.wakeUp) })
	if !s.cfg.Crons.Off {
		run("schedules", s.crons.Run)
	}
	if s.cfg.Retention.After > 0 {
		run("retention", s.retention.Run)
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// rounds runs round at once, then again after the pause it returned or as
// soon as wake (nil: never) fires, until ctx is done: the loop of the
// dispatcher, the cron triggers and retention.
func rounds(ctx context.Context, wake <-chan struct{}, round func(ctx context.Context) time.Duration) error {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-wake:
		}
		t.Reset(round(ctx))
	}
}

// commits is a broadcast of history commits: every commit closes the
// channel the waiters hold and replaces it.
type commits struct {
	mu sync.Mutex
	ch chan struct{}
}

func newCommits() *commits { return &commits{ch: make(chan struct{})} }

// notify wakes the live streams waiting for new events.
func (c *commits) notify() {
	c.mu.Lock()
	close(c.ch)
	c.ch = make(chan struct{})
	c.mu.Unlock()
}

// next returns the channel the next commit closes.
func (c *commits) next() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ch
}

// commitSignal returns the channel the next history commit closes.
func (s *Server) commitSignal() <-chan struct{} { return s.commits.next() }

// wakeDispatcher tells the dispatcher to claim now (an execution was
// enqueued through this server).
func (s *Server) wakeDispatcher() { s.dispatcher.wakeUp() }
