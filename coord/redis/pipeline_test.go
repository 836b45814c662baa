package redis_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/rune-org/rune/coord"
	"github.com/rune-org/rune/coord/redis"
	"github.com/rune-org/rune/internal/testinfra"
)

// holdFirst holds the first round trip that runs a script until release is
// closed, and counts the round trips that run scripts (not those that set up
// a new connection). With noScript it answers every EVALSHA as Redis does
// when it does not hold the script.
type holdFirst struct {
	// names are the commands whose round trips it holds and counts
	// (default: evalsha, scripts).
	names    []string
	n        atomic.Int64
	noScript atomic.Bool
	armed    chan struct{} // receives once: the next round trip is held
	held     chan struct{} // closed when the held round trip arrived
	release  chan struct{}
}

func newHoldFirst() *holdFirst {
	h := &holdFirst{armed: make(chan struct{}, 1), held: make(chan struct{}), release: make(chan struct{})}
	h.armed <- struct{}{}
	return h
}

// trip counts and holds a round trip of cmds, and says whether to send it.
func (h *holdFirst) trip(cmds ...goredis.Cmder) bool {
	names := h.names
	if names == nil {
		names = []string{"evalsha"}
	}
	if !slices.ContainsFunc(cmds, func(c goredis.Cmder) bool { return slices.Contains(names, c.Name()) }) {
		return true
	}
	h.n.Add(1)
	select {
	case <-h.armed:
		close(h.held)
		<-h.release
	default:
	}
	if !h.noScript.Load() {
		return true
	}
	for _, c := range cmds {
		c.SetErr(refusedError("NOSCRIPT No matching script. Please use EVAL."))
	}
	return false
}

func (h *holdFirst) DialHook(next goredis.DialHook) goredis.DialHook { return next }
func (h *holdFirst) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		if !h.trip(cmd) {
			return cmd.Err()
		}
		return next(ctx, cmd)
	}
}
func (h *holdFirst) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		if !h.trip(cmds...) {
			return cmds[0].Err()
		}
		return next(ctx, cmds)
	}
}

// waitQueued waits until n scripts queue behind the held round trip.
func waitQueued(t *testing.T, c *redis.Coordinator, n int) {
	t.Helper()
	waitQueuedOn(t, c.Queued, n)
}

// waitQueuedOn waits until queued says n calls wait behind the held round
// trip.
func waitQueuedOn(t *testing.T, queued func() int, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for queued() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d calls queued after 20s, want %d", queued(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// callHeldThenQueued runs call(0), whose round trip h holds, then call(1)
// … call(n-1), and waits until queued says those wait behind it; then it
// runs held (when not nil), releases h and waits for every call.
func callHeldThenQueued(t *testing.T, h *holdFirst, n int, queued func() int, held func(), call func(i int)) {
	t.Helper()
	var wg sync.WaitGroup
	wg.Go(func() { call(0) })
	<-h.held
	for i := 1; i < n; i++ {
		wg.Go(func() { call(i) })
	}
	waitQueuedOn(t, queued, n-1)
	if held != nil {
		held()
	}
	close(h.release)
	wg.Wait()
}

// TestPipelineShares: Finish calls made while one round trip is out share
// the next, and each still gets its own outcome.
func TestPipelineShares(t *testing.T) {
	t.Parallel()
	if trips := finishTogether(t, nil); trips != 2 {
		t.Errorf("20 Finish calls took %d round trips, want 2 (the held one, then one pipeline of the rest)", trips)
	}
}

// TestPipelineNoScript: when Redis lost its scripts (a restart) while calls
// queued, each call still runs its script once. Redis's NOSCRIPT replies
// are made by the hook: a SCRIPT FLUSH would reach the other tests' scripts.
func TestPipelineNoScript(t *testing.T) {
	t.Parallel()
	finishTogether(t, func(h *holdFirst) { h.noScript.Store(true) })
}

// finishTogether finishes the 20 messages of an execution, 19 of them
// queued behind the first one's round trip, held until held has run. It
// checks that each gets its own outcome: the last of them, and only it,
// learns that the execution ended, with every message's End. It returns
// the round trips the 20 took.
func finishTogether(t *testing.T, held func(*holdFirst)) int64 {
	ctx := context.Background()
	c, client, _ := newCoord(t, redis.Options{})
	const n = 20
	if err := c.Start(ctx, "e", n+1); err != nil { // warms the script cache too
		t.Fatal(err)
	}
	if _, err := c.Finish(ctx, "e", "warm", coord.Finish{}); err != nil {
		t.Fatal(err)
	}
	h := newHoldFirst()
	client.AddHook(h)

	outcomes := make([]coord.Outcome, n)
	errs := make([]error, n)
	var beforeRelease func()
	if held != nil {
		beforeRelease = func() { held(h) }
	}
	callHeldThenQueued(t, h, n, c.Queued, beforeRelease, func(i int) {
		outcomes[i], errs[i] = c.Finish(ctx, "e", fmt.Sprint("m", i), coord.Finish{End: map[string]any{fmt.Sprint("$", i): float64(i)}})
	})

	last := 0
	for i, o := range outcomes {
		if errs[i] != nil {
			t.Fatalf("Finish m%d: %v", i, errs[i])
		}
		if o.Case != coord.Recorded {
			t.Errorf("Finish m%d: %v on its first Finish, want recorded", i, o)
		}
		if o.Last() {
			last++
			if len(o.Completion.FinalContext) != n {
				t.Errorf("the last Finish's final context has %d keys, want %d", len(o.Completion.FinalContext), n)
			}
		}
	}
	if last != 1 {
		t.Fatalf("%d Finish calls learned the end, want 1", last)
	}
	return h.n.Load()
}

// TestPipelineCancelQueued: a call whose context ends while it waits in the
// queue returns the context's error and its script never runs; the calls
// around it are not disturbed.
func TestPipelineCancelQueued(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, client, _ := newCoord(t, redis.Options{})
	if err := c.Start(ctx, "e", 3); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Finish(ctx, "e", "warm", coord.Finish{Spawned: 1}); err != nil {
		t.Fatal(err)
	}
	h := newHoldFirst()
	client.AddHook(h)

	var wg sync.WaitGroup
	var firstErr, thirdErr error
	wg.Add(1)
	go func() { defer wg.Done(); _, firstErr = c.Finish(ctx, "e", "first", coord.Finish{}) }()
	<-h.held
	cctx, cancel := context.WithCancel(ctx)
	canceled := make(chan error, 1)
	go func() { _, err := c.Finish(cctx, "e", "canceled", coord.Finish{}); canceled <- err }()
	waitQueued(t, c, 1)
	wg.Add(1)
	go func() { defer wg.Done(); _, thirdErr = c.Finish(ctx, "e", "third", coord.Finish{}) }()
	waitQueued(t, c, 2)
	cancel()
	if err := <-canceled; !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled Finish: %v, want context.Canceled", err)
	}
	waitQueued(t, c, 1)
	close(h.release)
	wg.Wait()
	if firstErr != nil || thirdErr != nil {
		t.Fatalf("the calls around the canceled one: %v, %v", firstErr, thirdErr)
	}
	if b, err := c.Begin(ctx, "e", "canceled"); err != nil || b.State != coord.Run {
		t.Fatalf("Begin of the canceled message: %v, %v; want run (its Finish never ran)", b.State, err)
	}
}

// TestPausedSharesRoundTrips: the pause checks that concurrent nodes make
// (one per node) share round trips with each other, and each still gets its
// own execution's answer (issue 33).
func TestPausedSharesRoundTrips(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, client, _ := newCoord(t, redis.Options{})
	const n = 20
	for i := 0; i < n; i += 2 { // even executions paused
		if err := c.SetPaused(ctx, fmt.Sprint("e", i), true); err != nil {
			t.Fatal(err)
		}
	}
	h := newHoldFirst()
	h.names = []string{"exists", "evalsha"}
	client.AddHook(h)

	got := make([]bool, n)
	errs := make([]error, n)
	callHeldThenQueued(t, h, n, c.Queued, nil, func(i int) {
		got[i], errs[i] = c.Paused(ctx, fmt.Sprint("e", i))
	})
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("Paused e%d: %v", i, errs[i])
		}
		if want := i%2 == 0; got[i] != want {
			t.Errorf("Paused e%d = %v, want %v", i, got[i], want)
		}
	}
	if trips := h.n.Load(); trips != 2 {
		t.Errorf("%d pause checks took %d round trips, want 2 (the held one, then one pipeline of the rest)", n, trips)
	}
}

// TestTimersShareRoundTrips: the fences (Extend) and removals (Done) that
// a scheduler makes for the many timers it resumes at once, and the new
// timers of suspending waits (Schedule), share round trips, and each keeps
// its own outcome: a fence of a timer claimed again reports it lost, a Done
// removes only its timer, a Schedule adds its own (issue 33).
func TestTimersShareRoundTrips(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ts, client, _ := newTimers(t)
	const n = 20
	now := time.Now()
	for i := range n {
		if err := ts.Schedule(ctx, fmt.Sprint("t", i), now.Add(-time.Second), []byte("p")); err != nil {
			t.Fatal(err)
		}
	}
	claimed, err := ts.Claim(ctx, now, n, time.Minute)
	if err != nil || len(claimed) != n {
		t.Fatalf("Claim: %d timers, %v; want %d", len(claimed), err, n)
	}
	// Warm Redis's script cache: a NOSCRIPT would be retried alone.
	if _, err := ts.Extend(ctx, now, time.Minute, claimed[0]); err != nil {
		t.Fatal(err)
	}
	if err := ts.Done(ctx, "unknown"); err != nil {
		t.Fatal(err)
	}
	const scheduled = 4 // and as many new timers, t20 to t23
	h := newHoldFirst()
	client.AddHook(h)

	// Even timers are fenced (odd ones under a stale claim count, as a
	// scheduler that stalled past its lease holds them); the rest are done.
	lost := make([][]string, n)
	errs := make([]error, n+scheduled)
	callHeldThenQueued(t, h, n+scheduled, ts.Queued, nil, func(i int) {
		if i >= n {
			errs[i] = ts.Schedule(ctx, fmt.Sprint("t", i), now.Add(time.Hour), []byte("p"))
			return
		}
		tm := claimed[i]
		switch i % 4 {
		case 0:
			lost[i], errs[i] = ts.Extend(ctx, now, time.Minute, tm)
		case 2:
			tm.Claims++
			lost[i], errs[i] = ts.Extend(ctx, now, time.Minute, tm)
		default:
			errs[i] = ts.Done(ctx, tm.ID)
		}
	})
	for i := range n + scheduled {
		if errs[i] != nil {
			t.Fatalf("timer t%d: %v", i, errs[i])
		}
		if i >= n {
			continue
		}
		switch i % 4 {
		case 0:
			if len(lost[i]) != 0 {
				t.Errorf("Extend t%d under its claim: lost %v, want none", i, lost[i])
			}
		case 2:
			if !slices.Equal(lost[i], []string{claimed[i].ID}) {
				t.Errorf("Extend t%d under a stale claim: lost %v, want [%s]", i, lost[i], claimed[i].ID)
			}
		}
	}
	if trips := h.n.Load(); trips != 2 {
		t.Errorf("%d fences, removals and new timers took %d round trips, want 2 (the held one, then one pipeline of the rest)", n+scheduled, trips)
	}
	st, err := ts.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Claimed != n/2 || st.Scheduled != scheduled {
		t.Errorf("after %d Done and %d Schedule: %d claimed, %d scheduled; want %d claimed (the fenced ones), %d scheduled", n/2, scheduled, st.Claimed, st.Scheduled, n/2, scheduled)
	}
}

// TestBlobsReleaseSharesRoundTrips: the Releases of executions completing
// at once share round trips, and each deletes its own execution's blobs
// only (issue 33).
func TestBlobsReleaseSharesRoundTrips(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	prefix := testinfra.Name(t)
	client := newClient(t, prefix)
	b := redis.NewBlobs(client, redis.BlobOptions{Prefix: prefix})
	const n = 10
	refs := make([]string, n+1)
	for i := range n + 1 { // e10 is not released
		var err error
		if refs[i], err = b.Put(ctx, fmt.Sprint("e", i), []byte(fmt.Sprint("value ", i))); err != nil {
			t.Fatal(err)
		}
	}
	h := newHoldFirst()
	h.names = []string{"del"}
	client.AddHook(h)

	errs := make([]error, n)
	callHeldThenQueued(t, h, n, b.Queued, nil, func(i int) {
		errs[i] = b.Release(ctx, fmt.Sprint("e", i))
	})
	for i := range n + 1 {
		if i < n && errs[i] != nil {
			t.Fatalf("Release e%d: %v", i, errs[i])
		}
		_, err := b.Get(ctx, fmt.Sprint("e", i), refs[i])
		if released := errors.Is(err, coord.ErrBlobNotFound); released != (i < n) {
			t.Errorf("Get e%d after the Releases: %v; want released %v", i, err, i < n)
		}
	}
	if trips := h.n.Load(); trips != 2 {
		t.Errorf("%d Release calls took %d round trips, want 2 (the held one, then one pipeline of the rest)", n, trips)
	}
}
