package memory

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rune-org/rune/coord"
	"github.com/rune-org/rune/coord/coordtest"
)

func TestBarriersConformance(t *testing.T) {
	coordtest.RunBarriers(t, func(t *testing.T) coord.Barriers { return NewBarriers() })
}

func TestBlobsConformance(t *testing.T) {
	coordtest.RunBlobs(t, func(t *testing.T) coord.Blobs { return NewBlobs() })
}

// TestBarrierExpiry: a completed barrier keeps its values for BarrierRetain
// and its closed marker for the TTL; an open one goes after its TTL without
// arrivals, which each arrival refreshes.
func TestBarrierExpiry(t *testing.T) {
	ctx := context.Background()
	bs := NewBarriers()
	now := time.Unix(1_000_000, 0)
	bs.now = func() time.Time { return now }
	const ttl = time.Hour
	spec := coord.BarrierSpec{Total: 2, Need: 1, TTL: ttl}

	if a, err := bs.Arrive(ctx, "e", "done", spec, 0, []byte("v")); err != nil || !a.Complete {
		t.Fatalf("Arrive: %+v, %v; want Complete", a, err)
	}
	open := coord.BarrierSpec{Total: 2, Need: 2, TTL: ttl}
	if _, err := bs.Arrive(ctx, "e", "open", open, 0, []byte("a")); err != nil {
		t.Fatal(err)
	}

	now = now.Add(BarrierRetain - time.Second)
	if a, err := bs.Arrive(ctx, "e", "done", spec, 0, nil); err != nil || !a.Complete || !a.Duplicate {
		t.Fatalf("winner's repeat within BarrierRetain: %+v, %v; want a complete Duplicate", a, err)
	}
	now = now.Add(2 * time.Second)
	if _, err := bs.Arrive(ctx, "e", "done", spec, 0, nil); !errors.Is(err, coord.ErrBarrierClosed) {
		t.Fatalf("winner's repeat after BarrierRetain: %v, want ErrBarrierClosed", err)
	}
	// The open barrier got an arrival just now (refreshing its TTL) ...
	if a, err := bs.Arrive(ctx, "e", "open", open, 0, []byte("a")); err != nil || !a.Duplicate {
		t.Fatalf("repeat on the open barrier: %+v, %v; want Duplicate", a, err)
	}
	now = now.Add(ttl - BarrierRetain - time.Minute)
	if _, err := bs.Arrive(ctx, "e", "done", spec, 1, nil); !errors.Is(err, coord.ErrBarrierClosed) {
		t.Fatalf("late arrival within the TTL: %v, want ErrBarrierClosed", err)
	}
	now = now.Add(BarrierRetain)
	if a, err := bs.Arrive(ctx, "e", "open", open, 0, []byte("a")); err != nil || !a.Duplicate || a.Arrived != 1 {
		t.Fatalf("open barrier within its refreshed TTL: %+v, %v; want Duplicate with Arrived 1", a, err)
	}
	// ... and is dropped a TTL after its last one, as the closed marker is
	// after its closing.
	now = now.Add(ttl + time.Second)
	bs.mu.Lock()
	bs.expire(now)
	n, heapLen := len(bs.bars), len(bs.exp)
	bs.mu.Unlock()
	if n != 0 || heapLen != 0 {
		t.Fatalf("after the TTL: %d barriers and %d heap entries left, want none", n, heapLen)
	}
}

// BenchmarkArrive: coordtest.BenchArrive from GOMAXPROCS goroutines.
func BenchmarkArrive(b *testing.B) {
	coordtest.BenchArrive(b, NewBarriers(), 1)
}
