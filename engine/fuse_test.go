package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	coordmem "github.com/rune-org/rune/coord/memory"
	"github.com/rune-org/rune/engine"
	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/nodes"
)

// fuseChain: three pure nodes, a node with I/O ("test"), a pure node.
const fuseChain = `{"id":"fuse","nodes":[
	{"id":"start","type":"trigger","trigger":true},
	{"id":"a","type":"set","parameters":{"values":{"v":"{{ $trigger.n + 1 }}"}}},
	{"id":"b","type":"set","parameters":{"values":{"w":"{{ $a.v * 2 }}"}}},
	{"id":"c","type":"conditional","parameters":{"expression":"$b.w > 2","true_edge_id":"e4","false_edge_id":"e4x"}},
	{"id":"d","type":"test"},
	{"id":"never","type":"set","parameters":{"values":{"x":1}}},
	{"id":"e","type":"set","parameters":{"values":{"done":true}}}%s],
	"edges":[{"id":"e1","src":"start","dst":"a"},{"id":"e2","src":"a","dst":"b"},{"id":"e3","src":"b","dst":"c"},
	{"id":"e4","src":"c","dst":"d"},{"id":"e4x","src":"c","dst":"never"},{"id":"e5","src":"d","dst":"e"}]}`

// fuseEngine is an engine on memory, fusing unless noFuse. Its fused hops
// have an hour, not 5 ms, so that how many nodes a hop fuses does not
// depend on how loaded the machine is (-race in CI once made one hop of
// two out of three).
func fuseEngine(t *testing.T, noFuse bool) *engine.Engine {
	return fuseEngineBudget(t, noFuse, time.Hour)
}

func fuseEngineBudget(t *testing.T, noFuse bool, budget time.Duration) *engine.Engine {
	t.Helper()
	reg := nodes.NewRegistry(nodes.Options{})
	reg.Register("test", testType{})
	co := coordmem.New(coordmem.Options{})
	t.Cleanup(func() { co.Close() })
	eng, err := engine.New(engine.Config{Registry: reg, Coord: co, Barriers: coordmem.NewBarriers(), NoFuse: noFuse, FuseBudget: budget})
	if err != nil {
		t.Fatal(err)
	}
	return eng
}

// run starts def on eng and handles every message, first in first out,
// returning the effects of each handled message.
func runAll(t *testing.T, eng *engine.Engine, def string) (hops []*engine.Effects, first *message.NodeExecution) {
	t.Helper()
	wf, err := eng.Compile([]byte(def))
	if err != nil {
		t.Fatal(err)
	}
	var start engine.Effects
	if err := eng.Start(context.Background(), wf, "exec_fuse", map[string]any{"n": 1}, &start); err != nil {
		t.Fatal(err)
	}
	queue := []*message.NodeExecution{start.Next[0].Msg}
	first = queue[0]
	for len(queue) > 0 {
		var f engine.Effects
		if err := eng.Handle(context.Background(), engine.Delivery{}, queue[0], &f); err != nil {
			t.Fatal(err)
		}
		queue = queue[1:]
		for _, d := range f.Next {
			queue = append(queue, d.Msg)
		}
		hops = append(hops, &f)
	}
	return hops, first
}

// trace is every status ("node:status") and every message ("→node id") of
// a run, in order.
func trace(hops []*engine.Effects) (statuses, msgs []string) {
	for _, f := range hops {
		statuses = append(statuses, statusNames(f.Statuses)...)
		for _, d := range f.Next {
			m := *d.Msg
			m.StartedAt = time.Time{} // the two runs started apart
			b, _ := json.Marshal(&m)
			msgs = append(msgs, string(b))
		}
	}
	return statuses, msgs
}

// Fused, the chain takes two hops (a b c | d e) instead of five, and
// reports the same statuses in the same order, the same messages between
// hops (ids, contexts) and the same completion as unfused.
func TestFusedHopReportsWhatUnfusedHopsDo(t *testing.T) {
	t.Parallel()
	def := fmt.Sprintf(fuseChain, "")
	fused, _ := runAll(t, fuseEngine(t, false), def)
	unfused, _ := runAll(t, fuseEngine(t, true), def)
	if len(fused) != 2 || len(unfused) != 5 {
		t.Fatalf("%d fused hops and %d unfused, want 2 and 5", len(fused), len(unfused))
	}
	fs, fm := trace(fused)
	us, um := trace(unfused)
	if strings.Join(fs, " ") != strings.Join(us, " ") {
		t.Fatalf("statuses differ:\n  fused %v\nunfused %v", fs, us)
	}
	// The message to d is the one unfused hops publish after c.
	if len(fm) != 1 || fm[0] != um[2] {
		t.Fatalf("fused messages %v\nwant the unfused message to d %v", fm, um[2])
	}
	fc, _ := json.Marshal(fused[1].Completion.FinalContext)
	uc, _ := json.Marshal(unfused[4].Completion.FinalContext)
	if string(fc) != string(uc) {
		t.Fatalf("final contexts differ:\n  fused %s\nunfused %s", fc, uc)
	}
}

// A redelivered fused hop replays it from the record: byte-identical
// statuses of the fused nodes, successor messages and completion.
func TestRedeliveredFusedHopIsByteIdentical(t *testing.T) {
	t.Parallel()
	eng := fuseEngine(t, false)
	hops, first := runAll(t, eng, fmt.Sprintf(fuseChain, ""))
	var again engine.Effects
	if err := eng.Handle(context.Background(), engine.Delivery{}, first, &again); err != nil {
		t.Fatal(err)
	}
	// The first node's running status is reported by the delivery that
	// ran it; every later effect is compared.
	want, _ := json.Marshal(struct {
		S any
		N any
	}{hops[0].Statuses[1:], hops[0].Next})
	got, _ := json.Marshal(struct {
		S any
		N any
	}{again.Statuses[len(again.Statuses)-len(hops[0].Statuses)+1:], again.Next})
	if string(got) != string(want) {
		t.Fatalf("redelivered fused hop differs:\n got %s\nwant %s", got, want)
	}
	if len(again.Statuses) < len(hops[0].Statuses)-1 {
		t.Fatalf("redelivery reported %d statuses, want at least %d", len(again.Statuses), len(hops[0].Statuses)-1)
	}
}

// "settings": {"fuse": false} runs every node in a hop of its own.
func TestFuseOffPerWorkflow(t *testing.T) {
	t.Parallel()
	def := strings.Replace(fmt.Sprintf(fuseChain, ""), `{"id":"fuse",`, `{"id":"fuse","settings":{"fuse":false},`, 1)
	hops, _ := runAll(t, fuseEngine(t, false), def)
	if len(hops) != 5 {
		t.Fatalf("%d hops with fuse off, want 5", len(hops))
	}
}

// A hop whose budget ran out publishes the next pure node instead of
// running it: with a budget of a nanosecond, the chain's five nodes take a
// hop each, with the statuses of the fused run.
func TestFusedHopStopsAtItsBudget(t *testing.T) {
	t.Parallel()
	def := fmt.Sprintf(fuseChain, "")
	short, _ := runAll(t, fuseEngineBudget(t, false, time.Nanosecond), def)
	fused, _ := runAll(t, fuseEngine(t, false), def)
	if len(short) != 5 {
		t.Fatalf("%d hops with a budget of 1 ns, want 5", len(short))
	}
	ss, _ := trace(short)
	fs, _ := trace(fused)
	if strings.Join(ss, " ") != strings.Join(fs, " ") {
		t.Fatalf("statuses differ:\n  1 ns %v\n fused %v", ss, fs)
	}
}

// A hop fuses at most 64 nodes.
func TestFusedHopIsBounded(t *testing.T) {
	t.Parallel()
	var nodesJSON, edges []string
	prev := "start"
	for i := range 100 {
		id := fmt.Sprintf("n%d", i)
		nodesJSON = append(nodesJSON, fmt.Sprintf(`{"id":%q,"type":"set","parameters":{"values":{"i":%d}}}`, id, i))
		edges = append(edges, fmt.Sprintf(`{"id":"e%d","src":%q,"dst":%q}`, i, prev, id))
		prev = id
	}
	def := `{"id":"long","nodes":[{"id":"start","type":"trigger","trigger":true},` + strings.Join(nodesJSON, ",") + `],"edges":[` + strings.Join(edges, ",") + `]}`
	hops, _ := runAll(t, fuseEngine(t, false), def)
	if len(hops) < 2 || len(hops) > 100 {
		t.Fatalf("%d hops for 100 pure nodes, want 2 or more (64 nodes at most a hop)", len(hops))
	}
	for i, f := range hops {
		if n := len(f.Statuses) / 2; n > 65 {
			t.Fatalf("hop %d ran %d nodes, over the bound", i, n)
		}
	}
	if hops[len(hops)-1].Completion == nil {
		t.Fatal("no completion")
	}
}
