package engine

import (
	"context"
	"fmt"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

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
// was halted), what the handling reports, whether the node runs and whether
// the handling completes the execution. The begin, optimistic and eager
// modes are Handle's (modeOf picks them); resume is the scheduler's Resume
// of a wait, timeout a barrier's deadline (HandleTimeout).
func TestModeByOutcome(t *testing.T) {
	type want struct {
		statuses []string
		runs     int64 // runs of the node by this handling; -1: not counted (set)
		complete bool  // the handling reports the execution's completion
	}
	// The node n under test, the last of its workflow; a timeout's
	// aggregator follows a split of one item that never arrives.
	const linear = `{"id":"m","nodes":[{"id":"start","type":"trigger","trigger":true},
		{"id":"n","type":"%s","parameters":%s}],"edges":[{"id":"e1","src":"start","dst":"n"}]}`
	const barrier = `{"id":"m","nodes":[{"id":"start","type":"trigger","trigger":true},
		{"id":"s","type":"split","parameters":{"input_array":[1]}},{"id":"i","type":"plain"},
		{"id":"n","type":"aggregator","parameters":{"timeout":60}}],
		"edges":[{"id":"e1","src":"start","dst":"s"},{"id":"e2","src":"s","dst":"i"},{"id":"e3","src":"i","dst":"n"}]}`
	cases := []struct {
		typ    string
		params string
		first  bool // delivered as a first copy, not redelivered
		mode   mode
		run    want
		again  want // the same message delivered again (Replay)
		drop   want // delivered after a halt (Drop)
	}{
		{"plain", `{}`, false, modeBegin,
			want{[]string{"running", "success"}, 1, true},
			want{[]string{"success"}, 0, true},
			want{[]string{"skipped"}, 0, true}},
		{"set", `{"values":{"v":1}}`, false, modeOptimistic,
			want{[]string{"running", "success"}, -1, true},
			want{[]string{"success"}, -1, true},  // run again, then replayed: its running status withheld
			want{[]string{"skipped"}, -1, true}}, // run, then dropped: no running status
		{"eager", `{}`, true, modeEager,
			want{[]string{"running", "success"}, 1, true},
			want{[]string{"running", "success"}, 1, true}, // the first-copy race: run again, effects replayed
			want{[]string{"running", "skipped"}, 1, true}},
		{"eager", `{}`, false, modeBegin,
			want{[]string{"running", "success"}, 1, true},
			want{[]string{"success"}, 0, true},
			want{[]string{"skipped"}, 0, true}},
		// The wait succeeds without running again; its Finish is the last.
		{"wait", `{"amount":2,"unit":"hours"}`, false, modeResume,
			want{[]string{"success"}, 0, true},
			want{[]string{"success"}, 0, true},
			want{[]string{"skipped"}, 0, true}},
		// The open barrier fails; the item is still live, so no completion.
		// A halted execution's timeout reports nothing: nothing waits for it.
		{"aggregator", `{}`, false, modeTimeout,
			want{[]string{"failed"}, 0, false},
			want{[]string{"failed"}, 0, false},
			want{nil, 0, false}},
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
			e, err := New(Config{Registry: reg, Coord: co, Barriers: coordmem.NewBarriers(), NoFuse: true})
			if err != nil {
				t.Fatal(err)
			}
			def := fmt.Sprintf(linear, c.typ, c.params)
			if c.mode == modeTimeout {
				def = barrier
			}
			wf, err := e.Compile([]byte(def))
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			d := Delivery{First: c.first}
			runs := func() int64 { return plain.Load() + eager.Total() }
			// start starts exec and returns what handles its message at n
			// (for a timeout, the split ran first and armed it).
			start := func(exec string) func(*Effects) error {
				var f Effects
				if err := e.Start(ctx, wf, exec, nil, &f); err != nil {
					t.Fatal(err)
				}
				m := f.Next[0].Msg
				switch c.mode {
				case modeResume:
					return func(f *Effects) error { return e.Resume(ctx, d, m, time.Now(), f) }
				case modeTimeout:
					var split Effects
					if err := e.Handle(ctx, d, m, &split); err != nil || len(split.Timeouts) != 1 {
						t.Fatalf("split: %v, %d timeouts, want 1", err, len(split.Timeouts))
					}
					return func(f *Effects) error { return e.HandleTimeout(ctx, d, split.Timeouts[0], f) }
				}
				st := &step{e: e, wf: wf, m: m, node: mustNode(t, wf, "n"), d: d}
				if got := st.modeOf(); got != c.mode {
					t.Fatalf("mode %s, want %s", got, c.mode)
				}
				return func(f *Effects) error { return e.Handle(ctx, d, m, f) }
			}
			handle := func(exec string, w want, h func(*Effects) error) {
				t.Helper()
				before := runs()
				var f Effects
				if err := h(&f); err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, s := range f.Statuses {
					if s.NodeID == "n" {
						got = append(got, s.Status)
					}
				}
				if !reflect.DeepEqual(got, w.statuses) || (w.runs >= 0 && runs()-before != w.runs) {
					t.Fatalf("%s: reported %v and ran %d times, want %v and %d", exec, got, runs()-before, w.statuses, w.runs)
				}
				if (f.Completion != nil) != w.complete {
					t.Fatalf("%s: completion %v, want %v", exec, f.Completion != nil, w.complete)
				}
			}
			h := start("exec_run")
			handle("run", c.run, h)
			handle("again", c.again, h)
			h = start("exec_drop")
			if err := e.Halt(ctx, "exec_drop", message.Failure{Error: message.Error{Code: "CANCELLED", Message: "stop"}}); err != nil {
				t.Fatal(err)
			}
			handle("drop", c.drop, h)
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
