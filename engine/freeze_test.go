package engine_test

import (
	"bytes"
	"compress/flate"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	coordmem "github.com/rune-org/rune/coord/memory"
	"github.com/rune-org/rune/engine"
	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/nodes"
)

// freezer is an engine with a definition store and a message waiting at
// the wait node of waitDef, as suspend freezes it.
func freezer(t testing.TB) (*engine.Engine, *message.NodeExecution) {
	t.Helper()
	co := coordmem.New(coordmem.Options{})
	t.Cleanup(func() { _ = co.Close() })
	eng, err := engine.New(engine.Config{Registry: nodes.NewRegistry(nodes.Options{}), Coord: co, Definitions: coordmem.NewBlobs()})
	if err != nil {
		t.Fatal(err)
	}
	wf, err := eng.Compile([]byte(waitDef))
	if err != nil {
		t.Fatal(err)
	}
	var f engine.Effects
	if err := eng.Start(context.Background(), wf, "exec_20261122T101500_0123456789ab", map[string]any{"user": map[string]any{"email": "ada@example.com", "n": 3.5}}, &f); err != nil {
		t.Fatal(err)
	}
	m := *f.Next[0].Msg
	m.Attempt = 2
	m.LineageStack = []message.Frame{{SplitNodeID: "split", BranchID: "b1", ItemIndex: 1, TotalItems: 3}}
	m.StartedAt = time.Date(2026, 11, 22, 10, 15, 0, 123456789, time.FixedZone("", 3600))
	return eng, &m
}

func jsonOf(t testing.TB, m *message.NodeExecution) string {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestFreezeRoundTrip(t *testing.T) {
	eng, m := freezer(t)
	ctx := context.Background()
	for _, mod := range []func(*message.NodeExecution){
		func(*message.NodeExecution) {},
		func(m *message.NodeExecution) {
			m.LineageStack, m.FromNode, m.AccumulatedContext = nil, "", map[string]any{"$trigger": nil}
			m.StartedAt = m.StartedAt.UTC()
		},
	} {
		m := *m
		mod(&m)
		frozen, err := eng.Freeze(ctx, &m)
		if err != nil {
			t.Fatal(err)
		}
		if frozen[0] != 0x02 {
			t.Fatalf("frozen message starts with %#x, want the compact form 0x02", frozen[0])
		}
		back, err := eng.Thaw(ctx, engine.TimerID(&m), frozen)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := jsonOf(t, back), jsonOf(t, &m); got != want {
			t.Fatalf("thawed message differs:\n got %s\nwant %s", got, want)
		}
	}
}

// Timers frozen before the compact form (flate-compressed JSON, 0x01) and
// without a definition store (plain JSON) still thaw.
func TestThawEarlierForms(t *testing.T) {
	eng, m := freezer(t)
	ctx := context.Background()
	frozen, err := eng.Freeze(ctx, m) // stores the definition
	if err != nil {
		t.Fatal(err)
	}
	_ = frozen
	slim := *m
	slim.WorkflowDefinition = nil
	raw, _ := json.Marshal(map[string]any{"d": definitionRef(t, m), "m": &slim})
	var v1 bytes.Buffer
	v1.WriteByte(0x01)
	w, _ := flate.NewWriter(&v1, flate.BestSpeed)
	_, _ = w.Write(raw)
	_ = w.Close()
	plain, _ := json.Marshal(m)
	for name, payload := range map[string][]byte{"v1": v1.Bytes(), "plain JSON": plain} {
		back, err := eng.Thaw(ctx, "exec:"+m.MessageID, payload)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got, want := jsonOf(t, back), jsonOf(t, m); got != want {
			t.Fatalf("%s thawed differs:\n got %s\nwant %s", name, got, want)
		}
	}
}

// definitionRef is the reference of m's definition in the definition store:
// the same content-addressed reference coordmem's Blobs gives.
func definitionRef(t *testing.T, m *message.NodeExecution) string {
	t.Helper()
	if m.DefinitionRef != "" {
		return m.DefinitionRef
	}
	ref, err := coordmem.NewBlobs().Put(context.Background(), "definitions", m.WorkflowDefinition)
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

func TestThawCorrupted(t *testing.T) {
	eng, m := freezer(t)
	ctx := context.Background()
	frozen, err := eng.Freeze(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	flipped := bytes.Clone(frozen)
	flipped[len(flipped)-3] ^= 0xff
	unknownRef := bytes.Clone(frozen)
	unknownRef[2] ^= 0xff
	for _, c := range []struct {
		name    string
		payload []byte
		want    string // in the error
		invalid bool
	}{
		{"empty", nil, "malformed", true},
		{"header only", []byte{0x02}, "bad definition reference length", true},
		{"truncated reference", frozen[:10], "bad definition reference (truncated)", true},
		{"truncated header", frozen[:20], "bad", true}, // in the start time, after the 16-byte reference
		{"truncated body", frozen[:len(frozen)-8], "does not decompress", true},
		{"flipped body", flipped, "frozen message", true},
		{"v1 garbage", []byte{1, 2, 3}, "does not decompress", true},
		{"unknown definition", unknownRef, "read definition", false},
	} {
		_, err := eng.Thaw(ctx, m.MessageID, c.payload)
		if err == nil || !strings.Contains(err.Error(), c.want) || errors.Is(err, engine.ErrInvalid) != c.invalid {
			t.Errorf("%s: Thaw error %v, want one mentioning %q (ErrInvalid: %v)", c.name, err, c.want, c.invalid)
		}
	}
}

// The compact form is what makes a million waiting timers fit in Redis
// (docs/benchmarks.md): keep it well under the v1 form's size.
func TestFrozenSize(t *testing.T) {
	eng, m := freezer(t)
	frozen, err := eng.Freeze(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	slim := *m
	slim.WorkflowDefinition = nil
	raw, _ := json.Marshal(map[string]any{"d": strings.Repeat("0", 64), "m": &slim})
	var v1 bytes.Buffer
	w, _ := flate.NewWriter(&v1, flate.BestSpeed)
	_, _ = w.Write(raw)
	_ = w.Close()
	if len(frozen) > v1.Len()*3/4 {
		t.Fatalf("frozen message is %d bytes, the v1 form %d: want at most 3/4", len(frozen), v1.Len()+1)
	}
}

func FuzzThaw(f *testing.F) {
	eng, m := freezer(f)
	frozen, err := eng.Freeze(context.Background(), m)
	if err != nil {
		f.Fatal(err)
	}
	plain, _ := json.Marshal(m)
	f.Add(frozen)
	f.Add(frozen[:20])
	f.Add(plain)
	f.Add([]byte{1, 2, 3})
	f.Add([]byte{2, 0x41})
	f.Fuzz(func(t *testing.T, payload []byte) {
		back, err := eng.Thaw(context.Background(), m.MessageID, payload)
		if err != nil {
			return
		}
		// Whatever thaws is a valid message that freezes and thaws again.
		if err := back.Validate(); err != nil {
			t.Fatalf("thawed an invalid message: %v", err)
		}
		again, err := eng.Freeze(context.Background(), back)
		if errors.Is(err, engine.ErrInvalid) && back.DefinitionRef != m.DefinitionRef {
			// A plain message may name a definition the store never had:
			// it thaws (as it was written), and freezing it again, as
			// running it would, says so (the worker dead-letters it).
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if _, err := eng.Thaw(context.Background(), engine.TimerID(back), again); err != nil {
			t.Fatalf("refrozen message does not thaw: %v", err)
		}
	})
}

// BenchmarkFreeze freezes the message of a waiting branch, as a suspend
// does, from all CPUs.
func BenchmarkFreeze(b *testing.B) {
	eng, m := freezer(b)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := eng.Freeze(context.Background(), m); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// TestThawReadsDefinitionOnce: a scheduler thawing and resuming the waits of
// many executions of one workflow reads its definition from the store once,
// not once per timer (issue 33: a round trip per resume).
func TestThawReadsDefinitionOnce(t *testing.T) {
	ctx := context.Background()
	co := coordmem.New(coordmem.Options{})
	t.Cleanup(func() { _ = co.Close() })
	defs := &countingBlobs{Blobs: coordmem.NewBlobs()} // refs_test.go
	newEngine := func() *engine.Engine {
		eng, err := engine.New(engine.Config{Registry: nodes.NewRegistry(nodes.Options{}), Coord: co, Definitions: defs})
		if err != nil {
			t.Fatal(err)
		}
		return eng
	}
	starter, scheduler := newEngine(), newEngine() // two processes
	wf, err := starter.Compile([]byte(waitDef))
	if err != nil {
		t.Fatal(err)
	}
	const n = 20
	frozen := make([][]byte, n)
	ids := make([]string, n)
	for i := range n {
		var f engine.Effects
		if err := starter.Start(ctx, wf, fmt.Sprintf("exec_%d", i), nil, &f); err != nil {
			t.Fatal(err)
		}
		m := f.Next[0].Msg
		if frozen[i], err = starter.Freeze(ctx, m); err != nil {
			t.Fatal(err)
		}
		ids[i] = engine.TimerID(m)
	}
	if got := defs.gets; got != 0 {
		t.Fatalf("starting and freezing read the definition %d times, want 0", got)
	}
	for i := range n {
		m, err := scheduler.Thaw(ctx, ids[i], frozen[i])
		if err != nil {
			t.Fatalf("thaw %d: %v", i, err)
		}
		var f engine.Effects
		if err := scheduler.Resume(ctx, engine.Delivery{}, m, time.Now(), &f); err != nil {
			t.Fatalf("resume %d: %v", i, err)
		}
		if len(f.Next) != 2 {
			t.Fatalf("resume %d: %d successors, want 2", i, len(f.Next))
		}
	}
	// The first thaw and the first compile each read it (the thaw does not
	// compile); every later timer finds it compiled.
	if got := defs.gets; got > 2 {
		t.Errorf("%d thaws and resumes read the definition %d times, want at most 2", n, got)
	}
}
