package embedded_test

import (
	"testing"

	"github.com/rune-org/rune/embedded"
	"github.com/rune-org/rune/runtimetest"
)

func TestRuntimeConformance(t *testing.T) {
	runtimetest.Run(t, func(t *testing.T) runtimetest.Runtime {
		rt, err := embedded.New(embedded.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rt.Close() })
		return rt
	})
}

func TestDuplicateAggregatorArrival(t *testing.T) {
	rt, err := embedded.New(embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	runtimetest.DuplicateArrival(t, rt.Engine, "exec_dup")
}

func TestRetrySpacing(t *testing.T) {
	rt, err := embedded.New(embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	runtimetest.RetrySpacing(t, rt)
}

func TestHaltFromOutside(t *testing.T) {
	t.Parallel()
	rt, err := embedded.New(embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	runtimetest.HaltFromOutside(t, rt, rt.Engine)
}
