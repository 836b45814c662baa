// Package scheduler fires the durable timers of wait and delay nodes
// (RFC 006 §5.2, §7): it claims due timers from the timer store, lets the
// engine resume each suspended branch, publishes the effects and only then
// removes the timer. A scheduler killed between claim and publish loses
// nothing: its short lease, renewed only while it lives, runs out and any
// scheduler claims the timer again within seconds; the engine recognises a
// resume that already happened and replays it, so successors never run
// twice. A scheduler frozen past its lease (a stopped process, a long GC or
// VM pause) finds on waking that the timer was claimed again, and publishes
// nothing for it. Any number of schedulers may run at once.
package scheduler

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/rune-org/rune/broker"
	"github.com/rune-org/rune/coord"
	"github.com/rune-org/rune/engine"
	"github.com/rune-org/rune/metrics"
	"github.com/rune-org/rune/publish"
	"github.com/rune-org/rune/tracing"
)

// DefaultPoll is Config.Poll's default.
const DefaultPoll = 20 * time.Millisecond

// DefaultLease is Config.Lease's default: a dead scheduler's timers fire
// about 3 s late; renewing every second costs Redis one small script a
// second per scheduler that holds timers.
const DefaultLease = 3 * time.Second

// Config configures a scheduler.
type Config struct {
	// Timers is the timer store. Required.
	Timers coord.Timers
	// Broker carries the resumed branches' messages. Required.
	Broker broker.Broker
	// Engine resumes branches. Required.
	Engine *engine.Engine
	// Poll is the pause between claims when no timer was due. Default 20ms:
	// timers fire at most this late on an idle scheduler, and an idle
	// scheduler costs Redis 50 small scripts a second (50ms measured 60–70
	// ms of completion p99 at 200 waits a second, 20ms about 50).
	Poll time.Duration
	// Batch is the most timers claimed at once; while full batches come back
	// the scheduler claims again without pausing. Default 500.
	Batch int
	// Lease is how long a claimed timer stays this scheduler's without being
	// renewed; the scheduler renews its timers' leases every Lease/3 while it
	// handles them. A dead scheduler's timers fire again within about a
	// Lease (plus a Poll). Default 3s (DefaultLease).
	Lease time.Duration
	// Concurrency is how many timers of a batch are resumed at once. Default
	// 1024, so a whole default batch: a resume mostly waits on Redis and
	// RabbitMQ round trips, which concurrent resumes share (their scripts
	// go in one pipeline, their publishes in one batch), so more at once
	// cost little more each. 64 left a burst of 10,000 waits seconds late
	// on a loaded machine while the process used a quarter of a core; 256,
	// once resumes shared round trips, still over a second at the 99th
	// percentile where 1024 kept it under (docs/benchmarks.md, issue 33).
	Concurrency int
	// Logger receives scheduler logs. Default slog.Default().
	Logger *slog.Logger
	// Now returns the current time. Default time.Now.
	Now func() time.Time
	// AfterClaim, when set, is called after each claim with the claimed
	// timers, before any is resumed (their leases are being renewed).
	// Fault-injection tests use it to stop the process at the worst moment.
	AfterClaim func([]coord.Timer)
	// Metrics records each fired timer and its lateness; nil records
	// nothing.
	Metrics *metrics.Recorder
	// Tracer makes a span of each resumed branch, in its execution's
	// trace; nil traces nothing.
	Tracer *tracing.Tracer
}

func (c *Config) defaults() error {
	if c.Timers == nil || c.Broker == nil || c.Engine == nil {
		return errors.New("scheduler: Config.Timers, Config.Broker and Config.Engine are required")
	}
	if c.Poll <= 0 {
		c.Poll = DefaultPoll
	}
	if c.Batch <= 0 {
		c.Batch = 500
	}
	if c.Lease <= 0 {
		c.Lease = DefaultLease
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 1024
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return nil
}

// Run fires timers until ctx is done. The timers in hand when ctx ends are
// finished first (their leases would otherwise delay them).
//
// Two batches may be in hand at once: the next claim is made while the
// slowest resumes of the last batch finish, so that a burst of due timers
// is not fired at the pace of each batch's slowest one (issue 33, Timers).
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.defaults(); err != nil {
		return err
	}
	work := context.WithoutCancel(ctx)
	slots := make(chan struct{}, 2)
	var wg sync.WaitGroup
	defer wg.Wait()
	for ctx.Err() == nil {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		timers, claimed, err := claim(work, cfg)
		if err != nil {
			cfg.Logger.Warn("scheduler: claim failed; trying again", "err", err)
		}
		if len(timers) > 0 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				fireAll(work, cfg, timers, claimed)
				<-slots
			}()
			continue // timers were due: claim again at once, more may be
		}
		<-slots
		select {
		case <-ctx.Done():
		case <-time.After(cfg.Poll):
		}
	}
	return nil
}

// Tick claims one batch of due timers and fires them, returning how many it
// claimed.
func Tick(ctx context.Context, cfg Config) (int, error) {
	if err := cfg.defaults(); err != nil {
		return 0, err
	}
	timers, claimed, err := claim(ctx, cfg)
	if err != nil || len(timers) == 0 {
		return 0, err
	}
	fireAll(ctx, cfg, timers, claimed)
	return len(timers), nil
}

// claim claims one batch of due timers, and says when.
func claim(ctx context.Context, cfg Config) ([]coord.Timer, time.Time, error) {
	claimed := cfg.Now()
	timers, err := cfg.Timers.Claim(ctx, claimed, cfg.Batch, cfg.Lease)
	return timers, claimed, err
}

// fireAll fires a claimed batch, Concurrency at a time, keeping the leases
// of those not yet fired.
func fireAll(ctx context.Context, cfg Config, timers []coord.Timer, claimed time.Time) {
	h := &holder{cfg: cfg, held: make(map[string]coord.Timer, len(timers))}
	for _, t := range timers {
		h.held[t.ID] = t
	}
	stop := h.renew(ctx)
	defer stop()
	if cfg.AfterClaim != nil {
		cfg.AfterClaim(timers)
	}
	sem := make(chan struct{}, cfg.Concurrency)
	var wg sync.WaitGroup
	for _, t := range timers {
		sem <- struct{}{}
		wg.Add(1)
		go func(t coord.Timer) {
			defer func() { <-sem; wg.Done() }()
			fire(ctx, cfg, t, claimed)
			h.release(t.ID)
		}(t)
	}
	wg.Wait()
}

// holder keeps the leases of the timers of one claim alive while they are
// being fired.
type holder struct {
	cfg  Config
	mu   sync.Mutex
	held map[string]coord.Timer
}

func (h *holder) release(id string) {
	h.mu.Lock()
	delete(h.held, id)
	h.mu.Unlock()
}

// renew extends the held leases every Lease/3 until the returned stop is
// called. A failed renewal is only logged: the timers it could not keep
// are claimed again by others, and fire fences them out.
func (h *holder) renew(ctx context.Context) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(max(h.cfg.Lease/3, time.Millisecond))
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			h.mu.Lock()
			held := make([]coord.Timer, 0, len(h.held))
			for _, t := range h.held {
				held = append(held, t)
			}
			h.mu.Unlock()
			if len(held) == 0 {
				continue
			}
			lost, err := h.cfg.Timers.Extend(ctx, h.cfg.Now(), h.cfg.Lease, held...)
			if err != nil {
				h.cfg.Logger.Warn("scheduler: could not renew the leases of timers in hand; others may fire them", "timers", len(held), "err", err)
			}
			for _, id := range lost {
				h.release(id)
			}
		}
	}()
	return func() { close(done); <-finished }
}

// fire resumes one timer's branch and removes the timer once its effects are
// published. On a transient failure it leaves the timer claimed: the lease
// runs out and it is fired again.
func fire(ctx context.Context, cfg Config, t coord.Timer, claimed time.Time) {
	log := cfg.Logger.With("timer", t.ID)
	m, err := cfg.Engine.Thaw(ctx, t.ID, t.Payload)
	if err == nil {
		if cfg.Tracer != nil {
			var span trace.Span
			ctx, span = cfg.Tracer.Start(ctx, tracing.Run{ExecutionID: m.ExecutionID, WorkflowID: m.WorkflowID, NodeID: m.CurrentNode,
				Lineage: engine.Lineage(m.LineageStack), Attempt: m.Attempt, Resumed: true})
			defer span.End()
		}
		d := engine.Delivery{Trace: cfg.Tracer.Traceparent(ctx)}
		err = publish.Handle(ctx, publish.Config{Broker: cfg.Broker, Completed: cfg.Engine.Completed}, func(s engine.Sink) error {
			if err := cfg.Engine.ResumeTimer(ctx, d, t.ID, m, t.Due, s); err != nil { // paused branches too (issue 34)
				return err
			}
			return fence(ctx, cfg, t)
		})
		if errors.Is(err, errLost) {
			log.Info("scheduler: the timer was claimed again while this scheduler stalled; leaving it to its new claimer", "claims", t.Claims)
			return
		}
	}
	switch {
	case err == nil:
		cfg.Metrics.TimerFired("resumed", claimed.Sub(t.Due))
	case errors.Is(err, engine.ErrInvalid) || errors.Is(err, broker.ErrReject):
		// It can never fire; keeping it would retry it forever.
		log.Error("scheduler: dropping a timer that cannot be resumed", "err", err)
		cfg.Metrics.TimerFired("dropped", claimed.Sub(t.Due))
	default:
		log.Warn("scheduler: resume failed; the timer fires again when its lease ends", "err", err, "claims", t.Claims)
		cfg.Metrics.TimerFired("failed", claimed.Sub(t.Due))
		return
	}
	if err := cfg.Timers.Done(ctx, t.ID); err != nil {
		log.Warn("scheduler: could not remove a fired timer; it may fire again (harmlessly)", "err", err)
	}
}

// errLost says a timer is no longer this scheduler's.
var errLost = errors.New("timer lease lost")

// fence checks, just before the effects of t are published, that t is still
// held under this claim (and renews its lease, so that the publish that
// follows has a whole lease to finish in). A scheduler that stalled past its
// lease learns here that another claimed the timer again: publishing now
// would repeat that one's effects. The check and the publish are not atomic
// (the broker takes no fence), so a stall of more than a lease exactly
// between them still publishes twice; the copies are then the same messages
// with the same ids, which the engine recognises.
func fence(ctx context.Context, cfg Config, t coord.Timer) error {
	lost, err := cfg.Timers.Extend(ctx, cfg.Now(), cfg.Lease, t)
	if err != nil {
		return err
	}
	if len(lost) > 0 {
		return errLost
	}
	return nil
}
