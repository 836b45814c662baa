package server

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"
	// Schedules name IANA zones: embedded, so a container without
	// /usr/share/zoneinfo keeps them working.
	_ "time/tzdata"

	cron "github.com/netresearch/go-cron"

	"github.com/rune-org/rune/store"
)

// Schedule policies for slots missed while no server ran the schedules.
const (
	// PolicySkip: missed slots are not fired (the default).
	PolicySkip = "skip"
	// PolicyCatchUp: up to CatchUpMax missed slots (the newest) are fired,
	// oldest first.
	PolicyCatchUp = "catch_up"
	// CatchUpMaxDefault bounds a catch-up when the schedule sets no bound.
	CatchUpMaxDefault = 10
	// nextTimesShown is how many next fire times the API shows.
	nextTimesShown = 5
	// maxSlotsScanned bounds the slots one fire walks (a long outage of a
	// frequent schedule): older ones are decided missed without a look.
	maxSlotsScanned = 100_000
)

// scheduleSettings is a schedule's configuration, as the API takes it and
// as store.Schedule.Settings keeps it.
type scheduleSettings struct {
	// Cron is a 5-field expression or a descriptor (@every 10m, @daily, …).
	Cron string `json:"cron"`
	// Timezone is an IANA zone name; default UTC.
	Timezone string `json:"timezone,omitempty"`
	// Jitter delays each slot's execution by up to this duration
	// (deterministic per slot); default none.
	Jitter string `json:"jitter,omitempty"`
	// StartAt and EndAt bound the slots (inclusive); default unbounded.
	StartAt *time.Time `json:"start_at,omitempty"`
	EndAt   *time.Time `json:"end_at,omitempty"`
	// Policy is PolicySkip (default) or PolicyCatchUp.
	Policy string `json:"policy,omitempty"`
	// CatchUpMax bounds a catch-up; default CatchUpMaxDefault.
	CatchUpMax int `json:"catch_up_max,omitempty"`
	// Input is passed to each execution as $trigger.input.
	Input json.RawMessage `json:"input,omitempty"`
	// Priority of its executions, 1…10 (flow.go). Default: the
	// workflow's settings.priority, else 5.
	Priority int `json:"priority,omitempty"`
}

// scheduleInput is the body of a schedule's create or update.
type scheduleInput struct {
	Name string `json:"name"`
	scheduleSettings
	Paused bool `json:"paused,omitempty"`
}

// plan is a parsed schedule: its slots in its zone.
type plan struct {
	cfg   scheduleSettings
	sched cron.Schedule
	loc   *time.Location
	every time.Duration // @every's interval (0 for cron expressions)
	// fixedHours: the expression fires at chosen hours, not every hour, so
	// the second occurrence of a wall time repeated by a DST fall-back is
	// not a slot (a daily 01:30 runs once on that day).
	fixedHours bool
	jitter     time.Duration
}

// parsePlan validates settings; errors name the field.
func parsePlan(cfg scheduleSettings) (*plan, error) {
	p := &plan{cfg: cfg}
	if err := checkPriority(cfg.Priority); err != nil { // flow control (flow.go)
		return nil, badRequest("field %v", err)
	}
	if cfg.Timezone == "" {
		p.cfg.Timezone = "UTC"
	}
	loc, err := time.LoadLocation(p.cfg.Timezone)
	if err != nil || strings.ContainsAny(p.cfg.Timezone, " \t") {
		return nil, badRequest("field timezone: %q is not an IANA time zone name (e.g. Europe/Paris)", limitText(cfg.Timezone, 64))
	}
	expr := strings.TrimSpace(cfg.Cron)
	switch {
	case expr == "":
		return nil, badRequest("field cron: missing; want 5 fields (minute hour day month weekday) or @every 10m, @hourly, @daily, @weekly, @monthly")
	case strings.HasPrefix(expr, "CRON_TZ=") || strings.HasPrefix(expr, "TZ="):
		return nil, badRequest("field cron: give the zone in field timezone, not in the expression")
	case !strings.HasPrefix(expr, "@") && len(strings.Fields(expr)) != 5:
		return nil, badRequest("field cron: %q has %d fields; want 5 (minute hour day month weekday)", limitText(expr, 64), len(strings.Fields(expr)))
	}
	sched, err := cron.StandardParser().Parse("CRON_TZ=" + p.cfg.Timezone + " " + expr)
	if err != nil {
		return nil, badRequest("field cron: %q: %v", limitText(expr, 64), err)
	}
	p.sched, p.loc = sched, loc
	if spec, ok := sched.(*cron.SpecSchedule); ok {
		const day = 1<<24 - 1
		p.fixedHours = spec.Hour&day != day
	}
	if cd, ok := sched.(cron.ConstantDelaySchedule); ok {
		p.every = cd.Delay
	}
	if cfg.Jitter != "" {
		if p.jitter, err = time.ParseDuration(cfg.Jitter); err != nil || p.jitter < 0 {
			return nil, badRequest("field jitter: %q is not a duration such as 30s or 5m", limitText(cfg.Jitter, 32))
		}
	}
	switch cfg.Policy {
	case "":
		p.cfg.Policy = PolicySkip
	case PolicySkip, PolicyCatchUp:
	default:
		return nil, badRequest("field policy: %q is not %q or %q", limitText(cfg.Policy, 32), PolicySkip, PolicyCatchUp)
	}
	if cfg.CatchUpMax < 0 || cfg.CatchUpMax > 1000 {
		return nil, badRequest("field catch_up_max: want 0 (default %d) to 1000, got %d", CatchUpMaxDefault, cfg.CatchUpMax)
	}
	if p.cfg.CatchUpMax == 0 {
		p.cfg.CatchUpMax = CatchUpMaxDefault
	}
	if cfg.StartAt != nil && cfg.EndAt != nil && cfg.EndAt.Before(*cfg.StartAt) {
		return nil, badRequest("field end_at: before start_at")
	}
	if len(cfg.Input) > 0 {
		if err := validJSON(cfg.Input); err != nil {
			return nil, badRequest("field input: not one JSON value")
		}
		// Checked as the engine will see it: inside the slot's $trigger.
		trig, err := scheduleTrigger("", "", time.Time{}, false, cfg.Input)
		if err != nil {
			return nil, err
		}
		if err := checkInput(trig); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// first returns the first slot at or after t (and at or after StartAt),
// nil when there is none before EndAt.
func (p *plan) first(t time.Time) *time.Time {
	if p.every > 0 {
		// @every counts from start_at (its first slot), else from t, in
		// whole seconds.
		if p.cfg.StartAt != nil && !p.cfg.StartAt.Before(t) {
			return p.bound(p.cfg.StartAt.Truncate(time.Second))
		}
		return p.bound(t.Truncate(time.Second).Add(p.every))
	}
	if p.cfg.StartAt != nil && p.cfg.StartAt.After(t) {
		t = *p.cfg.StartAt
	}
	return p.bound(p.after(t.Add(-time.Nanosecond)))
}

// next returns the slot after slot, nil past EndAt.
func (p *plan) next(slot time.Time) *time.Time { return p.bound(p.after(slot)) }

// after returns the expression's next time after t, but not the second
// occurrence of a repeated wall time when the hours are fixed. A wall time
// in a DST gap (02:30 on a spring-forward night) comes out shifted by the
// gap (03:30), once.
func (p *plan) after(t time.Time) time.Time {
	n := p.sched.Next(t)
	for p.fixedHours && !n.IsZero() && repeatedWallTime(n.In(p.loc)) {
		n = p.sched.Next(n)
	}
	return n
}

// repeatedWallTime reports whether t's wall time already occurred earlier
// that day (t is in the hour a DST fall-back repeats).
func repeatedWallTime(t time.Time) bool {
	for _, shift := range []time.Duration{30 * time.Minute, time.Hour, 2 * time.Hour} {
		e := t.Add(-shift)
		if e.Hour() == t.Hour() && e.Minute() == t.Minute() && e.Day() == t.Day() {
			return true
		}
	}
	return false
}

func (p *plan) bound(slot time.Time) *time.Time {
	if slot.IsZero() || p.cfg.EndAt != nil && slot.After(*p.cfg.EndAt) {
		return nil
	}
	slot = store.Micro(slot)
	return &slot
}

// upcoming returns up to n slots from from.
func (p *plan) upcoming(from *time.Time, n int) []time.Time {
	out := []time.Time{} // [] and not null in the API when nothing is due
	for s := from; s != nil && len(out) < n; s = p.next(*s) {
		out = append(out, *s)
	}
	return out
}

// jitterOf is slot's delay: the same on every replica.
func (p *plan) jitterOf(scheduleID string, slot time.Time) time.Duration {
	if p.jitter <= 0 {
		return 0
	}
	h := sha256.Sum256([]byte(scheduleID + "|" + slot.UTC().Format(time.RFC3339Nano)))
	return time.Duration(binary.BigEndian.Uint64(h[:8]) % uint64(p.jitter))
}

// slotKey is the idempotency key of a schedule's slot: its time.
func slotKey(scheduleID string, slot time.Time) string {
	return "schedule:" + scheduleID + ":" + slot.UTC().Format(time.RFC3339Nano)
}

// scheduleTrigger is the trigger payload ($trigger) of schedule id's
// execution for slot t.
func scheduleTrigger(id, name string, t time.Time, late bool, input json.RawMessage) ([]byte, error) {
	return json.Marshal(map[string]any{"schedule_id": id, "schedule": name, "slot": t, "late": late, "input": rawOrEmpty(input)})
}

func rawOrEmpty(r json.RawMessage) json.RawMessage {
	if len(r) == 0 {
		return json.RawMessage("{}")
	}
	return r
}

// The API.

type scheduleView struct {
	ID         string `json:"id"`
	WorkflowID string `json:"workflow_id"`
	Name       string `json:"name"`
	scheduleSettings
	Paused bool `json:"paused"`
	// NextAt is the next slot; NextFireTimes the next few (before jitter).
	NextAt        *time.Time  `json:"next_at"`
	NextFireTimes []time.Time `json:"next_fire_times"`
	LastSlot      *time.Time  `json:"last_slot,omitempty"`
	CreatedAt     time.Time   `json:"created_at"`
	UpdatedAt     time.Time   `json:"updated_at"`
}

func viewSchedule(sc *store.Schedule) scheduleView {
	v := scheduleView{ID: sc.ID, WorkflowID: sc.WorkflowID, Name: sc.Name, Paused: sc.Paused, NextAt: sc.NextAt,
		LastSlot: sc.LastSlot, CreatedAt: sc.CreatedAt, UpdatedAt: sc.UpdatedAt, NextFireTimes: []time.Time{}}
	_ = json.Unmarshal(sc.Settings, &v.scheduleSettings)
	if p, err := parsePlan(v.scheduleSettings); err == nil {
		v.scheduleSettings = p.cfg
		if !sc.Paused {
			v.NextFireTimes = p.upcoming(sc.NextAt, nextTimesShown)
		}
	}
	return v
}

// workflowExists answers 404 for a workflow that does not exist (or was deleted).
func (s *Server) workflowExists(r *http.Request) (string, error) {
	id := r.PathValue("id")
	if _, err := s.store.GetWorkflow(r.Context(), id, 0); errors.Is(err, store.ErrNotFound) {
		return "", notFound("workflow %q does not exist", id)
	} else if err != nil {
		return "", err
	}
	return id, nil
}

func (s *Server) readSchedule(r *http.Request) (*scheduleInput, *plan, error) {
	body, err := readBody(r, 64<<10)
	if err != nil {
		return nil, nil, err
	}
	var in scheduleInput
	if err := decodeJSON(body, &in); err != nil {
		return nil, nil, err
	}
	if len(in.Name) > 128 {
		return nil, nil, badRequest("field name: longer than 128 bytes")
	}
	p, err := parsePlan(in.scheduleSettings)
	if err != nil {
		return nil, nil, err
	}
	return &in, p, nil
}

func (s *Server) createSchedule(w http.ResponseWriter, r *http.Request) error {
	wfID, err := s.workflowExists(r)
	if err != nil {
		return err
	}
	in, p, err := s.readSchedule(r)
	if err != nil {
		return err
	}
	now := s.cfg.Now()
	settings, _ := json.Marshal(p.cfg)
	sc := &store.Schedule{ID: store.NewID("sch_"), WorkflowID: wfID, Name: in.Name, Settings: settings,
		Paused: in.Paused, NextAt: p.first(now), CreatedAt: now, UpdatedAt: now}
	if err := s.store.CreateSchedule(r.Context(), sc); err != nil {
		return err
	}
	writeCreated(w, "/v1/workflows/"+url.PathEscape(wfID)+"/schedules/"+url.PathEscape(sc.ID), viewSchedule(sc))
	return nil
}

// schedule returns the path's schedule of the path's workflow.
func (s *Server) schedule(r *http.Request) (*store.Schedule, error) {
	wfID, id := r.PathValue("id"), r.PathValue("schedule")
	sc, err := s.store.GetSchedule(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) || err == nil && sc.WorkflowID != wfID {
		return nil, notFound("workflow %q has no schedule %q", wfID, id)
	}
	return sc, err
}

func (s *Server) listSchedules(w http.ResponseWriter, r *http.Request) error {
	wfID, err := s.workflowExists(r)
	if err != nil {
		return err
	}
	scs, err := s.store.ListSchedules(r.Context(), wfID)
	if err != nil {
		return err
	}
	writeList(w, scs, "", viewSchedule)
	return nil
}

// answerSchedule loads the path's schedule, applies change to it (nil:
// none) and answers with it: the handlers of one schedule end alike.
func (s *Server) answerSchedule(w http.ResponseWriter, r *http.Request, change func(sc *store.Schedule) error) error {
	sc, err := s.schedule(r)
	if err != nil {
		return err
	}
	if change != nil {
		if err := change(sc); err != nil {
			return err
		}
	}
	writeJSON(w, http.StatusOK, viewSchedule(sc))
	return nil
}

func (s *Server) getSchedule(w http.ResponseWriter, r *http.Request) error {
	return s.answerSchedule(w, r, nil)
}

// updateSchedule replaces a schedule's settings; its next slot is the
// first from now (slots of the old settings are not fired).
func (s *Server) updateSchedule(w http.ResponseWriter, r *http.Request) error {
	return s.answerSchedule(w, r, func(sc *store.Schedule) error {
		in, p, err := s.readSchedule(r)
		if err != nil {
			return err
		}
		now := s.cfg.Now()
		sc.Name, sc.Paused, sc.UpdatedAt, sc.NextAt = in.Name, in.Paused, now, p.first(now)
		sc.Settings, _ = json.Marshal(p.cfg)
		return s.store.UpdateSchedule(r.Context(), sc)
	})
}

func (s *Server) deleteSchedule(w http.ResponseWriter, r *http.Request) error {
	sc, err := s.schedule(r)
	if err != nil {
		return err
	}
	if err := s.store.DeleteSchedule(r.Context(), sc.ID); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// pauseSchedule stops a schedule's slots; resumeSchedule starts them again
// from the first slot after now (slots while paused are not fired, by any
// policy: pausing is a choice, not an outage).
func (s *Server) pauseSchedule(w http.ResponseWriter, r *http.Request) error {
	return s.setPaused(w, r, true)
}

func (s *Server) resumeSchedule(w http.ResponseWriter, r *http.Request) error {
	return s.setPaused(w, r, false)
}

func (s *Server) setPaused(w http.ResponseWriter, r *http.Request, paused bool) error {
	return s.answerSchedule(w, r, func(sc *store.Schedule) error {
		if sc.Paused == paused {
			return nil
		}
		var cfg scheduleSettings
		if err := json.Unmarshal(sc.Settings, &cfg); err != nil {
			return err
		}
		p, err := parsePlan(cfg)
		if err != nil {
			return err
		}
		now := s.cfg.Now()
		sc.Paused, sc.UpdatedAt = paused, now
		if !paused {
			sc.NextAt = p.first(now)
		}
		return s.store.UpdateSchedule(r.Context(), sc)
	})
}
