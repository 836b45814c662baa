package engine_test

import (
	"context"
	"testing"

	coordmem "github.com/rune-org/rune/coord/memory"
	"github.com/rune-org/rune/engine"
	"github.com/rune-org/rune/expr"
	"github.com/rune-org/rune/node"
	"github.com/rune-org/rune/nodes"
	"github.com/rune-org/rune/workflow"
)

// noteType stands for a notification node: its output is also recorded as
// $vars.note_<id> (node.Vars).
type noteType struct{}

func (noteType) Check(*workflow.NodeCheck) {}
func (noteType) Compile(n *workflow.Node, _ *expr.Compiler) (node.Runner, error) {
	return noteRunner{name: "note_" + n.ID, n: n.Parameters["n"]}, nil
}

type noteRunner struct {
	name string
	n    any
}

func (r noteRunner) VarName() string { return r.name }
func (r noteRunner) Run(context.Context, *node.Input) (node.Result, error) {
	return node.Result{Output: map[string]any{"n": r.n}}, nil
}

// Outputs of node.Vars runners accumulate under $vars for later nodes and
// the completion, next to $<id>; a replayed message carries them too.
func TestVarsAccumulate(t *testing.T) {
	reg := nodes.NewRegistry(nodes.Options{})
	reg.Register("note", noteType{})
	co := coordmem.New(coordmem.Options{})
	t.Cleanup(func() { co.Close() })
	eng, err := engine.New(engine.Config{Registry: reg, Coord: co, Timers: coordmem.NewTimers(), Barriers: coordmem.NewBarriers()})
	if err != nil {
		t.Fatal(err)
	}
	wf, err := eng.Compile([]byte(`{"id":"vars","nodes":[
		{"id":"start","type":"trigger","trigger":true},
		{"id":"a","type":"note","parameters":{"n":1}},
		{"id":"b","type":"note","parameters":{"n":2}},
		{"id":"sum","type":"set","parameters":{"values":{"total":"{{ $vars.note_a.n + $vars.note_b.n }}"}}}
	],"edges":[{"id":"e1","src":"start","dst":"a"},{"id":"e2","src":"a","dst":"b"},{"id":"e3","src":"b","dst":"sum"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, eng: eng, wf: wf}
	h.start(nil)
	h.step(0) // a
	bMsg := h.queue[0]
	h.step(0) // b
	h.queue = append(h.queue, bMsg)
	h.step(len(h.queue) - 1) // b again: a redelivery replays
	for _, d := range h.queue {
		vars, _ := d.Msg.AccumulatedContext["$vars"].(map[string]any)
		if len(vars) != 2 || vars["note_b"] == nil {
			t.Fatalf("the message to %s carries $vars %v, want note_a and note_b", d.Msg.CurrentNode, vars)
		}
	}
	h.drain()
	comp := h.done[0]
	vars, _ := comp.FinalContext["$vars"].(map[string]any)
	sum, _ := comp.FinalContext["$sum"].(map[string]any)
	if len(vars) != 2 || num(sum["total"]) != 3 {
		t.Fatalf("final $vars %v, $sum %v; want note_a and note_b, total 3", vars, sum)
	}
}

// A merge of two branches that each recorded a variable sees both.
func TestVarsMergedAtAMerge(t *testing.T) {
	reg := nodes.NewRegistry(nodes.Options{})
	reg.Register("note", noteType{})
	co := coordmem.New(coordmem.Options{})
	t.Cleanup(func() { co.Close() })
	eng, err := engine.New(engine.Config{Registry: reg, Coord: co, Timers: coordmem.NewTimers(), Barriers: coordmem.NewBarriers()})
	if err != nil {
		t.Fatal(err)
	}
	wf, err := eng.Compile([]byte(`{"id":"vars_merge","nodes":[
		{"id":"start","type":"trigger","trigger":true},
		{"id":"first","type":"note","parameters":{"n":0}},
		{"id":"a","type":"note","parameters":{"n":1}},
		{"id":"b","type":"note","parameters":{"n":2}},
		{"id":"join","type":"merge"},
		{"id":"sum","type":"set","parameters":{"values":{"total":"{{ $vars.note_first.n + $vars.note_a.n + $vars.note_b.n }}"}}}
	],"edges":[{"id":"e0","src":"start","dst":"first"},{"id":"e1","src":"first","dst":"a"},{"id":"e2","src":"first","dst":"b"},
		{"id":"e3","src":"a","dst":"join"},{"id":"e4","src":"b","dst":"join"},{"id":"e5","src":"join","dst":"sum"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, eng: eng, wf: wf}
	h.start(nil)
	h.drain()
	comp := h.completion()
	sum, _ := comp.FinalContext["$sum"].(map[string]any)
	vars, _ := comp.FinalContext["$vars"].(map[string]any)
	if comp.Status != "completed" || num(sum["total"]) != 3 || len(vars) != 3 {
		t.Fatalf("completion %s, $sum %v, $vars %v; want total 3 and three variables", comp.Status, sum, vars)
	}
}
