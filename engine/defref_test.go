package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/rune-org/rune/coord"
	coordmem "github.com/rune-org/rune/coord/memory"
	"github.com/rune-org/rune/engine"
	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/nodes"
)

const refChain = `{"id":"refs","nodes":[
	{"id":"start","type":"trigger","trigger":true},
	{"id":"a","type":"set","parameters":{"values":{"v":1}}},
	{"id":"b","type":"set","parameters":{"values":{"w":"{{ $a.v + 1 }}"}}}],
	"edges":[{"id":"e1","src":"start","dst":"a"},{"id":"e2","src":"a","dst":"b"}]}`

func refEngine(t *testing.T, co coord.Coordinator, defs coord.Blobs) *engine.Engine {
	t.Helper()
	eng, err := engine.New(engine.Config{Registry: nodes.NewRegistry(nodes.Options{}), Coord: co, Definitions: defs, CacheSize: 1, NoFuse: true})
	if err != nil {
		t.Fatal(err)
	}
	return eng
}

// With a definition store, messages carry the definition's reference, not
// the definition; a worker that never saw it fetches it once, and an inline
// message (an older producer's) is still run, its successors by reference.
func TestDefinitionsTravelByReference(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	co := coordmem.New(coordmem.Options{})
	defer co.Close()
	defs := coordmem.NewBlobs()
	starter := refEngine(t, co, defs)
	wf, err := starter.Compile([]byte(refChain))
	if err != nil {
		t.Fatal(err)
	}
	var start engine.Effects
	if err := starter.Start(ctx, wf, "exec_refs", nil, &start); err != nil {
		t.Fatal(err)
	}
	m := start.Next[0].Msg
	if len(m.WorkflowDefinition) != 0 || m.DefinitionRef != coord.BlobRef(wf.Raw) {
		t.Fatalf("first message carries %d definition bytes and ref %q; want only the ref %q", len(m.WorkflowDefinition), m.DefinitionRef, coord.BlobRef(wf.Raw))
	}
	// Another worker, with an empty cache, runs it.
	var f engine.Effects
	if err := refEngine(t, co, defs).Handle(ctx, engine.Delivery{}, m, &f); err != nil {
		t.Fatal(err)
	}
	next := f.Next[0].Msg
	if len(next.WorkflowDefinition) != 0 || next.DefinitionRef != m.DefinitionRef {
		t.Fatalf("successor carries %d definition bytes and ref %q", len(next.WorkflowDefinition), next.DefinitionRef)
	}
	// The same message inline, as an older producer sends it.
	inline := *next
	inline.DefinitionRef, inline.WorkflowDefinition = "", wf.Raw
	var g engine.Effects
	if err := refEngine(t, co, defs).Handle(ctx, engine.Delivery{}, &inline, &g); err != nil {
		t.Fatal(err)
	}
	if g.Completion == nil {
		t.Fatal("the inline message did not complete the execution")
	}
	if b, _ := json.Marshal(g.Completion.FinalContext["$b"]); string(b) != `{"w":2}` {
		t.Fatalf("$b = %s, want {\"w\":2}", b)
	}
}

// A message whose definition the store does not have can never run: it is
// refused (dead-lettered) with the reference as the reason.
func TestMissingDefinitionIsRefusedWithReason(t *testing.T) {
	t.Parallel()
	co := coordmem.New(coordmem.Options{})
	defer co.Close()
	eng := refEngine(t, co, coordmem.NewBlobs())
	ref := strings.Repeat("ab", 16)
	m := &message.NodeExecution{MessageID: "m1", WorkflowID: "refs", ExecutionID: "exec_missing", CurrentNode: "a", Attempt: 1,
		DefinitionRef: ref, AccumulatedContext: map[string]any{"$trigger": nil}}
	err := eng.Handle(context.Background(), engine.Delivery{}, m, &engine.Effects{})
	if !errors.Is(err, engine.ErrInvalid) || !strings.Contains(err.Error(), ref) {
		t.Fatalf("Handle = %v, want ErrInvalid naming definition %s", err, ref)
	}
}
