package coordtest

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/rune-org/rune/coord"
	"github.com/rune-org/rune/coord/memory"
)

// neverDuplicate is a faulty barrier store: it never flags a repeated
// arrival as Duplicate.
type neverDuplicate struct{ coord.Barriers }

func (b neverDuplicate) Arrive(ctx context.Context, exec, key string, spec coord.BarrierSpec, slot int, value []byte) (coord.Arrival, error) {
	a, err := b.Barriers.Arrive(ctx, exec, key, spec, slot, value)
	a.Duplicate = false
	return a, err
}

// The concurrent aggregator test, run on a faulty store, reports its
// hundreds of errors from 50 goroutines and fails: it must not hang until
// CI's timeout (as it did when they went into a 50-slot channel under a
// lock). Run in a child process, which is expected to fail.
func TestConcurrentErrorsFailNotHang(t *testing.T) {
	if os.Getenv("RUNE_COORDTEST_FAULTY") == "1" {
		testAggregatorConcurrent(t, neverDuplicate{memory.NewBarriers()})
		return
	}
	ctx, cancel := context.WithTimeout(t.Context(), 120*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestConcurrentErrorsFailNotHang$", "-test.timeout=60s")
	cmd.Env = append(os.Environ(), "RUNE_COORDTEST_FAULTY=1")
	out, err := cmd.CombinedOutput()
	switch {
	case err == nil:
		t.Fatalf("the test passed on a store that never flags a duplicate:\n%s", out)
	case ctx.Err() != nil || strings.Contains(string(out), "test timed out"):
		t.Fatalf("the test hung on a store that never flags a duplicate:\n%.2000s", out)
	case !strings.Contains(string(out), "want Duplicate") || !strings.Contains(string(out), " error(s)"):
		t.Fatalf("the test failed without naming the missing Duplicate flags:\n%.2000s", out)
	}
}
