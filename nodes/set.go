package nodes

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/rune-org/rune/expr"
	"github.com/rune-org/rune/node"
	"github.com/rune-org/rune/workflow"
)

// setType builds an object from "values" (strings are templates; other JSON
// values are taken as they are, strings inside them rendered); "keep", when
// given, lists the names to output.
type setType struct{}

func (setType) Check(c *workflow.NodeCheck) {
	p := node.CheckParams(c, "values", "keep")
	raw, present := p.Values["values"]
	values, ok := raw.(map[string]any)
	switch {
	case !present || raw == nil:
		c.Report("parameters.values", "required: an object of name → value")
	case !ok:
		c.Report("parameters.values", "must be an object of name → value, not %s", expr.TypeName(raw))
	default:
		for _, name := range slices.Sorted(maps.Keys(values)) {
			p.Template("parameters.values"+fieldPath(name), values[name])
		}
	}
	rawKeep, present := p.Values["keep"]
	if !present || rawKeep == nil {
		return
	}
	keep, ok := rawKeep.([]any)
	if !ok {
		c.Report("parameters.keep", "must be a list of names, not %s", expr.TypeName(rawKeep))
		return
	}
	for i, k := range keep {
		name, ok := k.(string)
		switch {
		case !ok:
			c.Report(fmt.Sprintf("parameters.keep[%d]", i), "must be a string, not %s", expr.TypeName(k))
		case values != nil:
			if _, ok := values[name]; !ok {
				c.Report(fmt.Sprintf("parameters.keep[%d]", i), "%q is not one of the values", name)
			}
		}
	}
}

func (setType) Compile(n *workflow.Node, c *expr.Compiler) (node.Runner, error) {
	values, _ := n.Parameters["values"].(map[string]any)
	keep := map[string]bool{}
	if ks, ok := n.Parameters["keep"].([]any); ok {
		for _, k := range ks {
			if s, ok := k.(string); ok {
				keep[s] = true
			}
		}
	}
	r := &setRunner{}
	for _, name := range slices.Sorted(maps.Keys(values)) {
		if len(keep) > 0 && !keep[name] {
			continue
		}
		v, err := c.Value(values[name])
		if err != nil {
			return nil, node.CompileError(n, "values"+fieldPath(name), err)
		}
		r.names = append(r.names, name)
		r.values = append(r.values, v)
	}
	return r, nil
}

type setRunner struct {
	names  []string
	values []expr.Value
}

func (r *setRunner) Run(_ context.Context, in *node.Input) (node.Result, error) {
	out := make(map[string]any, len(r.names))
	for i, v := range r.values {
		val, err := v.Eval(in.Env)
		if err != nil {
			return node.Result{}, node.ExprError("values"+fieldPath(r.names[i]), err)
		}
		out[r.names[i]] = val
	}
	return node.Result{Output: out}, nil
}

// fieldPath renders an object key as a JSON path step.
func fieldPath(k string) string {
	simple := k != ""
	for i, r := range k {
		if !(r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (i > 0 && r >= '0' && r <= '9')) {
			simple = false
			break
		}
	}
	if simple {
		return "." + k
	}
	return fmt.Sprintf("[%q]", k)
}
