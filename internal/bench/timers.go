package bench

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/rune-org/rune/broker"
	"github.com/rune-org/rune/client"
	"github.com/rune-org/rune/coord"
	coordmem "github.com/rune-org/rune/coord/memory"
	"github.com/rune-org/rune/engine"
	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/nodes"
)

// WaitWorkflow returns a definition of a trigger, a wait of d (whole
// milliseconds, in seconds) and a set node reading the trigger's payload.
func WaitWorkflow(d time.Duration) []byte {
	type obj = map[string]any
	raw, _ := json.Marshal(obj{
		"id": "bench_wait", "name": "bench: wait then set",
		"nodes": []obj{
			{"id": "start", "type": "trigger", "trigger": true},
			{"id": "pause", "type": "wait", "parameters": obj{"amount": float64(d.Milliseconds()) / 1000, "unit": "seconds"}},
			{"id": "after", "type": "set", "parameters": obj{"values": obj{"seed": "{{ $trigger.seed }}", "resumed": "{{ $pause.resume_at }}"}}},
		},
		"edges": []obj{{"id": "e1", "src": "start", "dst": "pause"}, {"id": "e2", "src": "pause", "dst": "after"}},
	})
	return raw
}

// TimerLatenessConfig is one run of TimerLateness.
type TimerLatenessConfig struct {
	// Broker and Engine are the runtime's. Required. Workers and at least
	// one scheduler must be running on them.
	Broker broker.Broker
	Engine *engine.Engine
	// Executions is how many executions to start. Default 10,000.
	Executions int
	// Wait is how long each waits. Default 2s.
	Wait time.Duration
	// StartConcurrency is how many executions are being started at once.
	// Default 64.
	StartConcurrency int
	// StartRate is how many executions are started per second, paced
	// evenly: execution i starts no earlier than i/StartRate after the
	// first, so the waits come due at that rate too. 0 (the default)
	// starts them as fast as StartConcurrency allows; where that is faster
	// than the workers finish executions, the resumed executions queue
	// behind the starts and lateness measures that queue, not the timers.
	StartRate int
	// Follow reads each execution's events through Broker.Follow. Otherwise
	// (the default) the Status and Completion topics are consumed, as a
	// master does: cheaper with RabbitMQ, where each follower is a queue,
	// but this must then be their only consumer. Use Follow on a broker
	// whose statuses go to followers only (the embedded runtime's).
	Follow bool
	// Progress, when set, receives a line about progress every second.
	Progress io.Writer
}

// TimerResult summarises a TimerLateness run. Lateness is measured against
// each wait's due time (the resume_at of its waiting status): Fire is when
// the scheduler resumed the wait (its success status), End when the
// execution completed, after the node following the wait ran.
type TimerResult struct {
	Executions int           `json:"executions"`
	Wait       time.Duration `json:"wait_ns"`
	// StartSpread is how long starting every execution took: the due times
	// are spread over it.
	StartSpread time.Duration `json:"start_spread_ns"`
	// StartRate is the configured pace (0: as fast as possible);
	// AchievedStartRate is (Executions − 1) / StartSpread, the pace of the
	// starts after the first.
	StartRate         int           `json:"start_rate"`
	AchievedStartRate float64       `json:"achieved_start_rate"`
	Elapsed           time.Duration `json:"elapsed_ns"`
	FireP50           time.Duration `json:"fire_lateness_p50_ns"`
	FireP99           time.Duration `json:"fire_lateness_p99_ns"`
	FireMax           time.Duration `json:"fire_lateness_max_ns"`
	// Handoff is End − Fire of each execution: from the scheduler's resume
	// to the completion, which the engine stamps when the set node after
	// the wait runs (so: until a worker takes up the resumed message).
	HandoffP50 time.Duration `json:"handoff_p50_ns"`
	HandoffP99 time.Duration `json:"handoff_p99_ns"`
	HandoffMax time.Duration `json:"handoff_max_ns"`
	EndP50     time.Duration `json:"end_lateness_p50_ns"`
	EndP99     time.Duration `json:"end_lateness_p99_ns"`
	EndMax     time.Duration `json:"end_lateness_max_ns"`
	// Early counts waits that resumed before their due time (must be 0).
	Early int `json:"early"`
	// Duplicates counts repeated wait successes or completions (must be 0).
	Duplicates int `json:"duplicates"`
	Failed     int `json:"failed_executions"`
}

// timerTrack is what TimerLateness learns of one execution.
type timerTrack struct {
	due, fired, ended time.Time
	fires, ends       int
	failed            bool
}

// TimerLateness starts cfg.Executions executions of WaitWorkflow(cfg.Wait)
// and measures how late their waits resume and their executions end.
func TimerLateness(ctx context.Context, cfg TimerLatenessConfig) (*TimerResult, error) {
	if cfg.Broker == nil || cfg.Engine == nil {
		return nil, errors.New("bench: TimerLatenessConfig.Broker and Engine are required")
	}
	if cfg.Executions <= 0 {
		cfg.Executions = 10000
	}
	if cfg.Wait <= 0 {
		cfg.Wait = 2 * time.Second
	}
	if cfg.StartConcurrency <= 0 {
		cfg.StartConcurrency = 64
	}
	if cfg.StartRate < 0 {
		return nil, errors.New("bench: TimerLatenessConfig.StartRate must not be negative")
	}
	wf, err := cfg.Engine.Compile(WaitWorkflow(cfg.Wait))
	if err != nil {
		return nil, err
	}
	runID := strconv.FormatInt(time.Now().UnixNano(), 36)
	ids := make([]string, cfg.Executions)
	tracks := make(map[string]*timerTrack, cfg.Executions)
	for i := range ids {
		ids[i] = fmt.Sprintf("tbench_%s_%d", runID, i)
		tracks[ids[i]] = &timerTrack{}
	}
	var (
		mu    sync.Mutex
		ended atomic.Int64
		fired atomic.Int64
		all   = make(chan struct{})
		once  sync.Once
	)
	record := func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		var tr *timerTrack
		switch b := ev.(type) {
		case *message.NodeStatus:
			if tr = tracks[b.ExecutionID]; tr == nil || b.NodeID != "pause" {
				return
			}
			switch b.Status {
			case message.StatusWaiting:
				if b.ResumeAt != nil {
					tr.due = *b.ResumeAt
				}
			case message.StatusSuccess:
				if tr.fires++; tr.fires == 1 {
					tr.fired = b.ExecutedAt
					fired.Add(1)
				}
			}
		case *message.Completion:
			if tr = tracks[b.ExecutionID]; tr == nil {
				return
			}
			if tr.ends++; tr.ends == 1 {
				tr.ended = b.CompletedAt
				tr.failed = b.Status != message.CompletionCompleted
				ended.Add(1)
			}
		}
		if tr != nil && ended.Load() == int64(cfg.Executions) && fired.Load() == int64(cfg.Executions) {
			once.Do(func() { close(all) })
		}
	}

	fctx, stopFollowing := context.WithCancel(ctx)
	var followers sync.WaitGroup
	defer func() { stopFollowing(); followers.Wait() }()
	if !cfg.Follow {
		for _, topic := range []broker.Topic{broker.Status, broker.Completion} {
			followers.Go(func() {
				_ = cfg.Broker.Consume(fctx, topic, broker.ConsumeOptions{Concurrency: 4, Prefetch: 1000}, func(_ context.Context, d *broker.Delivery) error {
					for _, m := range broker.Unbatch(d.Message) {
						record(m.Body)
					}
					return nil
				})
			})
		}
	}
	stopProgress := reportCount(cfg.Progress, "executions", cfg.Executions, &ended)
	defer stopProgress()

	// Start every execution, StartConcurrency at once; with a StartRate,
	// execution i no earlier than its slot on the schedule.
	start := time.Now()
	slot := func(i int) time.Time {
		return start.Add(time.Duration(int64(i) * int64(time.Second) / int64(cfg.StartRate)))
	}
	var (
		next  atomic.Int64
		wg    sync.WaitGroup
		errMu sync.Mutex
		first error
	)
	fail := func(err error) {
		errMu.Lock()
		if first == nil {
			first = err
		}
		errMu.Unlock()
	}
	for range cfg.StartConcurrency {
		wg.Go(func() {
			var pace *time.Timer
			if cfg.StartRate > 0 {
				pace = time.NewTimer(time.Hour)
				pace.Stop()
			}
			for i := int(next.Add(1)) - 1; i < cfg.Executions && fctx.Err() == nil; i = int(next.Add(1)) - 1 {
				if pace != nil {
					if !waitUntil(fctx, pace, slot(i)) {
						return
					}
				}
				if cfg.Follow {
					events, err := cfg.Broker.Follow(fctx, ids[i])
					if err != nil {
						fail(err)
						return
					}
					followers.Go(func() {
						for ev := range events {
							record(ev.Body)
							if _, done := ev.Body.(*message.Completion); done {
								// The wait's success precedes the completion
								// on one follower; nothing more to read.
								return
							}
						}
					})
				}
				if err := client.Start(fctx, cfg.Broker, cfg.Engine, wf, ids[i], map[string]any{"seed": i}); err != nil {
					fail(err)
					return
				}
			}
		})
	}
	wg.Wait()
	spread := time.Since(start)
	if first != nil {
		return nil, fmt.Errorf("bench: start executions: %w", first)
	}
	select {
	case <-all:
	case <-ctx.Done():
		return nil, fmt.Errorf("bench: %d of %d executions completed, %d waits fired: %w", ended.Load(), cfg.Executions, fired.Load(), ctx.Err())
	}
	elapsed := time.Since(start)

	mu.Lock()
	defer mu.Unlock()
	res := &TimerResult{Executions: cfg.Executions, Wait: cfg.Wait, StartSpread: spread, StartRate: cfg.StartRate,
		AchievedStartRate: float64(max(cfg.Executions-1, 1)) / spread.Seconds(), Elapsed: elapsed}
	fire := make([]time.Duration, 0, len(tracks))
	handoffs := make([]time.Duration, 0, len(tracks))
	end := make([]time.Duration, 0, len(tracks))
	for id, tr := range tracks {
		if tr.due.IsZero() {
			return nil, fmt.Errorf("bench: execution %s completed without a waiting status with resume_at", id)
		}
		if tr.fired.Before(tr.due.Truncate(time.Millisecond)) {
			res.Early++
		}
		res.Duplicates += tr.fires - 1 + tr.ends - 1
		if tr.failed {
			res.Failed++
		}
		fire = append(fire, tr.fired.Sub(tr.due))
		handoffs = append(handoffs, tr.ended.Sub(tr.fired))
		end = append(end, tr.ended.Sub(tr.due))
	}
	res.FireP50, res.FireP99, res.FireMax = summary(fire)
	res.HandoffP50, res.HandoffP99, res.HandoffMax = summary(handoffs)
	res.EndP50, res.EndP99, res.EndMax = summary(end)
	return res, nil
}

// Print writes r for people.
func (r *TimerResult) Print(w io.Writer, title string) {
	fmt.Fprintf(w, "%s\n", title)
	fmt.Fprintf(w, "  executions:     %d each waiting %s, started over %s (%d not completed)\n", r.Executions, r.Wait, r.StartSpread.Round(time.Millisecond), r.Failed)
	fmt.Fprintf(w, "  start rate:     %s, achieved %.0f/s\n", StartPace(r.StartRate), r.AchievedStartRate)
	fmt.Fprintf(w, "  wait resumed:   %s late\n", spreadText(r.FireP50, r.FireP99, r.FireMax))
	fmt.Fprintf(w, "  execution end:  %s after the due time\n", spreadText(r.EndP50, r.EndP99, r.EndMax))
	fmt.Fprintf(w, "  resume to end:  %s (the worker's queue and the node)\n", spreadText(r.HandoffP50, r.HandoffP99, r.HandoffMax))
	fmt.Fprintf(w, "  early / duplicate: %d / %d; elapsed %s\n", r.Early, r.Duplicates, r.Elapsed.Round(time.Millisecond))
}

// summary sorts ds (not empty) and returns its p50, p99 and maximum.
func summary(ds []time.Duration) (p50, p99, most time.Duration) {
	slices.Sort(ds)
	return Percentile(ds, 0.50), Percentile(ds, 0.99), ds[len(ds)-1]
}

// spreadText writes a summary for people, to the microsecond.
func spreadText(p50, p99, most time.Duration) string {
	return fmt.Sprintf("p50 %s, p99 %s, max %s", p50.Round(time.Microsecond), p99.Round(time.Microsecond), most.Round(time.Microsecond))
}

// StartPace describes a TimerLatenessConfig.StartRate.
func StartPace(rate int) string {
	if rate <= 0 {
		return "as fast as possible"
	}
	return fmt.Sprintf("paced at %d/s", rate)
}

// waitUntil waits on t until at, and says whether it got there before ctx
// was done.
func waitUntil(ctx context.Context, t *time.Timer, at time.Time) bool {
	for {
		d := time.Until(at)
		if d <= 0 {
			return true
		}
		t.Reset(d)
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
}

// TimerBacklogConfig is one run of TimerBacklog.
type TimerBacklogConfig struct {
	// Timers is the timer store, empty (a fresh prefix). Required. The
	// benchmark leaves its backlog in it: drop the store afterwards.
	Timers coord.Timers
	// Redis, when set, is the Redis behind Timers: used_memory is read
	// before and after the backlog is scheduled.
	Redis goredis.UniversalClient
	// Pending is how many timers wait in the backlog. Default 1,000,000.
	Pending int
	// Concurrency is how many Schedule calls run at once. Default 64.
	Concurrency int
	// Rate is how many timers come due per second while lateness is
	// measured. Default 5,000.
	Rate int
	// Duration is how long timers come due at Rate. Default 10s.
	Duration time.Duration
	// Schedulers is how many claim loops run. Default 1.
	Schedulers int
	// Batch, Lease and Poll are the claim loops' settings, as
	// scheduler.Config's. Defaults 500, 30s, 50ms.
	Batch int
	Lease time.Duration
	Poll  time.Duration
	// Progress, when set, receives a line about progress every second
	// while the backlog is scheduled.
	Progress io.Writer
}

// TimerBacklogResult summarises a TimerBacklog run.
type TimerBacklogResult struct {
	Pending      int           `json:"pending"`
	PayloadBytes int           `json:"payload_bytes"`
	ScheduleTime time.Duration `json:"schedule_ns"`
	// SchedulePerSecond is Pending / ScheduleTime.
	SchedulePerSecond float64 `json:"schedule_per_second"`
	// MemoryBefore and MemoryAfter are Redis's used_memory around the
	// scheduling of the backlog (0 without Config.Redis).
	MemoryBefore int64 `json:"redis_used_memory_before"`
	MemoryAfter  int64 `json:"redis_used_memory_after"`
	// Fired is how many timers came due during the measurement, Rate per
	// second; their lateness is claim time minus due time.
	Fired     int           `json:"fired"`
	Rate      int           `json:"rate"`
	LateP50   time.Duration `json:"lateness_p50_ns"`
	LateP99   time.Duration `json:"lateness_p99_ns"`
	LateMax   time.Duration `json:"lateness_max_ns"`
	Early     int           `json:"early"`
	Duplicate int           `json:"duplicate"`
}

// TimerPayload returns the frozen message a wait node of a small workflow
// (trigger → set → wait → set, with a realistic trigger payload) leaves in
// the timer store, produced by a real engine with a definition store: what
// Schedule receives in the distributed runtime.
func TimerPayload(ctx context.Context) ([]byte, error) {
	_, payload, err := timerMessage(ctx)
	return payload, err
}

// timerMessage runs the payload workflow to its wait and returns the wait
// node's message and its frozen form.
func timerMessage(ctx context.Context) (*message.NodeExecution, []byte, error) {
	def := []byte(`{"id":"notify_after_delay","name":"notification: delay then send","nodes":[
	{"id":"start","type":"trigger","trigger":true},
	{"id":"prepare","type":"set","parameters":{"values":{"to":"{{ $trigger.user.email }}","subject":"Your order {{ $trigger.order.id }} has shipped","channel":"email"}}},
	{"id":"pause","type":"wait","parameters":{"amount":1,"unit":"hours"}},
	{"id":"send","type":"set","parameters":{"values":{"sent":true,"to":"{{ $prepare.to }}"}}}],
	"edges":[{"id":"e1","src":"start","dst":"prepare"},{"id":"e2","src":"prepare","dst":"pause"},{"id":"e3","src":"pause","dst":"send"}]}`)
	timers := coordmem.NewTimers()
	cm := coordmem.New(coordmem.Options{})
	defer cm.Close()
	e, err := engine.New(engine.Config{Registry: nodes.NewRegistry(nodes.Options{}), Coord: cm, Timers: timers,
		Barriers: coordmem.NewBarriers(), Definitions: coordmem.NewBlobs(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, nil, err
	}
	wf, err := e.Compile(def)
	if err != nil {
		return nil, nil, err
	}
	input := map[string]any{
		"user":  map[string]any{"id": "usr_8f14e45fceea167a", "email": "ada@example.com", "name": "Ada Lovelace", "locale": "en-GB"},
		"order": map[string]any{"id": "ord_2026_000123", "total": 129.9, "currency": "EUR", "items": 3},
	}
	var f engine.Effects
	if err := e.Start(ctx, wf, engine.NewExecutionID(time.Now()), input, &f); err != nil {
		return nil, nil, err
	}
	for steps := 0; len(f.Next) > 0; steps++ {
		if steps > 10 {
			return nil, nil, errors.New("bench: the payload workflow did not reach its wait")
		}
		m := f.Next[0].Msg
		f = engine.Effects{}
		if err := e.Handle(ctx, engine.Delivery{}, m, &f); err != nil {
			return nil, nil, err
		}
	}
	ts, err := timers.Claim(ctx, time.Now().Add(2*time.Hour), 1, time.Minute)
	if err != nil || len(ts) != 1 {
		return nil, nil, fmt.Errorf("bench: the payload workflow scheduled %d timers (%v), want 1", len(ts), err)
	}
	m, err := e.Thaw(ctx, ts[0].ID, ts[0].Payload)
	if err != nil {
		return nil, nil, err
	}
	// Inline, so that another engine (another definition store) can
	// freeze copies of it.
	m.WorkflowDefinition, m.DefinitionRef = wf.Raw, ""
	return m, ts[0].Payload, nil
}

// payloads makes timer ids and payloads from one frozen message, each with
// its own execution and message id of the template's lengths, frozen as the
// engine freezes them (so payloads and ids keep their real sizes).
type payloads struct {
	e             *engine.Engine
	tmpl          *message.NodeExecution
	execID, msgID string
	runID         string
}

func newPayloads(ctx context.Context) (*payloads, error) {
	e, err := engine.New(engine.Config{Registry: nodes.NewRegistry(nodes.Options{}), Coord: coordmem.New(coordmem.Options{}),
		Definitions: coordmem.NewBlobs(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, err
	}
	m, _, err := timerMessage(ctx)
	if err != nil {
		return nil, err
	}
	return &payloads{e: e, tmpl: m, execID: m.ExecutionID, msgID: m.MessageID, runID: strconv.FormatInt(time.Now().UnixNano(), 36)}, nil
}

// get returns the id and payload of timer i of series tag (one letter),
// with the id engine.TimerID gives.
func (p *payloads) get(tag string, i int) (string, []byte) {
	exec := fmt.Sprintf("exec_%s%s_%0*d", p.runID, tag, max(0, len(p.execID)-len(p.runID)-len(tag)-6), i)
	// Message ids are unique per run, series and index: the timer id is
	// the message id alone.
	sum := sha256.Sum256(fmt.Appendf(nil, "%s/%s/%d", p.runID, tag, i))
	msg := hex.EncodeToString(sum[:])[:len(p.msgID)]
	m := *p.tmpl
	m.ExecutionID, m.MessageID = exec, msg
	b, err := p.e.Freeze(context.Background(), &m)
	if err != nil {
		panic(err) // an in-memory definition store cannot fail
	}
	return engine.TimerID(&m), b
}

// TimerBacklog schedules cfg.Pending timers due an hour to a day from now,
// then measures how late timers are claimed while cfg.Rate of them come due
// per second for cfg.Duration on top of that backlog. The claim loops do
// what scheduler.Run does but publish nothing: lateness is claim time minus
// due time, the scheduler's own share of a wait's lateness.
func TimerBacklog(ctx context.Context, cfg TimerBacklogConfig) (*TimerBacklogResult, error) {
	if cfg.Timers == nil {
		return nil, errors.New("bench: TimerBacklogConfig.Timers is required")
	}
	if cfg.Pending <= 0 {
		cfg.Pending = 1000000
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 64
	}
	if cfg.Rate <= 0 {
		cfg.Rate = 5000
	}
	if cfg.Duration <= 0 {
		cfg.Duration = 10 * time.Second
	}
	if cfg.Schedulers <= 0 {
		cfg.Schedulers = 1
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 500
	}
	if cfg.Lease <= 0 {
		cfg.Lease = 30 * time.Second
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 50 * time.Millisecond
	}
	pl, err := newPayloads(ctx)
	if err != nil {
		return nil, fmt.Errorf("bench: build the timer payload: %w", err)
	}
	_, sample := pl.get("s", 0)
	res := &TimerBacklogResult{Pending: cfg.Pending, PayloadBytes: len(sample), Rate: cfg.Rate}
	if res.MemoryBefore, err = usedMemory(ctx, cfg.Redis); err != nil {
		return nil, err
	}

	// The backlog: due an hour to a day from now, spread evenly.
	now := time.Now()
	base, span := now.Add(time.Hour), 23*time.Hour
	var done atomic.Int64
	stopProgress := reportCount(cfg.Progress, "timers scheduled", cfg.Pending, &done)
	start := time.Now()
	err = parallel(ctx, cfg.Concurrency, cfg.Pending, func(i int) error {
		id, p := pl.get("b", i)
		due := base.Add(time.Duration(int64(span) / int64(cfg.Pending) * int64(i)))
		if err := cfg.Timers.Schedule(ctx, id, due, p); err != nil {
			return err
		}
		done.Add(1)
		return nil
	})
	res.ScheduleTime = time.Since(start)
	stopProgress()
	if err != nil {
		return nil, fmt.Errorf("bench: schedule the backlog: %w", err)
	}
	res.SchedulePerSecond = float64(cfg.Pending) / res.ScheduleTime.Seconds()
	if res.MemoryAfter, err = usedMemory(ctx, cfg.Redis); err != nil {
		return nil, err
	}

	// The due stream: Rate per second for Duration, from a second from now,
	// scheduled by a producer that keeps a second ahead of the due times.
	n := int(int64(cfg.Rate) * int64(cfg.Duration) / int64(time.Second))
	first := time.Now().Add(time.Second)
	dueOf := func(i int) time.Time {
		return first.Add(time.Duration(int64(time.Second) * int64(i) / int64(cfg.Rate)))
	}
	index := make(map[string]int, n)
	for i := range n {
		id, _ := pl.get("d", i)
		index[id] = i
	}
	claimedAt := make([]time.Time, n)
	claims := make([]int32, n)
	var claimedN atomic.Int64

	lctx, stopLoops := context.WithCancel(ctx)
	defer stopLoops()
	var loops sync.WaitGroup
	loopErr := make(chan error, cfg.Schedulers)
	for range cfg.Schedulers {
		loops.Go(func() {
			if err := claimLoop(lctx, ctx, cfg, func(t coord.Timer, at time.Time) {
				i, ok := index[t.ID]
				if !ok {
					return // a backlog timer: not due in this run
				}
				if atomic.AddInt32(&claims[i], 1) == 1 {
					claimedAt[i] = at
					claimedN.Add(1)
				}
			}); err != nil {
				loopErr <- err
			}
		})
	}
	prodErr := make(chan error, 1)
	go func() {
		const chunk = 500
		var err error
		for c := 0; c < n && err == nil; c += chunk {
			// Stay about a second ahead of the due times.
			if wait := time.Until(dueOf(c).Add(-time.Second)); wait > 0 {
				select {
				case <-lctx.Done():
					err = lctx.Err()
				case <-time.After(wait):
				}
			}
			if err == nil {
				err = parallel(lctx, min(cfg.Concurrency, 16), min(chunk, n-c), func(j int) error {
					id, p := pl.get("d", c+j)
					return cfg.Timers.Schedule(lctx, id, dueOf(c+j), p)
				})
			}
		}
		prodErr <- err
	}()

	deadline := time.NewTimer(cfg.Duration + time.Minute)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for claimedN.Load() < int64(n) {
		select {
		case err := <-prodErr:
			if err != nil {
				return nil, fmt.Errorf("bench: schedule due timers: %w", err)
			}
		case err := <-loopErr:
			return nil, fmt.Errorf("bench: claim loop: %w", err)
		case <-deadline.C:
			return nil, fmt.Errorf("bench: %d of %d due timers claimed a minute after the last came due", claimedN.Load(), n)
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
		}
	}
	stopLoops()
	loops.Wait()

	late := make([]time.Duration, n)
	for i := range n {
		d := claimedAt[i].Sub(dueOf(i).Truncate(time.Millisecond))
		if d < 0 {
			res.Early++
		}
		res.Duplicate += int(claims[i]) - 1
		late[i] = d
	}
	res.Fired = n
	res.LateP50, res.LateP99, res.LateMax = summary(late)
	return res, nil
}

// claimLoop claims and removes due timers as scheduler.Run does, calling
// seen for each with the time of its claim, until ctx is done.
//
// It claims until ctx is done, but marks what it claimed done on doneCtx:
// the run stops as soon as the last due timer is seen, and a claim left
// open would keep that timer claimed in the store until its lease ends.
func claimLoop(ctx, doneCtx context.Context, cfg TimerBacklogConfig, seen func(coord.Timer, time.Time)) error {
	for ctx.Err() == nil {
		now := time.Now()
		ts, err := cfg.Timers.Claim(ctx, now, cfg.Batch, cfg.Lease)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		for _, t := range ts {
			seen(t, now)
		}
		if err := parallel(doneCtx, 64, len(ts), func(i int) error { return cfg.Timers.Done(doneCtx, ts[i].ID) }); err != nil {
			return err
		}
		if len(ts) == cfg.Batch {
			continue
		}
		select {
		case <-ctx.Done():
		case <-time.After(cfg.Poll):
		}
	}
	return nil
}

// parallel calls f(0) … f(n-1), workers at once, and returns the first error.
func parallel(ctx context.Context, workers, n int, f func(int) error) error {
	var (
		next  atomic.Int64
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for range min(workers, n) {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n && ctx.Err() == nil; i = int(next.Add(1)) - 1 {
				if err := f(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return first
}

// usedMemory is Redis's used_memory, 0 without a client.
func usedMemory(ctx context.Context, rc goredis.UniversalClient) (int64, error) {
	if rc == nil {
		return 0, nil
	}
	info, err := rc.Info(ctx, "memory").Result()
	if err != nil {
		return 0, fmt.Errorf("bench: redis INFO memory: %w", err)
	}
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, errors.New("bench: redis INFO memory has no used_memory")
}

// Print writes r for people.
func (r *TimerBacklogResult) Print(w io.Writer, title string) {
	fmt.Fprintf(w, "%s\n", title)
	fmt.Fprintf(w, "  backlog:        %d timers of %d-byte payloads scheduled in %s = %.0f /s\n", r.Pending, r.PayloadBytes, r.ScheduleTime.Round(time.Millisecond), r.SchedulePerSecond)
	if r.MemoryAfter > 0 {
		per := float64(r.MemoryAfter-r.MemoryBefore) / float64(r.Pending)
		fmt.Fprintf(w, "  Redis memory:   %.1f MiB before, %.1f MiB after (%.0f bytes per timer)\n", float64(r.MemoryBefore)/(1<<20), float64(r.MemoryAfter)/(1<<20), per)
	}
	fmt.Fprintf(w, "  %d timers due at %d/s over the backlog, claimed late by: %s\n", r.Fired, r.Rate, spreadText(r.LateP50, r.LateP99, r.LateMax))
	fmt.Fprintf(w, "  early / duplicate claims: %d / %d\n", r.Early, r.Duplicate)
}
