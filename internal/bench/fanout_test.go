package bench_test

import (
	"context"
	"testing"

	"github.com/rune-org/rune/embedded"
	"github.com/rune-org/rune/internal/bench"
)

func TestFanoutSmall(t *testing.T) {
	rt, err := embedded.New(embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	res, err := bench.Fanout(context.Background(), rt.Broker, rt.Engine, bench.FanoutConfig{Items: 20000})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != "completed" {
		t.Fatalf("status %s", res.Status)
	}
	// A branch carries a reference to the array, not the array (20,000
	// items are over 200 KB).
	if res.BranchBytes <= 0 || res.BranchBytes > 4096 {
		t.Fatalf("branch message is %d bytes", res.BranchBytes)
	}
}
