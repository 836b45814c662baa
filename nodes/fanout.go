package nodes

import (
	"context"
	"math"

	"github.com/rune-org/rune/expr"
	"github.com/rune-org/rune/node"
	"github.com/rune-org/rune/workflow"
)

// split, aggregator and merge (RFC 004, RFC 005). Their parameters are
// checked and compiled here; the engine does the fan-out and the barriers.

// DefaultBarrierTimeout is the aggregator's and the merge's default timeout,
// in seconds.
const DefaultBarrierTimeout = 300

// MaxSplitItems bounds one split: every item is a message.
const MaxSplitItems = 1_000_000

type splitType struct{}

func (splitType) Check(c *workflow.NodeCheck) {
	p := newParamCheck(c, "input_array")
	v, ok := p.params["input_array"]
	switch {
	case !ok || v == nil:
		c.Report("parameters.input_array", "required: an array, or an expression yielding one, e.g. \"{{ $fetch.body.users }}\"")
	case isArray(v):
	default:
		if s, ok := v.(string); ok && isTemplate(s) {
			p.template("parameters.input_array", s)
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
		return nil, compileErr(n, "input_array", err)
	}
	return splitRunner{input: v}, nil
}

type splitRunner struct{ input expr.Value }

func (r splitRunner) Run(_ context.Context, in *node.Input) (node.Result, error) {
	v, err := r.input.Eval(in.Env)
	if err != nil {
		return node.Result{}, exprError("input_array", err)
	}
	items, ok := v.([]any)
	if !ok {
		return node.Result{}, &node.Error{Code: CodeExpressionType, Message: "parameters.input_array: want an array, got " + expr.TypeName(v),
			Details: map[string]any{"parameter": "parameters.input_array"}}
	}
	if len(items) > MaxSplitItems {
		return node.Result{}, invalidParam("input_array", "%d items; a split takes at most %d", len(items), MaxSplitItems)
	}
	return node.Result{Output: map[string]any{"total_items": len(items)}, Items: items}, nil
}

// checkTimeout checks a barrier's timeout in seconds.
func checkTimeout(c *workflow.NodeCheck, p paramCheck) {
	v, ok := p.params["timeout"]
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
func BarrierTimeout(n *workflow.Node) float64 {
	if f, ok := n.Parameters["timeout"].(float64); ok && f > 0 {
		return f
	}
	return DefaultBarrierTimeout
}

type aggregatorType struct{}

func (aggregatorType) Check(c *workflow.NodeCheck) {
	p := newParamCheck(c, "timeout", "value")
	checkTimeout(c, p)
	if v, ok := p.params["value"]; ok {
		p.template("parameters.value", v)
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
		return nil, compileErr(n, "value", err)
	}
	return valueRunner{value: val}, nil
}

type valueRunner struct{ value expr.Value }

func (r valueRunner) Run(_ context.Context, in *node.Input) (node.Result, error) {
	v, err := r.value.Eval(in.Env)
	if err != nil {
		return node.Result{}, exprError("value", err)
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
	p := newParamCheck(c, "wait_mode", "mode", "timeout")
	if m, ok := p.string("wait_mode", false); ok && m != WaitForAll && m != WaitForAny {
		c.Report("parameters.wait_mode", "unknown wait mode %q (known: wait_for_all, wait_for_any)", m)
	}
	if m, ok := p.string("mode", false); ok && m != "append" {
		c.Report("parameters.mode", "unknown mode %q (known: append)", m)
	}
	checkTimeout(c, p)
}

func (mergeType) Compile(*workflow.Node, *expr.Compiler) (node.Runner, error) { return nil, nil }

// MergeWaitsForAny reports whether a merge node fires on its first parent.
func MergeWaitsForAny(n *workflow.Node) bool { return n.Parameters["wait_mode"] == WaitForAny }
