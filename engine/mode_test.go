package engine

import (
	"context"
	"reflect"
	"sync/atomic"
	"testing"

	coordmem "github.com/rune-org/rune/coord/memory"
	"github.com/rune-org/rune/expr"
	"github.com/rune-org/rune/internal/nodetest"
	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/node"
	"github.com/rune-org/rune/nodes"
	"github.com/rune-org/rune/workflow"
)

// plainType is a node type that is neither pure nor eager: its messages
// ask Begin first. It counts its runs.
type plainType struct{ runs *atomic.Int64 }

func (plainType) Check(*workflow.NodeCheck) {}
func (p plainType) Compile(*workflow.Node, *expr.Compiler) (node.Runner, error) {
	return p, nil
}
func (p plainType) Run(context.Context, *node.Input) (node.Result, error) {
	p.runs.Add(1)
	return node.Result{Output: map[string]any{"ok": true}}, nil
}

// TestModeByOutcome is the step's state machine as a table: for each mode
// a message is handled in, and each verdict the coordinator gives (Run: a
// first delivery; Replay: the message finished before; Drop: its execution
// was halted), what the handling reports and whether the node runs.
func TestModeByOutcome(t *testing.T) {
	type want struct {
		statuses []string
		runs     int64 // runs of the node by this handling; -1: not counted (set)
	}
	cases := []struct {
		typ   string
		first bool // delivered as a first copy, not redelivered
		mode  mode
		run   want
		again want // the same message delivered again (Replay)
		drop  want // delivered after a halt (Drop)
	}{
		{"plain", false, modeBegin,
			want{[]string{"running", "success"}, 1},
			want{[]string{"success"}, 0},
			want{[]string{"skipped"}, 0}},
		{"set", false, modeOptimistic,
			want{[]string{"running", "success"}, -1},
			want{[]string{"success"}, -1},  // run again, then replayed: its running status withheld
			want{[]string{"skipped"}, -1}}, // run, then dropped: no running status
		{"eager", true, modeEager,
			want{[]string{"running", "success"}, 1},
			want{[]string{"running", "success"}, 1}, // the first-copy race: run again, effects replayed
			want{[]string{"running", "skipped"}, 1}},
		{"eager", false, modeBegin,
			want{[]string{"running", "success"}, 1},
			want{[]string{"success"}, 0},
			want{[]string{"skipped"}, 0}},
	}
	for _, c := range cases {
		t.Run(c.typ+"/"+c.mode.String(), func(t *testing.T) {
			plain := &atomic.Int64{}
			eager := &nodetest.Eager{}
			reg := nodes.NewRegistry(nodes.Options{})
			reg.Register("plain", plainType{runs: plain})
			reg.Register("eager", eager)
			co := coordmem.New(coordmem.Options{})
			t.Cleanup(func() { co.Close() })
			e, err := New(Config{Registry: reg, Coord: co, NoFuse: true})
			if err != nil {
				t.Fatal(err)
			}
			params := `{}`
			if c.typ == "set" {
				params = `{"values":{"v":1}}`
			}
			wf, err := e.Compile([]byte(`{"id":"m","nodes":[{"id":"start","type":"trigger","trigger":true},
				{"id":"n","type":"` + c.typ + `","parameters":` + params + `}],"edges":[{"id":"e1","src":"start","dst":"n"}]}`))
			if err != nil {
				t.Fatal(err)
			}
			runs := func() int64 { return plain.Load() + eager.Total() }
			handle := func(exec string, w want, m *message.NodeExecution) {
				t.Helper()
				before := runs()
				var f Effects
				d := Delivery{First: c.first}
				st := &step{e: e, wf: wf, m: m, node: mustNode(t, wf, "n"), sink: &f, d: d}
				if got := st.modeOf(); got != c.mode {
					t.Fatalf("mode %s, want %s", got, c.mode)
				}
				if err := e.Handle(context.Background(), d, m, &f); err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, s := range f.Statuses {
					got = append(got, s.Status)
				}
				if !reflect.DeepEqual(got, w.statuses) || (w.runs >= 0 && runs()-before != w.runs) {
					t.Fatalf("%s: reported %v and ran %d times, want %v and %d", exec, got, runs()-before, w.statuses, w.runs)
				}
				if f.Completion == nil {
					t.Fatalf("%s: no completion, want one (n is the last node)", exec)
				}
			}
			start := func(exec string) *message.NodeExecution {
				var f Effects
				if err := e.Start(context.Background(), wf, exec, nil, &f); err != nil {
					t.Fatal(err)
				}
				return f.Next[0].Msg
			}
			m := start("exec_run")
			handle("run", c.run, m)
			handle("again", c.again, m)
			m = start("exec_drop")
			if err := e.Halt(context.Background(), "exec_drop", message.Failure{Error: message.Error{Code: "CANCELLED", Message: "stop"}}); err != nil {
				t.Fatal(err)
			}
			handle("drop", c.drop, m)
		})
	}
}

func mustNode(t *testing.T, wf *Workflow, id string) *workflow.Node {
	t.Helper()
	n, ok := wf.Graph.Node(id)
	if !ok {
		t.Fatalf("no node %q", id)
	}
	return n
}
