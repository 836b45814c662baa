// Package nodetest holds node types for the tests of the engine and the
// worker.
package nodetest

import (
	"context"
	"maps"
	"sync"

	"github.com/rune-org/rune/expr"
	"github.com/rune-org/rune/node"
	"github.com/rune-org/rune/workflow"
)

// Eager is a node type whose runner is node.Eager, as the http node's is:
// it may run before Begin on a first copy. It counts the runs of each node
// of its type, by node id, and outputs {"ok": true}. Register the same
// *Eager under a name; it is safe for concurrent use.
type Eager struct {
	mu   sync.Mutex
	runs map[string]int64
}

// Check implements node.Type.
func (*Eager) Check(*workflow.NodeCheck) {}

// Compile implements node.Type.
func (e *Eager) Compile(n *workflow.Node, _ *expr.Compiler) (node.Runner, error) {
	return eagerRunner{e: e, id: n.ID}, nil
}

// Runs returns how many times each node ran so far.
func (e *Eager) Runs() map[string]int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return maps.Clone(e.runs)
}

// Total returns how many runs all the nodes made so far.
func (e *Eager) Total() int64 {
	var n int64
	for _, r := range e.Runs() {
		n += r
	}
	return n
}

type eagerRunner struct {
	e  *Eager
	id string
}

func (eagerRunner) Eager() {}

func (r eagerRunner) Run(context.Context, *node.Input) (node.Result, error) {
	r.e.mu.Lock()
	if r.e.runs == nil {
		r.e.runs = map[string]int64{}
	}
	r.e.runs[r.id]++
	r.e.mu.Unlock()
	return node.Result{Output: map[string]any{"ok": true}}, nil
}
