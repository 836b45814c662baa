package embedded_test

import (
	"testing"

	"github.com/rune-org/rune/embedded"
	"github.com/rune-org/rune/runtimetest"
)

// wait_for_event on the embedded runtime, in memory and durable (issue 34).

func memoryRuntime(t *testing.T) *embedded.Runtime {
	rt, err := embedded.New(embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	return rt
}

func TestEventsAmongWaiting(t *testing.T) {
	t.Parallel()
	rt := memoryRuntime(t)
	runtimetest.EventsAmongWaiting(t, rt, rt.Engine, 1000)
}

func TestEventBeforeWait(t *testing.T) {
	t.Parallel()
	rt := memoryRuntime(t)
	runtimetest.EventBeforeWait(t, rt, rt.Engine)
}

func TestEventTimeout(t *testing.T) {
	t.Parallel()
	rt := memoryRuntime(t)
	runtimetest.EventTimeout(t, rt, rt.Engine)
}

func TestDurableEventsAmongWaiting(t *testing.T) {
	t.Parallel()
	rt := durable(t, embedded.Options{})
	runtimetest.EventsAmongWaiting(t, rt, rt.Engine, 1000)
}

func TestDurableEventBeforeWait(t *testing.T) {
	t.Parallel()
	rt := durable(t, embedded.Options{})
	runtimetest.EventBeforeWait(t, rt, rt.Engine)
}

func TestDurableEventTimeout(t *testing.T) {
	t.Parallel()
	rt := durable(t, embedded.Options{})
	runtimetest.EventTimeout(t, rt, rt.Engine)
}

// The digest node (issue 36), in memory and durable.

func TestDigests(t *testing.T) {
	t.Parallel()
	runtimetest.Digests(t, memoryRuntime(t))
}

func TestDurableDigests(t *testing.T) {
	t.Parallel()
	runtimetest.Digests(t, durable(t, embedded.Options{}))
}
