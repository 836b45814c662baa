package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/rune-org/rune/coord"
	"github.com/rune-org/rune/expr"
	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/node"
	"github.com/rune-org/rune/workflow"
)

// The digest node (issue 36): the executions reaching it with the same key
// while its window is open become one. The first opens the digest in
// coord.Digests and its branch waits as a wait's does (a timer due when the
// window closes); the next ones join it, adding their value, and end at
// once. When the timer fires the opener takes every value (Digests.Take)
// and goes on with them as its output.

// DigestType is the node type.
const DigestType = "digest"

// Limits of the digest node.
const (
	// MaxDigestKey bounds a digest's key, in bytes.
	MaxDigestKey = 500
	// MaxDigestValue bounds one member's value, JSON bytes: it is kept in
	// the coordination store until its digest is taken.
	MaxDigestValue = 16 << 10
)

// DigestedInto is the output key of an execution that joined a digest: the
// id of the execution that opened it.
const DigestedInto = "digested_into"

// isDigest reports the digest node type.
func isDigest(typ string) bool { return typ == DigestType }

var timeOfDay = regexp.MustCompile(`^([01][0-9]|2[0-3]):([0-5][0-9])$`)

type digestType struct{}

func (digestType) Check(c *workflow.NodeCheck) {
	p := node.CheckParams(c, "key", "window", "until", "timezone", "value")
	if key, ok := p.String("key", true); ok && node.IsTemplate(key) {
		p.Template("parameters.key", key)
	}
	_, hasWindow := p.Values["window"]
	_, hasUntil := p.Values["until"]
	switch {
	case hasWindow && hasUntil:
		c.Report("parameters", "set either window or until, not both")
	case !hasWindow && !hasUntil:
		c.Report("parameters.window", "required (or until): how long the digest collects, e.g. \"1h\"")
	case hasWindow:
		if s, ok := p.String("window", true); ok {
			checkWaitFor(c, "parameters.window", s, `"1h" or "PT30M"`)
		}
		if _, ok := p.Values["timezone"]; ok {
			c.Report("parameters.timezone", "goes with until, not with window")
		}
	default:
		if s, ok := p.String("until", true); ok {
			if node.IsTemplate(s) {
				p.Template("parameters.until", s)
			} else if !timeOfDay.MatchString(s) {
				c.Report("parameters.until", "%q is not a time of day such as \"08:00\" (HH:MM, 24-hour)", s)
			}
		}
		if tz, ok := p.String("timezone", false); ok {
			if node.IsTemplate(tz) {
				p.Template("parameters.timezone", tz)
			} else if _, err := loadZone(tz); err != nil {
				c.Report("parameters.timezone", "%v", err)
			}
		}
	}
	if v, ok := p.Values["value"]; ok {
		p.Template("parameters.value", v)
	}
}

// loadZone loads an IANA time zone; "" is UTC.
func loadZone(name string) (*time.Location, error) {
	if name == "" {
		return time.UTC, nil
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("%q is not an IANA time zone such as \"Europe/Paris\"", name)
	}
	return loc, nil
}

func (digestType) Compile(n *workflow.Node, c *expr.Compiler) (node.Runner, error) {
	r := &digestRunner{}
	var err error
	if r.key, err = c.Value(n.Parameters["key"]); err != nil {
		return nil, node.CompileError(n, "key", err)
	}
	if s, ok := n.Parameters["window"].(string); ok {
		if r.window, err = workflow.ParseDuration(s); err != nil {
			return nil, node.CompileError(n, "window", err)
		}
	} else {
		if r.until, err = c.Value(n.Parameters["until"]); err != nil {
			return nil, node.CompileError(n, "until", err)
		}
		tz, ok := n.Parameters["timezone"]
		if !ok {
			tz = "UTC"
		}
		if r.timezone, err = c.Value(tz); err != nil {
			return nil, node.CompileError(n, "timezone", err)
		}
	}
	v, ok := n.Parameters["value"]
	if !ok {
		v = "{{ $trigger }}"
	}
	if r.value, err = c.Value(v); err != nil {
		return nil, node.CompileError(n, "value", err)
	}
	return r, nil
}

type digestRunner struct {
	key, value      expr.Value
	window          time.Duration
	until, timezone expr.Value
}

// Run evaluates the key, the value and when a digest opened now closes.
// The output is internal: the engine joins the digest with it (digest).
func (r *digestRunner) Run(_ context.Context, in *node.Input) (node.Result, error) {
	v, err := r.key.Eval(in.Env)
	if err != nil {
		return node.Result{}, node.ExprError("key", err)
	}
	var key string
	switch k := v.(type) {
	case string:
		key = k
	case float64:
		key = strconv.FormatFloat(k, 'f', -1, 64)
	case bool:
		key = strconv.FormatBool(k)
	default:
		return node.Result{}, node.TypeError("key", "want a string or a number", v)
	}
	switch {
	case key == "":
		return node.Result{}, node.InvalidParam("key", "evaluated to an empty key")
	case len(key) > MaxDigestKey:
		return node.Result{}, node.InvalidParam("key", "is %d bytes; a digest key takes at most %d", len(key), MaxDigestKey)
	}
	val, err := r.value.Eval(in.Env)
	if err != nil {
		return node.Result{}, node.ExprError("value", err)
	}
	enc, err := json.Marshal(val)
	if err != nil {
		return node.Result{}, node.InvalidParam("value", "not a JSON value: %v", err)
	}
	if len(enc) > MaxDigestValue {
		return node.Result{}, node.InvalidParam("value", "is %d bytes of JSON; a digest keeps at most %d per execution", len(enc), MaxDigestValue)
	}
	closes, err := r.closes(in)
	if err != nil {
		return node.Result{}, err
	}
	return node.Result{Output: map[string]any{"key": key, "value": val,
		"closes_at": closes.UTC().Format(time.RFC3339Nano)}}, nil
}

// closes is when a digest opened at in.Now closes: after the window, or at
// the next until in the time zone (DST included: time.Date normalises a
// time of day a change skips).
func (r *digestRunner) closes(in *node.Input) (time.Time, error) {
	if r.until == nil {
		return in.Now.Add(r.window), nil
	}
	v, err := r.until.Eval(in.Env)
	if err != nil {
		return time.Time{}, node.ExprError("until", err)
	}
	s, _ := v.(string)
	m := timeOfDay.FindStringSubmatch(s)
	if m == nil {
		return time.Time{}, node.InvalidParam("until", "want a time of day such as \"08:00\", got %v", v)
	}
	zv, err := r.timezone.Eval(in.Env)
	if err != nil {
		return time.Time{}, node.ExprError("timezone", err)
	}
	zs, ok := zv.(string)
	if !ok && zv != nil {
		return time.Time{}, node.TypeError("timezone", "want an IANA time zone name", zv)
	}
	loc, err := loadZone(zs)
	if err != nil {
		return time.Time{}, node.InvalidParam("timezone", "%v", err)
	}
	return NextTimeOfDay(in.Now, m[1], m[2], loc), nil
}

// NextTimeOfDay is the first time after now whose wall clock in loc reads
// hh:mm.
func NextTimeOfDay(now time.Time, hh, mm string, loc *time.Location) time.Time {
	h, _ := strconv.Atoi(hh)
	mi, _ := strconv.Atoi(mm)
	l := now.In(loc)
	t := time.Date(l.Year(), l.Month(), l.Day(), h, mi, 0, 0, loc)
	for day := 1; !t.After(now); day++ {
		t = time.Date(l.Year(), l.Month(), l.Day()+day, h, mi, 0, 0, loc)
	}
	return t
}

// digestKey is the coord.Digests key of a node's digest key: the digests of
// different workflows and nodes never mix.
func (s *step) digestKey(key string) string {
	h := sha256.New()
	h.Write([]byte(s.m.WorkflowID))
	h.Write([]byte{0})
	h.Write([]byte(s.node.ID))
	var b [sha256.Size]byte
	return hex.EncodeToString(h.Sum(b[:0])[:12]) + ":" + key
}

// digestOf reads what the digest runner gave.
func digestOf(out any) (key string, value any, closes time.Time, ok bool) {
	m, _ := out.(map[string]any)
	key, _ = m["key"].(string)
	s, _ := m["closes_at"].(string)
	t, err := time.Parse(time.RFC3339Nano, s)
	return key, m["value"], t, key != "" && err == nil
}

// digest joins or opens the digest of rec's key. A member that joined ends
// its branch with the opener's execution id as its output; the opener parks
// until the digest closes (like suspend, it does not Finish the message).
// A redelivery joins again, which Digests answers as the first time.
func (s *step) digest(ctx context.Context, rec *record) error {
	key, value, closes, ok := digestOf(rec.Output)
	if !ok {
		return fmt.Errorf("engine: node %q: digest output without key, value or closes_at", s.node.ID)
	}
	enc, err := json.Marshal(value)
	if err != nil {
		return fmt.Errorf("engine: node %q: digest value: %w", s.node.ID, err)
	}
	now := s.e.cfg.Now()
	if s.e.cfg.Timers == nil || s.e.cfg.Digests == nil {
		return s.settle(ctx, &record{StartedAt: now, FinishedAt: now,
			Err: &message.Error{Code: "UNSUPPORTED_NODE", Message: fmt.Sprintf("node %q is a digest, but this runtime has no digest store", s.node.ID)}}, unverified{})
	}
	d, err := s.e.cfg.Digests.Join(ctx, s.digestKey(key),
		coord.DigestMember{ID: s.m.MessageID, Execution: s.m.ExecutionID, Value: enc}, now, closes)
	if errors.Is(err, coord.ErrDigestFull) {
		return s.settle(ctx, &record{StartedAt: now, FinishedAt: s.e.cfg.Now(),
			Err: &message.Error{Code: CodeDigestFull, Message: fmt.Sprintf("node %q: the digest of key %q holds %d values, the most it takes", s.node.ID, key, coord.MaxDigestItems),
				Details: map[string]any{"key": key}}}, unverified{})
	}
	if err != nil {
		return fmt.Errorf("engine: join the digest of message %s: %w", s.m.MessageID, err)
	}
	if !d.Opened {
		// No edge followed: the branch ends here.
		return s.settle(ctx, &record{Output: map[string]any{DigestedInto: d.Execution}, Route: []string{},
			StartedAt: rec.StartedAt, FinishedAt: s.e.cfg.Now()}, unverified{})
	}
	if err := s.park(ctx, TimerID(s.m), d.Closes); err != nil {
		return err
	}
	st := s.status(message.StatusWaiting, s.e.cfg.Now())
	st.ResumeAt = &d.Closes
	st.Details = map[string]any{"digest": key}
	s.sink.Status(ctx, st)
	return nil
}

// CodeDigestFull is the error code of a digest node whose digest holds
// coord.MaxDigestItems values already.
const CodeDigestFull = "DIGEST_FULL"

// resumeDigest ends the opener's wait: it takes the digest's values, its
// own first, and succeeds with them. A repeated resume (a crash before its
// Finish) takes the same values.
func (s *step) resumeDigest(ctx context.Context) error {
	now := s.e.cfg.Now()
	rec, err := s.run(ctx, now)
	if err != nil {
		return err
	}
	if rec.Err != nil {
		return s.settle(ctx, rec, unverified{})
	}
	key, _, _, ok := digestOf(rec.Output)
	if !ok {
		return fmt.Errorf("engine: node %q: digest output without key, value or closes_at", s.node.ID)
	}
	if s.e.cfg.Digests == nil {
		return invalidf("message %s: node %q is a digest, but this runtime has no digest store", s.m.MessageID, s.node.ID)
	}
	dkey := s.digestKey(key)
	vals, err := s.e.cfg.Digests.Take(ctx, dkey, s.m.MessageID)
	if err != nil {
		return fmt.Errorf("engine: take the digest of message %s: %w", s.m.MessageID, err)
	}
	items := make([]any, len(vals))
	for i, v := range vals {
		if err := json.Unmarshal(v, &items[i]); err != nil {
			return fmt.Errorf("engine: digest of message %s: value %d is not JSON: %w", s.m.MessageID, i, err)
		}
	}
	rec = &record{Output: map[string]any{"items": items, "count": len(items)}, StartedAt: now, FinishedAt: s.e.cfg.Now()}
	if err := s.settle(ctx, rec, unverified{}); err != nil {
		return err
	}
	// Finished: a later claim of the timer replays the record.
	if err := s.e.cfg.Digests.Forget(ctx, dkey, s.m.MessageID); err != nil {
		s.e.log.WarnContext(ctx, "engine: forget a taken digest", "message_id", s.m.MessageID, "err", err)
	}
	return nil
}

// dropDigest closes the digest of an opener whose execution was halted or
// cancelled while it waited (a halt wakes its timer): the next execution
// of the key opens a new digest rather than join one no one will send.
// The values that joined it are dropped with it. Failing to close it only
// leaves it open until its window ends: it is logged.
func (s *step) dropDigest(ctx context.Context) {
	if s.e.cfg.Digests == nil {
		return
	}
	rec, err := s.run(ctx, s.e.cfg.Now())
	if err != nil || rec.Err != nil {
		return
	}
	if key, _, _, ok := digestOf(rec.Output); ok {
		if err := s.e.cfg.Digests.Forget(ctx, s.digestKey(key), s.m.MessageID); err != nil {
			s.e.log.WarnContext(ctx, "engine: close the digest of a halted execution", "message_id", s.m.MessageID, "err", err)
		}
	}
}
