package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/rune-org/rune/coord"
	"github.com/rune-org/rune/expr"
	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/node"
	"github.com/rune-org/rune/workflow"
)

// The wait_for_event node (issue 34): the branch waits for an event sent
// with POST /v1/events, or for its timeout. It is a wait whose timer is due
// at the timeout: the engine registers the wait in coord.Events under the
// timer's id, and delivering an event (DeliverEvent) wakes the timers of the
// waits it matched, so the branch resumes through the scheduler like any
// wait's. On resume, Events.Take says whether it got an event (the node's
// output) or timed out (the node fails with EVENT_TIMEOUT).

// EventWaitType is the node type.
const EventWaitType = "wait_for_event"

// CodeEventTimeout is the error code of a wait_for_event whose timeout
// passed with no event.
const CodeEventTimeout = "EVENT_TIMEOUT"

// Limits of events.
const (
	// MaxEventName and MaxEventKey bound an event's name and key, in bytes.
	MaxEventName = 200
	MaxEventKey  = 500
	// MaxEventData bounds an event's data, JSON bytes: it is kept in the
	// coordination store once per matched wait.
	MaxEventData = 64 << 10
	// DefaultEventRetention is how long an event is kept for waits
	// registered after it arrived (Config.EventRetention).
	DefaultEventRetention = 24 * time.Hour
	// MaxApprovalTitle bounds an approval's title.
	MaxApprovalTitle = 200
)

// isEventWait reports the wait_for_event node type.
func isEventWait(typ string) bool { return typ == EventWaitType }

type eventWaitType struct{}

func (eventWaitType) Check(c *workflow.NodeCheck) {
	p := node.CheckParams(c, "event", "key", "timeout", "approval")
	if name, ok := p.String("event", true); ok {
		switch {
		case node.IsTemplate(name):
			c.Report("parameters.event", "must be a plain event name such as \"order.paid\", not a template (the key is the template)")
		case len(name) > MaxEventName:
			c.Report("parameters.event", "is %d bytes; an event name takes at most %d", len(name), MaxEventName)
		}
	}
	if key, ok := p.String("key", true); ok && node.IsTemplate(key) {
		p.Template("parameters.key", key)
	}
	if s, ok := p.String("timeout", true); ok {
		checkWaitFor(c, "parameters.timeout", s, `"24h" or "P3D"`)
	}
	if v, ok := p.Values["approval"]; ok {
		a, isObj := v.(map[string]any)
		if !isObj {
			c.Report("parameters.approval", "must be an object such as {\"title\": \"Send the bulk mail?\"}, not %s", expr.TypeName(v))
			return
		}
		for k := range a {
			if k != "title" {
				c.Report("parameters.approval."+k, "unknown field (known: title)")
			}
		}
		t, isStr := a["title"].(string)
		switch {
		case !isStr || t == "":
			c.Report("parameters.approval.title", "required: the text the console shows approvers")
		case len(t) > MaxApprovalTitle:
			c.Report("parameters.approval.title", "is %d bytes; a title takes at most %d", len(t), MaxApprovalTitle)
		}
	}
}

func (eventWaitType) Compile(n *workflow.Node, c *expr.Compiler) (node.Runner, error) {
	r := &eventWaitRunner{}
	r.name, _ = n.Parameters["event"].(string)
	d, err := workflow.ParseDuration(fmt.Sprint(n.Parameters["timeout"]))
	if err != nil {
		return nil, node.CompileError(n, "timeout", err)
	}
	r.timeout = d
	if r.key, err = c.Value(n.Parameters["key"]); err != nil {
		return nil, node.CompileError(n, "key", err)
	}
	if a, ok := n.Parameters["approval"].(map[string]any); ok {
		r.approval, _ = a["title"].(string)
	}
	return r, nil
}

type eventWaitRunner struct {
	name     string
	key      expr.Value
	timeout  time.Duration
	approval string
}

// Run evaluates the key. Its output is what the waiting status reports;
// the node's output proper comes on resume (an event, or EVENT_TIMEOUT).
func (r *eventWaitRunner) Run(_ context.Context, in *node.Input) (node.Result, error) {
	key, err := r.keyOf(in.Env)
	if err != nil {
		return node.Result{}, err
	}
	out := map[string]any{"event": r.name, "key": key, ResumeAt: in.Now.Add(r.timeout).UTC().Format(time.RFC3339Nano)}
	if r.approval != "" {
		out["approval"] = map[string]any{"title": r.approval}
	}
	return node.Result{Output: out}, nil
}

func (r *eventWaitRunner) keyOf(env map[string]any) (string, error) {
	v, err := r.key.Eval(env)
	if err != nil {
		return "", node.ExprError("key", err)
	}
	var key string
	switch k := v.(type) {
	case string:
		key = k
	case float64:
		key = strconv.FormatFloat(k, 'f', -1, 64)
	case int, int64, bool:
		key = fmt.Sprint(k)
	default:
		return "", node.TypeError("key", "want a string or a number", v)
	}
	switch {
	case key == "":
		return "", node.InvalidParam("key", "evaluated to an empty key")
	case len(key) > MaxEventKey:
		return "", node.InvalidParam("key", "is %d bytes; an event key takes at most %d", len(key), MaxEventKey)
	}
	return key, nil
}

// eventWait is the coord.EventWait of this step's message, from the output
// its runner gave.
func (s *step) eventWait(out any) (coord.EventWait, bool) {
	m, _ := out.(map[string]any)
	name, _ := m["event"].(string)
	key, _ := m["key"].(string)
	due, err := ResumeTime(out)
	if name == "" || key == "" || err != nil {
		return coord.EventWait{}, false
	}
	return coord.EventWait{Timer: TimerID(s.m), Name: name, Key: key, Since: s.m.StartedAt, Due: due}, true
}

// suspendForEvent parks the branch as a wait does (suspend), due at the
// timeout, and registers its wait for the event; an event retained from
// before wakes it at once. Like suspend it does not Finish the message.
func (s *step) suspendForEvent(ctx context.Context, rec *record) error {
	now := s.e.cfg.Now()
	w, ok := s.eventWait(rec.Output)
	if !ok {
		return fmt.Errorf("engine: node %q: wait_for_event output without event, key or %s", s.node.ID, ResumeAt)
	}
	if s.e.cfg.Timers == nil || s.e.cfg.Events == nil {
		return s.settle(ctx, &record{StartedAt: now, FinishedAt: now,
			Err: &message.Error{Code: "UNSUPPORTED_NODE", Message: fmt.Sprintf("node %q waits for an event, but this runtime has no event store", s.node.ID)}}, unverified{})
	}
	frozen, err := s.e.Freeze(ctx, s.m)
	if err != nil {
		return fmt.Errorf("engine: freeze message %s: %w", s.m.MessageID, err)
	}
	// The timer first: a delivery that matches the wait wakes it.
	if err := s.e.cfg.Timers.Schedule(ctx, w.Timer, w.Due, frozen); err != nil {
		return fmt.Errorf("engine: schedule timer of message %s: %w", s.m.MessageID, err)
	}
	wake, err := s.e.cfg.Coord.Park(ctx, s.m.ExecutionID, w.Timer, w.Due)
	if err != nil {
		return fmt.Errorf("engine: park message %s: %w", s.m.MessageID, err)
	}
	ev, err := s.e.cfg.Events.Register(ctx, now, w)
	if err != nil {
		return fmt.Errorf("engine: register the wait of message %s for event %q: %w", s.m.MessageID, w.Name, err)
	}
	if wake || ev != nil {
		if err := s.e.cfg.Timers.Wake(ctx, s.e.cfg.Now(), w.Timer); err != nil {
			return fmt.Errorf("engine: wake timer of message %s: %w", s.m.MessageID, err)
		}
	}
	st := s.status(message.StatusWaiting, s.e.cfg.Now())
	st.ResumeAt = &w.Due
	out := rec.Output.(map[string]any)
	st.Details = map[string]any{"event": w.Name, "key": w.Key}
	if a, ok := out["approval"]; ok {
		st.Details["approval"] = a
	}
	s.sink.Status(ctx, st)
	return nil
}

// resumeEvent ends a wait_for_event whose timer fired: with the event it
// was matched to, or with EVENT_TIMEOUT, which the node's error strategy
// handles.
func (s *step) resumeEvent(ctx context.Context) error {
	now := s.e.cfg.Now()
	rec, err := s.run(ctx, now)
	if err != nil {
		return err
	}
	if rec.Err != nil {
		return s.settle(ctx, rec, unverified{})
	}
	w, ok := s.eventWait(rec.Output)
	if !ok {
		return fmt.Errorf("engine: node %q: wait_for_event output without event, key or %s", s.node.ID, ResumeAt)
	}
	w.Due = s.resumedAt // the timer's own due time
	if s.e.cfg.Events == nil {
		return invalidf("message %s: node %q waits for an event, but this runtime has no event store", s.m.MessageID, s.node.ID)
	}
	ev, err := s.e.cfg.Events.Take(ctx, w)
	if err != nil {
		return fmt.Errorf("engine: take the event of message %s: %w", s.m.MessageID, err)
	}
	rec = &record{StartedAt: now, FinishedAt: s.e.cfg.Now()}
	if ev == nil {
		rec.Err = &message.Error{Code: CodeEventTimeout,
			Message: fmt.Sprintf("node %q: no event %q with key %q came within its timeout", s.node.ID, w.Name, w.Key),
			Details: map[string]any{"event": w.Name, "key": w.Key}}
	} else {
		var data any
		if len(ev.Data) > 0 {
			if err := json.Unmarshal(ev.Data, &data); err != nil {
				return fmt.Errorf("engine: event %s of %q: data is not JSON: %w", ev.ID, ev.Name, err)
			}
		}
		rec.Output = map[string]any{"event": ev.Name, "key": ev.Key, "data": data,
			"received_at": ev.At.UTC().Format(time.RFC3339Nano)}
	}
	if err := s.settle(ctx, rec, unverified{}); err != nil {
		return err
	}
	// Finished: a later claim of the timer replays the record.
	if err := s.e.cfg.Events.Forget(ctx, w); err != nil {
		s.e.log.WarnContext(ctx, "engine: forget a resumed event wait", "message_id", s.m.MessageID, "err", err)
	}
	return nil
}

// EventSend is an event to deliver (DeliverEvent).
type EventSend struct {
	// Name and Key are the pair waits registered for.
	Name, Key string
	// Data is the event's JSON value (nil: null).
	Data json.RawMessage
	// IdempotencyKey, when not empty, names the event so that sending it
	// again (a client's retry) matches no wait twice.
	IdempotencyKey string
}

// EventSent is what DeliverEvent did.
type EventSent struct {
	// ID is the event's id.
	ID string
	// Matched is how many waiting branches it resumes.
	Matched int
}

// ErrNoEvents is returned by DeliverEvent on a runtime without an event
// store.
var ErrNoEvents = errors.New("this runtime has no event store")

// DeliverEvent sends an event to the branches waiting for it: every wait
// registered for (Name, Key) is matched, and its timer woken, so the
// branch resumes now with the event as its node's output; the event is kept
// Config.EventRetention for waits registered later (a branch that had not
// reached its node yet). Delivering with an IdempotencyKey sent before
// matches nothing new and wakes the first delivery's waits again.
func (e *Engine) DeliverEvent(ctx context.Context, send EventSend) (EventSent, error) {
	if e.cfg.Events == nil || e.cfg.Timers == nil {
		return EventSent{}, ErrNoEvents
	}
	if err := CheckEventSend(send); err != nil {
		return EventSent{}, err
	}
	now := e.cfg.Now()
	id := NewExecutionID(now)
	if send.IdempotencyKey != "" {
		h := sha256.Sum256([]byte(send.IdempotencyKey))
		id = "ik-" + hex.EncodeToString(h[:16])
	}
	ev := coord.Event{ID: id, Name: send.Name, Key: send.Key, Data: send.Data, At: now, Keep: now.Add(e.cfg.EventRetention)}
	matched, err := e.cfg.Events.Deliver(ctx, ev)
	if err != nil {
		return EventSent{}, fmt.Errorf("engine: deliver event %q: %w", send.Name, err)
	}
	if len(matched) > 0 {
		if err := e.cfg.Timers.Wake(ctx, now, matched...); err != nil {
			return EventSent{}, fmt.Errorf("engine: deliver event %q: wake the %d waits it matched: %w", send.Name, len(matched), err)
		}
	}
	return EventSent{ID: id, Matched: len(matched)}, nil
}

// ErrInvalidEvent marks an event DeliverEvent refuses.
var ErrInvalidEvent = errors.New("invalid event")

// CheckEventSend checks an event's name, key and data against the limits.
func CheckEventSend(send EventSend) error {
	switch {
	case send.Name == "":
		return fmt.Errorf("%w: event: required", ErrInvalidEvent)
	case len(send.Name) > MaxEventName:
		return fmt.Errorf("%w: event: %d bytes, at most %d", ErrInvalidEvent, len(send.Name), MaxEventName)
	case send.Key == "":
		return fmt.Errorf("%w: key: required", ErrInvalidEvent)
	case len(send.Key) > MaxEventKey:
		return fmt.Errorf("%w: key: %d bytes, at most %d", ErrInvalidEvent, len(send.Key), MaxEventKey)
	case len(send.Data) > MaxEventData:
		return fmt.Errorf("%w: data: %d bytes of JSON, at most %d", ErrInvalidEvent, len(send.Data), MaxEventData)
	case len(send.Data) > 0 && !json.Valid(send.Data):
		return fmt.Errorf("%w: data: not JSON", ErrInvalidEvent)
	}
	return nil
}
