package bench_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rune-org/rune/broker"
	"github.com/rune-org/rune/internal/bench"
)

// startGate holds the first wave of execution publishes (the starts) until
// want of them are waiting at once and no further one has come for a quiet
// window, and records how many were ever in Publish at once.
type startGate struct {
	broker.Broker
	want int

	mu       sync.Mutex
	cur, max int
	fill     sync.Once
	full     chan struct{} // closed when want starts are waiting
	open     chan struct{} // closed when the first wave may go
}

// gateQuiet is how long the gate waits, once want starts are held, for a
// start beyond want to show itself. An absence has no event to wait on.
const gateQuiet = 300 * time.Millisecond

func newStartGate(b broker.Broker, want int) *startGate {
	g := &startGate{Broker: b, want: want, full: make(chan struct{}), open: make(chan struct{})}
	go func() {
		select {
		case <-g.full:
			time.Sleep(gateQuiet)
		case <-time.After(time.Minute): // fewer starters than want: let the test fail on the count
		}
		close(g.open)
	}()
	return g
}

func (g *startGate) Publish(ctx context.Context, msgs ...broker.Message) broker.Pending {
	if !slices.ContainsFunc(msgs, func(m broker.Message) bool { return m.Topic == broker.Execution }) {
		return g.Broker.Publish(ctx, msgs...)
	}
	g.mu.Lock()
	g.cur++
	g.max = max(g.max, g.cur)
	if g.cur == g.want {
		g.fill.Do(func() { close(g.full) })
	}
	g.mu.Unlock()
	<-g.open
	p := g.Broker.Publish(ctx, msgs...)
	g.mu.Lock()
	g.cur--
	g.mu.Unlock()
	return p
}

// RunWatching starts Config.Starters executions at once, no more, and
// still measures every execution and node.
func TestRunWatchingStarters(t *testing.T) {
	b, e := inProcess(t)
	wf, err := e.Compile(bench.LinearWorkflow(3))
	if err != nil {
		t.Fatal(err)
	}
	const n, starters = 40, 4
	g := newStartGate(b, starters)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := bench.RunWatching(ctx, g, e, wf, bench.Config{Executions: n, InFlight: 2 * starters, Starters: starters})
	if err != nil {
		t.Fatal(err)
	}
	g.mu.Lock()
	most := g.max
	g.mu.Unlock()
	if most != starters || res.Starters != starters {
		t.Errorf("%d starts at once (reported %d); want %d", most, res.Starters, starters)
	}
	if res.Executions != n || res.Failed != 0 || res.NodeExecutions != 3*n {
		t.Errorf("%d executions (%d failed), %d node executions; want %d, 0, %d", res.Executions, res.Failed, res.NodeExecutions, n, 3*n)
	}
}

// Starters defaults to DefaultStarters and never exceeds InFlight.
func TestRunWatchingStartersBoundedByInFlight(t *testing.T) {
	b, e := inProcess(t)
	wf, err := e.Compile(bench.LinearWorkflow(2))
	if err != nil {
		t.Fatal(err)
	}
	res, err := bench.RunWatching(context.Background(), b, e, wf, bench.Config{Executions: 10, InFlight: 3})
	if err != nil {
		t.Fatal(err)
	}
	if res.Starters != 3 || res.Executions != 10 {
		t.Errorf("starters %d, executions %d; want 3 (InFlight) and 10", res.Starters, res.Executions)
	}
}
