package engine

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/rune-org/rune/expr"
	"github.com/rune-org/rune/node"
	"github.com/rune-org/rune/workflow"
)

// The wait node (RFC 006) and its notification spelling, delay. Both compute
// when the branch resumes; the engine does the waiting: it freezes the
// message in the durable timer store and releases the worker.

// ResumeAt is the output key both types set: the time the branch resumes,
// RFC 3339 with nanoseconds, UTC.
const ResumeAt = "resume_at"

var waitUnits = map[string]time.Duration{
	"seconds": time.Second, "minutes": time.Minute, "hours": time.Hour, "days": 24 * time.Hour,
}

// DefaultWaitAmount is a wait's amount when it sets neither amount nor
// until (RFC 006 §3): one unit, one second by default. A delay without
// delayMs or duration waits as long.
const DefaultWaitAmount = 1

// maxWait bounds a wait: a timer years away is almost surely a mistake.
const maxWait = 366 * 24 * time.Hour

type waitType struct{}

func (waitType) Check(c *workflow.NodeCheck) {
	p := node.CheckParams(c, "resume", "amount", "unit", "until")
	if r, ok := p.String("resume", false); ok && r != "time_interval" && r != "specific_time" {
		c.Report("parameters.resume", "unknown resume mode %q (known: time_interval, specific_time)", r)
	}
	_, hasAmount := p.Values["amount"]
	until, hasUntil := p.Values["until"]
	switch {
	case hasAmount && hasUntil:
		c.Report("parameters", "set either amount (with unit) or until, not both")
	case !hasUntil && p.Values["resume"] == "specific_time":
		c.Report("parameters.until", "required when resume is specific_time: the RFC 3339 time to resume at")
	}
	// Without until, amount defaults to 1 (RFC 006 §3): a wait of one unit.
	if hasAmount {
		checkAmount(c, p.Values["amount"])
	}
	if !hasUntil {
		if u, ok := p.String("unit", false); ok {
			if _, known := waitUnits[u]; !known {
				c.Report("parameters.unit", "unknown unit %q (known: seconds, minutes, hours, days)", u)
			}
		}
	} else if _, ok := p.Values["unit"]; ok {
		c.Report("parameters.unit", "unit goes with amount, not with until")
	}
	if hasUntil {
		s, ok := until.(string)
		switch {
		case !ok || s == "":
			c.Report("parameters.until", "must be an RFC 3339 time or a {{ }} expression")
		case node.IsTemplate(s):
			p.Template("parameters.until", s)
		default:
			if _, err := time.Parse(time.RFC3339Nano, s); err != nil {
				c.Report("parameters.until", "%q is not an RFC 3339 time such as 2026-12-24T18:00:00Z", s)
			}
		}
	}
}

// checkAmount accepts a non-negative number or an expression.
func checkAmount(c *workflow.NodeCheck, v any) {
	switch a := v.(type) {
	case float64:
		if a < 0 || math.IsNaN(a) {
			c.Report("parameters.amount", "must not be negative, got %v", a)
		}
	case string:
		if !node.IsTemplate(a) {
			c.Report("parameters.amount", "must be a number or a {{ }} expression, got %q", a)
			return
		}
		if err := expr.Check(a); err != nil {
			c.Report("parameters.amount", "%v", err)
		}
	default:
		c.Report("parameters.amount", "must be a number, not %s", expr.TypeName(v))
	}
}

func (waitType) Compile(n *workflow.Node, c *expr.Compiler) (node.Runner, error) {
	r := &waitRunner{unit: time.Second}
	if u, ok := n.Parameters["unit"].(string); ok {
		r.unit = waitUnits[u]
	}
	var err error
	a, hasAmount := n.Parameters["amount"]
	until, hasUntil := n.Parameters["until"]
	switch {
	case hasUntil:
		if r.until, err = c.Value(until); err != nil {
			return nil, node.CompileError(n, "until", err)
		}
	default:
		if !hasAmount {
			a = float64(DefaultWaitAmount)
		}
		if r.amount, err = c.Value(a); err != nil {
			return nil, node.CompileError(n, "amount", err)
		}
	}
	return r, nil
}

type waitRunner struct {
	amount, until expr.Value
	unit          time.Duration
}

func (r *waitRunner) Run(_ context.Context, in *node.Input) (node.Result, error) {
	if r.until != nil {
		v, err := r.until.Eval(in.Env)
		if err != nil {
			return node.Result{}, node.ExprError("until", err)
		}
		s, ok := v.(string)
		if !ok {
			return node.Result{}, node.InvalidParam("until", "want an RFC 3339 time, got %s", expr.TypeName(v))
		}
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return node.Result{}, node.InvalidParam("until", "%q is not an RFC 3339 time", s)
		}
		return resumeAt(in.Now, t)
	}
	v, err := r.amount.Eval(in.Env)
	if err != nil {
		return node.Result{}, node.ExprError("amount", err)
	}
	f, ok := expr.Number(v)
	if !ok || f < 0 || math.IsNaN(f) {
		return node.Result{}, node.InvalidParam("amount", "want a non-negative number, got %v", v)
	}
	if f*float64(r.unit) > float64(maxWait) {
		return node.Result{}, node.InvalidParam("amount", "%v %s is longer than the longest wait, %s", f, unitName(r.unit), maxWait)
	}
	return resumeAt(in.Now, in.Now.Add(time.Duration(f*float64(r.unit))))
}

func unitName(d time.Duration) string {
	for name, u := range waitUnits {
		if u == d {
			return name
		}
	}
	return d.String()
}

// resumeAt is the output of a wait that resumes at t; a time in the past
// resumes at once.
func resumeAt(now, t time.Time) (node.Result, error) {
	if t.Sub(now) > maxWait {
		return node.Result{}, node.InvalidParam("until", "%s is more than %s away", t.Format(time.RFC3339), maxWait)
	}
	return node.Result{Output: map[string]any{ResumeAt: t.UTC().Format(time.RFC3339Nano)}}, nil
}

// delayType is the notification spelling of wait: delayMs or duration.
type delayType struct{}

func (delayType) Check(c *workflow.NodeCheck) {
	p := node.CheckParams(c, "delayMs", "duration")
	ms, hasMS := p.Values["delayMs"]
	dur, hasDur := p.Values["duration"]
	switch {
	case hasMS && hasDur:
		c.Report("parameters", "set either delayMs or duration, not both")
	case !hasMS && !hasDur:
		// The wait's default: DefaultWaitAmount seconds.
	case hasMS:
		f, ok := ms.(float64)
		if !ok || f < 0 || f != math.Trunc(f) {
			c.Report("parameters.delayMs", "must be a whole number of milliseconds, at least 0, got %v", ms)
		} else if time.Duration(f)*time.Millisecond > maxWait {
			c.Report("parameters.delayMs", "%v ms is longer than the longest wait, %s", f, maxWait)
		}
	default:
		s, ok := dur.(string)
		if !ok {
			c.Report("parameters.duration", "must be a string such as \"90s\" or \"PT1H30M\", not %s", expr.TypeName(dur))
			return
		}
		d, err := workflow.ParseDuration(s)
		if err != nil {
			c.Report("parameters.duration", "%v", err)
		} else if d > maxWait {
			c.Report("parameters.duration", "%s is longer than the longest wait, %s", d, maxWait)
		}
	}
}

// checkWaitFor reports at field a DSL duration s that a node waits for:
// more than zero and at most the longest wait; example shows good ones.
func checkWaitFor(c *workflow.NodeCheck, field, s, example string) {
	d, err := workflow.ParseDuration(s)
	switch {
	case err != nil:
		c.Report(field, "%v", err)
	case d <= 0:
		c.Report(field, "must be longer than 0, e.g. %s", example)
	case d > maxWait:
		c.Report(field, "%s is longer than the longest wait, %s", d, maxWait)
	}
}

func (delayType) Compile(n *workflow.Node, _ *expr.Compiler) (node.Runner, error) {
	if ms, ok := n.Parameters["delayMs"].(float64); ok {
		return delayRunner(time.Duration(ms) * time.Millisecond), nil
	}
	s, ok := n.Parameters["duration"].(string)
	if !ok {
		return delayRunner(DefaultWaitAmount * time.Second), nil
	}
	d, err := workflow.ParseDuration(s)
	if err != nil {
		return nil, node.CompileError(n, "duration", err)
	}
	return delayRunner(d), nil
}

type delayRunner time.Duration

func (d delayRunner) Run(_ context.Context, in *node.Input) (node.Result, error) {
	return resumeAt(in.Now, in.Now.Add(time.Duration(d)))
}

// errNotWait is returned by ResumeTime for an output without resume_at.
var errNotWait = fmt.Errorf("output has no %q", ResumeAt)

// ResumeTime reads the resume time from a wait or delay node's output.
func ResumeTime(output any) (time.Time, error) {
	m, _ := output.(map[string]any)
	s, ok := m[ResumeAt].(string)
	if !ok {
		return time.Time{}, errNotWait
	}
	return time.Parse(time.RFC3339Nano, s)
}
