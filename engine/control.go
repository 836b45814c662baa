package engine

import (
	"context"
	"math"

	"github.com/rune-org/rune/expr"
	"github.com/rune-org/rune/node"
	"github.com/rune-org/rune/workflow"
)

// The control nodes: split, aggregator and merge (RFC 004, RFC 005) here,
// wait and delay (RFC 006) in control_wait.go. They do no work of their
// own but steer branches, so the engine owns them: their parameters, and
// the fan-out, barriers and timers they stand for (fanout.go, step.go).
// The registry of Config.Registry holds the nodes that do work.

// controlTypes are the node types the engine runs itself.
func controlTypes() map[string]node.Type {
	return map[string]node.Type{
		"split": splitType{}, "aggregator": aggregatorType{}, "merge": mergeType{},
		"wait": waitType{}, "delay": delayType{},
		// issue 34: waiting for an event (control_event.go)
		EventWaitType: eventWaitType{},
		// issue 34: sub-workflows (control_workflow.go)
		WorkflowType: workflowType{},
		// issue 36: digests (control_digest.go)
		DigestType: digestType{},
	}
}

// WithControls returns the registry the engine checks and runs definitions
// with (what a document of the node types must cover): reg's types and the control types,
// which win over a type of reg of the same name.
func WithControls(reg *node.Registry) *node.Registry {
	r := node.NewRegistry()
	for _, name := range reg.Names() {
		t, _ := reg.Lookup(name)
		r.Register(name, t)
	}
	for name, t := range controlTypes() {
		r.Register(name, t)
	}
	return r
}

// isControl reports the control node types.
func isControl(typ string) bool {
	switch typ {
	case "split", "aggregator", "merge", "wait", "delay":
		return true
	case EventWaitType: // issue 34
		return true
	case WorkflowType: // issue 34
		return true
	case DigestType: // issue 36
		return true
	}
	return false
}

// isBarrier reports node types that join branches (fan-in).
func isBarrier(typ string) bool { return typ == "aggregator" || typ == "merge" }

// isWait reports node types whose success suspends the branch until the
// time in their output (RFC 006).
func isWait(typ string) bool { return typ == "wait" || typ == "delay" }

// DefaultBarrierTimeout is the aggregator's and the merge's default timeout,
// in seconds.
const DefaultBarrierTimeout = 300

// MaxSplitItems bounds one split: every item is a message.
const MaxSplitItems = 1_000_000

type splitType struct{}

func (splitType) Check(c *workflow.NodeCheck) {
	p := node.CheckParams(c, "input_array")
	v, ok := p.Values["input_array"]
	switch {
	case !ok || v == nil:
		c.Report("parameters.input_array", "required: an array, or an expression yielding one, e.g. \"{{ $fetch.body.users }}\"")
	case isArray(v):
	default:
		if s, ok := v.(string); ok && node.IsTemplate(s) {
			p.Template("parameters.input_array", s)
		} else {
			c.Report("parameters.input_array", "must be an array or a {{ }} expression, not %s", expr.TypeName(v))
		}
	}
}

func isArray(v any) bool { _, ok := v.([]any); return ok }

// splitResultBytes bounds the array a split evaluates: larger than other
// results, since splitting big arrays is the point (items travel one per
// message, and the array itself by reference).
const splitResultBytes = 256 << 20

func (splitType) Compile(n *workflow.Node, c *expr.Compiler) (node.Runner, error) {
	lim := c.Limits()
	lim.MaxResultBytes = max(lim.MaxResultBytes, splitResultBytes)
	v, err := expr.NewCompiler(lim).Value(n.Parameters["input_array"])
	if err != nil {
		return nil, node.CompileError(n, "input_array", err)
	}
	return splitRunner{input: v}, nil
}

type splitRunner struct{ input expr.Value }

func (r splitRunner) Run(_ context.Context, in *node.Input) (node.Result, error) {
	v, err := r.input.Eval(in.Env)
	if err != nil {
		return node.Result{}, node.ExprError("input_array", err)
	}
	items, ok := v.([]any)
	if !ok {
		return node.Result{}, node.TypeError("input_array", "want an array", v)
	}
	if len(items) > MaxSplitItems {
		return node.Result{}, node.InvalidParam("input_array", "%d items; a split takes at most %d", len(items), MaxSplitItems)
	}
	return node.Result{Output: map[string]any{"total_items": len(items)}, Items: items}, nil
}

// checkTimeout checks a barrier's timeout in seconds.
func checkTimeout(c *workflow.NodeCheck, p node.Params) {
	v, ok := p.Values["timeout"]
	if !ok {
		return
	}
	f, isNum := v.(float64)
	if !isNum || f <= 0 || math.IsInf(f, 0) || f > 366*24*3600 {
		c.Report("parameters.timeout", "must be a number of seconds greater than 0, got %v", v)
	}
}

// BarrierTimeout is a barrier node's timeout in seconds (its "timeout"
// parameter, default 300).
func barrierTimeout(n *workflow.Node) float64 {
	if f, ok := n.Parameters["timeout"].(float64); ok && f > 0 {
		return f
	}
	return DefaultBarrierTimeout
}

type aggregatorType struct{}

func (aggregatorType) Check(c *workflow.NodeCheck) {
	p := node.CheckParams(c, "timeout", "value")
	checkTimeout(c, p)
	if v, ok := p.Values["value"]; ok {
		p.Template("parameters.value", v)
	}
}

// Compile returns a runner that evaluates "value" (what each item
// contributes), or nil when the node has none: each item then contributes
// the output of the node that fed the aggregator.
func (aggregatorType) Compile(n *workflow.Node, c *expr.Compiler) (node.Runner, error) {
	v, ok := n.Parameters["value"]
	if !ok {
		return nil, nil
	}
	val, err := c.Value(v)
	if err != nil {
		return nil, node.CompileError(n, "value", err)
	}
	return valueRunner{value: val}, nil
}

type valueRunner struct{ value expr.Value }

func (r valueRunner) Run(_ context.Context, in *node.Input) (node.Result, error) {
	v, err := r.value.Eval(in.Env)
	if err != nil {
		return node.Result{}, node.ExprError("value", err)
	}
	return node.Result{Output: v}, nil
}

// Merge wait modes (RFC 005 §3).
const (
	WaitForAll = "wait_for_all"
	WaitForAny = "wait_for_any"
)

type mergeType struct{}

func (mergeType) Check(c *workflow.NodeCheck) {
	p := node.CheckParams(c, "wait_mode", "mode", "timeout")
	if m, ok := p.String("wait_mode", false); ok && m != WaitForAll && m != WaitForAny {
		c.Report("parameters.wait_mode", "unknown wait mode %q (known: wait_for_all, wait_for_any)", m)
	}
	if m, ok := p.String("mode", false); ok && m != "append" {
		c.Report("parameters.mode", "unknown mode %q (known: append)", m)
	}
	checkTimeout(c, p)
}

func (mergeType) Compile(*workflow.Node, *expr.Compiler) (node.Runner, error) { return nil, nil }

// MergeWaitsForAny reports whether a merge node fires on its first parent.
func mergeWaitsForAny(n *workflow.Node) bool { return n.Parameters["wait_mode"] == WaitForAny }

// The control runners do no I/O (node.Pure): the engine runs them without a
// deadline of their own.
func (splitRunner) Pure() {}
func (valueRunner) Pure() {}
func (*waitRunner) Pure() {}
func (delayRunner) Pure() {}
