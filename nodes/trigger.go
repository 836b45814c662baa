package nodes

import (
	"context"
	"fmt"

	"github.com/rune-org/rune/expr"
	"github.com/rune-org/rune/node"
	"github.com/rune-org/rune/workflow"
)

// triggerType is the node whose output is the trigger payload. It takes no
// parameters and is never run: the engine stores the payload as $trigger.
type triggerType struct{}

func (triggerType) Check(c *workflow.NodeCheck) { node.CheckParams(c) }

func (triggerType) Compile(n *workflow.Node, _ *expr.Compiler) (node.Runner, error) {
	return triggerRunner{id: n.ID}, nil
}

type triggerRunner struct{ id string }

func (r triggerRunner) Run(context.Context, *node.Input) (node.Result, error) {
	return node.Result{}, fmt.Errorf("trigger node %q cannot run: its output is the payload that starts the execution", r.id)
}
