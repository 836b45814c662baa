package nodes

import (
	"context"
	"fmt"

	"github.com/rune-org/rune/expr"
	"github.com/rune-org/rune/node"
	"github.com/rune-org/rune/workflow"
)

// switchType follows the edge of the first case whose expression is true,
// else default_edge, else nothing.
type switchType struct{}

func (switchType) Check(c *workflow.NodeCheck) {
	p := node.CheckParams(c, "cases", "default_edge")
	if id, ok := p.String("default_edge", false); ok && id != "" {
		p.Edge("parameters.default_edge", id)
	}
	raw, present := p.Values["cases"]
	if !present || raw == nil {
		c.Report("parameters.cases", "required: a list of {\"expression\", \"edge\"}")
		return
	}
	cases, ok := raw.([]any)
	if !ok {
		c.Report("parameters.cases", "must be a list of {\"expression\", \"edge\"}, not %s", expr.TypeName(raw))
		return
	}
	for i, rc := range cases {
		at := fmt.Sprintf("parameters.cases[%d]", i)
		cs, ok := rc.(map[string]any)
		if !ok {
			c.Report(at, "must be an object {\"expression\", \"edge\"}, not %s", expr.TypeName(rc))
			continue
		}
		for k := range cs {
			if k != "expression" && k != "edge" {
				c.Report(at+"."+k, "unknown field (known: expression, edge)")
			}
		}
		switch src, ok := cs["expression"].(string); {
		case !ok || src == "":
			c.Report(at+".expression", "required: a string")
		default:
			p.Expression(at+".expression", src)
		}
		switch edge, ok := cs["edge"].(string); {
		case !ok || edge == "":
			c.Report(at+".edge", "required: the id of an edge leaving the node")
		default:
			p.Edge(at+".edge", edge)
		}
	}
}

func (switchType) Compile(n *workflow.Node, c *expr.Compiler) (node.Runner, error) {
	r := &switchRunner{}
	r.defaultEdge, _ = n.Parameters["default_edge"].(string)
	cases, _ := n.Parameters["cases"].([]any)
	for i, rc := range cases {
		cs, _ := rc.(map[string]any)
		src, _ := cs["expression"].(string)
		field := fmt.Sprintf("cases[%d].expression", i)
		v, err := c.Expression(src)
		if err != nil {
			return nil, node.CompileError(n, field, err)
		}
		edge, _ := cs["edge"].(string)
		r.cases = append(r.cases, switchCase{cond: v, edge: edge, field: field})
	}
	return r, nil
}

type switchCase struct {
	cond  expr.Value
	edge  string
	field string
}

type switchRunner struct {
	cases       []switchCase
	defaultEdge string
}

// RoutingEdges implements node.Router.
func (r *switchRunner) RoutingEdges() []string {
	ids := make([]string, 0, len(r.cases)+1)
	for _, c := range r.cases {
		ids = append(ids, c.edge)
	}
	return append(ids, r.defaultEdge)
}

func (r *switchRunner) Run(_ context.Context, in *node.Input) (node.Result, error) {
	for i, cs := range r.cases {
		ok, err := evalBool(cs.cond, in.Env, cs.field)
		if err != nil {
			return node.Result{}, err
		}
		if ok {
			return node.Result{Output: map[string]any{"matched": i}, Route: []string{cs.edge}}, nil
		}
	}
	route := []string{}
	if r.defaultEdge != "" {
		route = append(route, r.defaultEdge)
	}
	return node.Result{Output: map[string]any{"matched": -1}, Route: route}, nil
}
