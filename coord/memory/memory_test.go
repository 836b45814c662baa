package memory_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rune-org/rune/coord"
	"github.com/rune-org/rune/coord/coordtest"
	"github.com/rune-org/rune/coord/memory"
)

func newCoord(t testing.TB, opts memory.Options) *memory.Coordinator {
	c := memory.New(opts)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestConformance(t *testing.T) {
	coordtest.Run(t, func(t *testing.T) coord.Coordinator { return newCoord(t, memory.Options{}) })
}

// TestRetain: an ended execution's state is dropped after Retain, and only
// then.
func TestRetain(t *testing.T) {
	t.Parallel()
	const retain = 50 * time.Millisecond
	ctx := context.Background()
	c := newCoord(t, memory.Options{Retain: retain})
	if err := c.Start(ctx, "e", 1); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx, "live", 1); err != nil {
		t.Fatal(err)
	}
	ending := time.Now() // the execution ends after this
	if o, err := c.Finish(ctx, "e", "a", coord.Finish{Record: coord.Bytes("r")}); err != nil || !o.Last() {
		t.Fatalf("Finish: %+v, %v; want Last", o, err)
	}
	if b, _ := c.Begin(ctx, "e", "a"); b.State != coord.Replay {
		t.Fatalf("Begin right after the end: %v, want replay", b.State)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, err := c.Begin(ctx, "e", "a")
		if err != nil {
			t.Fatal(err)
		}
		if b.State == coord.Drop {
			if kept := time.Since(ending); kept < retain {
				t.Fatalf("ended execution dropped %v after it ended, before Retain (%v)", kept, retain)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ended execution still kept after 5s with Retain 50ms")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := c.Finish(ctx, "e", "a", coord.Finish{}); !errors.Is(err, coord.ErrUnknownExecution) {
		t.Fatalf("Finish after Retain: %v, want ErrUnknownExecution", err)
	}
	// A live execution is never dropped.
	if b, _ := c.Begin(ctx, "live", "x"); b.State != coord.Run {
		t.Fatalf("live execution: Begin %v, want run", b.State)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// BenchmarkBeginFinish: a Begin and a Finish from GOMAXPROCS goroutines.
func BenchmarkBeginFinish(b *testing.B) {
	coordtest.BenchBeginFinish(b, newCoord(b, memory.Options{}), 1)
}
