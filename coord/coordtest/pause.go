package coordtest

import (
	"context"
	"testing"

	"github.com/rune-org/rune/coord"
)

// testPauses checks coord.Pauses: a flag per execution, set and cleared
// idempotently, independent of the execution's accounting, one
// execution's flag leaving the others alone.
func testPauses(t *testing.T, c coord.Coordinator) {
	p, ok := c.(coord.Pauses)
	if !ok {
		t.Fatalf("%T does not implement coord.Pauses", c)
	}
	ctx := context.Background()
	paused := func(exec string, want bool) {
		t.Helper()
		got, err := p.Paused(ctx, exec)
		if err != nil || got != want {
			t.Fatalf("Paused(%s) = %v, %v; want %v", exec, got, err, want)
		}
	}
	paused("p1", false)
	// Before the execution starts: a pause may come before its first node.
	if err := p.SetPaused(ctx, "p1", true); err != nil {
		t.Fatal(err)
	}
	if err := p.SetPaused(ctx, "p1", true); err != nil {
		t.Fatal(err)
	}
	paused("p1", true)
	paused("p2", false)
	if err := c.Start(ctx, "p1", 1); err != nil {
		t.Fatal(err)
	}
	paused("p1", true)
	if b, err := c.Begin(ctx, "p1", "m1"); err != nil || b.State != coord.Run {
		t.Fatalf("Begin of a paused execution = %v, %v; want run (the engine parks it)", b.State, err)
	}
	if err := p.SetPaused(ctx, "p2", true); err != nil {
		t.Fatal(err)
	}
	if err := p.SetPaused(ctx, "p1", false); err != nil {
		t.Fatal(err)
	}
	if err := p.SetPaused(ctx, "p1", false); err != nil {
		t.Fatal(err)
	}
	paused("p1", false)
	paused("p2", true)
}
