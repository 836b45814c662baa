package server

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/rune-org/rune/engine"
	"github.com/rune-org/rune/store"
)

// Cron triggers: the component that fires the slots of workflows'
// schedules (their API is in schedules.go). Not to be confused with the
// scheduler package, whose timers resume waiting nodes.

// Defaults of CronConfig.
const (
	CronPollDefault  = 200 * time.Millisecond
	CronGraceDefault = time.Second
)

// CronConfig configures the cron triggers. Every field has the default
// its comment states.
type CronConfig struct {
	// Off turns the cron triggers off on this server (for benchmarks and
	// tests of other parts). Defaults to false: every replica runs them.
	Off bool
	// Poll is how often the cron triggers look for due schedule slots.
	// Defaults to CronPollDefault.
	Poll time.Duration
	// Grace: a slot that came due more than this before this server's
	// cron triggers started was missed (no server ran it) and is handled
	// by its schedule's policy; later slots always fire, however late.
	// Defaults to CronGraceDefault.
	Grace time.Duration
}

func (c CronConfig) withDefaults() CronConfig {
	c.Poll = cmp.Or(c.Poll, CronPollDefault)
	c.Grace = cmp.Or(c.Grace, CronGraceDefault)
	return c
}

// crons fires due schedule slots as enqueued executions (Run).
type crons struct {
	cfg   CronConfig
	store store.Store
	log   *slog.Logger
	now   func() time.Time
	// owner names this server in the logs.
	owner string
	// wakeDispatcher is called after a fire enqueued executions.
	wakeDispatcher func()
	// flow sets the priority of the executions fired (flow.go).
	flow *flow
}

func newCrons(cfg CronConfig, st store.Store, log *slog.Logger, now func() time.Time, owner string, wakeDispatcher func()) *crons {
	return &crons{cfg: cfg, store: st, log: log, now: now, owner: owner, wakeDispatcher: wakeDispatcher}
}

// Run fires due schedule slots until ctx is done. Every replica runs it;
// FireSchedule's compare-and-set lets one fire each slot. It sleeps until
// the next slot it saw or Poll, whichever is first, so slots fire on time
// and replicas race for them at the same instant.
func (c *crons) Run(ctx context.Context) error {
	started := c.now()
	return rounds(ctx, nil, func(ctx context.Context) time.Duration {
		next, err := c.fire(ctx, started)
		if err != nil && ctx.Err() == nil {
			c.log.Warn("schedules: firing failed; retrying", "err", err)
		}
		wait := c.cfg.Poll
		if !next.IsZero() {
			wait = min(wait, max(next.Sub(c.now()), 0))
		}
		return wait
	})
}

// fire fires every schedule due now once, and returns the earliest slot
// due within the next Poll (zero when none).
func (c *crons) fire(ctx context.Context, started time.Time) (time.Time, error) {
	now := c.now()
	due, err := c.store.DueSchedules(ctx, now.Add(c.cfg.Poll), store.ListLimitMax)
	if err != nil {
		return time.Time{}, err
	}
	var next time.Time
	var errs []error
	for _, sc := range due {
		if sc.NextAt.After(now) {
			if next.IsZero() || sc.NextAt.Before(next) {
				next = *sc.NextAt
			}
			continue
		}
		var cfg scheduleSettings
		p, err := (*plan)(nil), json.Unmarshal(sc.Settings, &cfg)
		if err == nil {
			p, err = parsePlan(cfg)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("schedule %s: settings: %w", sc.ID, err))
			continue
		}
		xs, err := c.store.FireSchedule(ctx, c.decide(sc, p, now, started))
		if errors.Is(err, store.ErrConflict) {
			continue // another replica fired it first
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("schedule %s: %w", sc.ID, err))
			continue
		}
		if len(xs) > 0 && c.flow != nil {
			c.flow.prioritize(ctx, xs, cfg.Priority)
		}
		if len(xs) > 0 {
			c.log.Debug("schedule fired", "server", c.owner, "schedule", sc.ID, "workflow", sc.WorkflowID, "executions", len(xs))
			c.wakeDispatcher()
		}
	}
	return next, errors.Join(errs...)
}

// decide returns the fire of sc's due slots at now: the slots from NextAt
// up to now, each fired or, when it came due before this server's cron
// triggers started (less Grace) — no server was running them — missed and
// handled by the policy.
func (c *crons) decide(sc *store.Schedule, p *plan, now, started time.Time) store.Fire {
	f := store.Fire{ScheduleID: sc.ID, From: *sc.NextAt, At: now}
	var due, missed []time.Time
	slot := sc.NextAt
	for n := 0; slot != nil && !slot.After(now); n++ {
		if n == maxSlotsScanned {
			// A long outage: jump to the slots of the last grace period.
			slot = p.first(now.Add(-c.cfg.Grace))
			continue
		}
		if slot.Before(started.Add(-c.cfg.Grace)) {
			missed = append(missed, *slot)
		} else {
			due = append(due, *slot)
		}
		f.LastSlot = *slot
		slot = p.next(*slot)
	}
	f.Next = slot
	if p.cfg.Policy == PolicyCatchUp {
		due = append(missed[max(0, len(missed)-p.cfg.CatchUpMax):], due...)
	}
	for _, t := range due {
		input, _ := scheduleTrigger(sc.ID, sc.Name, t, t.Before(started.Add(-c.cfg.Grace)), p.cfg.Input)
		f.Executions = append(f.Executions, store.ExecutionInput{
			ID: engine.NewExecutionID(now), WorkflowID: sc.WorkflowID, Input: input, IdempotencyKey: slotKey(sc.ID, t),
			Trigger: "schedule:" + sc.ID, AvailableAt: t.Add(p.jitterOf(sc.ID, t)), At: now,
		})
	}
	if len(missed) > 0 && p.cfg.Policy == PolicySkip {
		c.log.Info("schedule: slots missed while no server ran it were skipped (policy skip)",
			"schedule", sc.ID, "workflow", sc.WorkflowID, "missed", len(missed), "first", missed[0], "last", missed[len(missed)-1])
	}
	return f
}
