// Package memory is the in-process coord.Coordinator of the embedded runtime:
// per-execution state in sharded maps, each execution behind its own mutex.
//
// It sits on the hot path (one Begin and one Finish per node execution), so
// it stores Records and End values as given, without encoding or copying:
// callers must not modify them after the call.
//
// An ended execution's state (every finished id and its Record) is kept for
// Options.Retain, then dropped by one janitor goroutine. An execution that
// never ends is kept for the life of the process: unlike Redis there is no
// TTL, since in process no message can be lost.
package memory

import (
	"context"
	"fmt"
	"hash/maphash"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/rune-org/rune/coord"
	"github.com/rune-org/rune/message"
)

// Options configures a Coordinator. The zero value is usable.
type Options struct {
	// Retain is how long an ended execution's state is kept, so that
	// redeliveries still Replay and duplicate Finishes still see the
	// Outcome. Default 10 minutes.
	Retain time.Duration
}

// DefaultRetain is Options.Retain's default.
const DefaultRetain = 10 * time.Minute

// shardCount spreads the execution index over several locks so that workers
// running different executions rarely contend.
const shardCount = 64

// Coordinator implements coord.Coordinator in process. Create it with New and
// stop it with Close.
type Coordinator struct {
	retain time.Duration
	seed   maphash.Seed
	shards [shardCount]shard

	// ended lists executions in the order they ended; with one Retain for
	// all, it is also the order in which they expire, so the janitor only
	// looks at its front.
	endedMu sync.Mutex
	ended   []endedExec

	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once

	// pauses are the executions paused through the API (pause.go).
	pauses pauses
}

type shard struct {
	mu    sync.RWMutex
	execs map[string]*execution
}

type endedExec struct {
	exec string
	at   time.Time
	e    *execution
}

// execution is the state of one execution, guarded by mu.
type execution struct {
	mu   sync.Mutex
	live int
	// finished maps each finished message id to its Record.
	finished map[string]coord.Record
	halt     *message.Failure
	ctx      map[string]any
	// last is the id whose Finish ended the execution; "" while live.
	last string
	// parked are the ids Park recorded and Finish has not forgotten.
	parked map[string]bool
	// published is set once the completion is out (Published).
	published bool
}

var _ coord.Coordinator = (*Coordinator)(nil)

// New returns a Coordinator and starts its janitor, which drops ended
// executions after opts.Retain. Call Close to stop it.
func New(opts Options) *Coordinator {
	if opts.Retain < 0 {
		panic(fmt.Sprintf("coord/memory: Options.Retain is negative (%v)", opts.Retain))
	}
	if opts.Retain == 0 {
		opts.Retain = DefaultRetain
	}
	c := &Coordinator{
		retain: opts.Retain,
		seed:   maphash.MakeSeed(),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	for i := range c.shards {
		c.shards[i].execs = make(map[string]*execution)
	}
	go c.janitor()
	return c
}

// Close stops the janitor. The Coordinator keeps working, but ended
// executions are no longer dropped. Close is idempotent.
func (c *Coordinator) Close() error {
	c.closeOnce.Do(func() {
		close(c.stop)
		<-c.done
	})
	return nil
}

func (c *Coordinator) shard(exec string) *shard {
	return &c.shards[maphash.String(c.seed, exec)%shardCount]
}

func (c *Coordinator) lookup(exec string) *execution {
	s := c.shard(exec)
	s.mu.RLock()
	e := s.execs[exec]
	s.mu.RUnlock()
	return e
}

// Start implements coord.Coordinator.
func (c *Coordinator) Start(_ context.Context, exec string, n int) error {
	if exec == "" {
		return fmt.Errorf("coord/memory: Start: empty execution id")
	}
	if n < 1 {
		return fmt.Errorf("coord/memory: Start exec %q: n is %d, want at least 1", exec, n)
	}
	s := c.shard(exec)
	s.mu.Lock()
	if _, ok := s.execs[exec]; !ok {
		s.execs[exec] = &execution{live: n, finished: make(map[string]coord.Record, n)}
	}
	s.mu.Unlock()
	return nil
}

// Begin implements coord.Coordinator.
func (c *Coordinator) Begin(_ context.Context, exec, id string) (coord.Begin, error) {
	e := c.lookup(exec)
	if e == nil {
		return coord.Begin{State: coord.Drop}, nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if rec, ok := e.finished[id]; ok {
		b, err := replay(exec, id, rec)
		return coord.Begin{State: coord.Replay, Record: b}, err
	}
	if e.halt != nil || e.live <= 0 {
		return coord.Begin{State: coord.Drop}, nil
	}
	return coord.Begin{State: coord.Run}, nil
}

// Park implements coord.Coordinator. A live execution's state here never
// expires, so due changes nothing.
func (c *Coordinator) Park(_ context.Context, exec, id string, _ time.Time) (bool, error) {
	e := c.lookup(exec)
	if e == nil {
		return true, nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.halt != nil || e.live <= 0 {
		return true, nil
	}
	if e.parked == nil {
		e.parked = map[string]bool{}
	}
	e.parked[id] = true
	return false, nil
}

// Parked implements coord.Coordinator.
func (c *Coordinator) Parked(_ context.Context, exec string) ([]string, error) {
	e := c.lookup(exec)
	if e == nil {
		return nil, nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Collect(maps.Keys(e.parked)), nil
}

// Published implements coord.Coordinator.
func (c *Coordinator) Published(_ context.Context, exec string) error {
	e := c.lookup(exec)
	if e == nil {
		return nil
	}
	e.mu.Lock()
	if e.last != "" {
		e.published = true
	}
	e.mu.Unlock()
	return nil
}

// replay is the record of a message that finished before, encoded only
// now.
func replay(exec, id string, rec coord.Record) ([]byte, error) {
	if rec == nil {
		return nil, nil
	}
	b, err := rec.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("coord/memory: exec %q id %q: encode record: %w", exec, id, err)
	}
	return b, nil
}

// Finish implements coord.Coordinator.
func (c *Coordinator) Finish(_ context.Context, exec, id string, f coord.Finish) (coord.Outcome, error) {
	if f.Spawned < 0 {
		return coord.Outcome{}, fmt.Errorf("coord/memory: Finish exec %q id %q: Spawned is %d, want at least 0", exec, id, f.Spawned)
	}
	e := c.lookup(exec)
	if e == nil {
		return coord.Outcome{}, fmt.Errorf("coord/memory: Finish exec %q id %q: %w", exec, id, coord.ErrUnknownExecution)
	}
	e.mu.Lock()
	if rec, ok := e.finished[id]; ok && f.Mode.Optimistic() {
		e.mu.Unlock()
		b, err := replay(exec, id, rec)
		if err != nil {
			return coord.Outcome{}, err
		}
		return coord.Outcome{Case: coord.Replayed, Record: b}, nil
	}
	if _, ok := e.finished[id]; ok {
		o := coord.Outcome{Case: coord.Duplicate}
		if e.published {
			o.Case = coord.DuplicatePublished
		}
		if e.last == id {
			o.Completion = e.completion()
		}
		e.mu.Unlock()
		return o, nil
	}
	if e.live <= 0 {
		e.mu.Unlock()
		return coord.Outcome{}, fmt.Errorf("coord/memory: Finish exec %q id %q: execution has ended: %w", exec, id, coord.ErrUnknownExecution)
	}
	if f.Mode.Optimistic() && e.halt != nil {
		e.mu.Unlock()
		return coord.Outcome{Case: coord.Dropped}, nil
	}
	if f.Mode.IfLast() && e.live+f.Spawned-1 > 0 {
		e.mu.Unlock()
		return coord.Outcome{Case: coord.NotLast}, nil
	}
	e.finished[id] = f.Record
	delete(e.parked, id)
	if f.Halt != nil && e.halt == nil {
		e.halt = f.Halt
	}
	if len(f.End) > 0 {
		if e.ctx == nil {
			e.ctx = make(map[string]any, len(f.End))
		}
		maps.Copy(e.ctx, f.End)
	}
	e.live += f.Spawned - 1
	if e.live > 0 {
		e.mu.Unlock()
		return coord.Outcome{}, nil
	}
	e.last = id
	o := coord.Outcome{Case: coord.Recorded, Completion: e.completion()}
	e.mu.Unlock()

	c.endedMu.Lock()
	c.ended = append(c.ended, endedExec{exec: exec, at: time.Now(), e: e})
	c.endedMu.Unlock()
	return o, nil
}

// completion is how an ended execution ended; e.mu is held.
func (e *execution) completion() *coord.Completion {
	c := &coord.Completion{Status: message.CompletionCompleted}
	if e.halt != nil {
		c.Status = message.CompletionHalted
		c.Failure = e.halt
	}
	// A fresh top-level map: the caller owns FinalContext.
	c.FinalContext = make(map[string]any, len(e.ctx))
	maps.Copy(c.FinalContext, e.ctx)
	return c
}

// janitor drops ended executions once they are older than Retain.
func (c *Coordinator) janitor() {
	defer close(c.done)
	interval := min(max(c.retain/4, 10*time.Millisecond), time.Minute)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-c.stop:
			return
		case now := <-tick.C:
			c.expire(now)
		}
	}
}

// expire drops the executions that ended before now - Retain.
func (c *Coordinator) expire(now time.Time) {
	c.endedMu.Lock()
	n := 0
	for n < len(c.ended) && now.Sub(c.ended[n].at) >= c.retain {
		n++
	}
	if n == 0 {
		c.endedMu.Unlock()
		return
	}
	expired := c.ended[:n:n]
	// Move the rest to a new array so the old one, and the expired entries'
	// state, can be collected.
	c.ended = append([]endedExec(nil), c.ended[n:]...)
	c.endedMu.Unlock()

	for _, x := range expired {
		s := c.shard(x.exec)
		s.mu.Lock()
		// Only the execution that ended: never one started anew since.
		if s.execs[x.exec] == x.e {
			delete(s.execs, x.exec)
		}
		s.mu.Unlock()
	}
}
