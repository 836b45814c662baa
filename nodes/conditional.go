package nodes

import (
	"context"

	"github.com/rune-org/rune/expr"
	"github.com/rune-org/rune/node"
	"github.com/rune-org/rune/workflow"
)

// conditionalType follows true_edge_id or false_edge_id depending on a
// boolean expression; a side left out ends the branch.
type conditionalType struct{}

func (conditionalType) Check(c *workflow.NodeCheck) {
	p := node.CheckParams(c, "expression", "true_edge_id", "false_edge_id")
	if src, ok := p.String("expression", true); ok {
		p.Expression("parameters.expression", src)
	}
	for _, name := range []string{"true_edge_id", "false_edge_id"} {
		if id, ok := p.String(name, false); ok && id != "" {
			p.Edge("parameters."+name, id)
		}
	}
}

func (conditionalType) Compile(n *workflow.Node, c *expr.Compiler) (node.Runner, error) {
	src, _ := n.Parameters["expression"].(string)
	v, err := c.Expression(src)
	if err != nil {
		return nil, node.CompileError(n, "expression", err)
	}
	r := &conditionalRunner{cond: v}
	r.trueEdge, _ = n.Parameters["true_edge_id"].(string)
	r.falseEdge, _ = n.Parameters["false_edge_id"].(string)
	return r, nil
}

type conditionalRunner struct {
	cond                expr.Value
	trueEdge, falseEdge string
}

// RoutingEdges implements node.Router.
func (r *conditionalRunner) RoutingEdges() []string {
	return []string{r.trueEdge, r.falseEdge}
}

func (r *conditionalRunner) Run(_ context.Context, in *node.Input) (node.Result, error) {
	ok, err := evalBool(r.cond, in.Env, "expression")
	if err != nil {
		return node.Result{}, err
	}
	edge := r.falseEdge
	if ok {
		edge = r.trueEdge
	}
	route := []string{} // non-nil: an unset side ends the branch
	if edge != "" {
		route = append(route, edge)
	}
	return node.Result{Output: map[string]any{"result": ok}, Route: route}, nil
}
