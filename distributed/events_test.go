package distributed_test

import (
	"testing"

	"github.com/rune-org/rune/runtimetest"
)

// wait_for_event on RabbitMQ and Redis (issue 34).

func TestEventsAmongWaiting(t *testing.T) {
	t.Parallel()
	rt := newRuntime(t).(runtime)
	runtimetest.EventsAmongWaiting(t, rt, rt.rt.Engine, 1000)
}

func TestEventBeforeWait(t *testing.T) {
	t.Parallel()
	rt := newRuntime(t).(runtime)
	runtimetest.EventBeforeWait(t, rt, rt.rt.Engine)
}

func TestEventTimeout(t *testing.T) {
	t.Parallel()
	rt := newRuntime(t).(runtime)
	runtimetest.EventTimeout(t, rt, rt.rt.Engine)
}

// The digest node on RabbitMQ and Redis (issue 36).
func TestDigests(t *testing.T) {
	t.Parallel()
	runtimetest.Digests(t, newRuntime(t))
}
