package redis_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/rune-org/rune/coord"
	"github.com/rune-org/rune/coord/coordtest"
	coordmem "github.com/rune-org/rune/coord/memory"
	"github.com/rune-org/rune/coord/redis"
	"github.com/rune-org/rune/internal/testinfra"
)

// newTimers returns Timers under a prefix of their own, their client and the
// prefix.
func newTimers(t testing.TB) (*redis.Timers, *goredis.Client, string) {
	t.Helper()
	prefix := testinfra.Name(t)
	client := newClient(t, prefix)
	return redis.NewTimers(client, redis.TimerOptions{Prefix: prefix}), client, prefix
}

// TestTimersConformance runs the suite with the real bucket count and with
// 16 buckets, where every timer shares its bucket with others (and the
// 10,000-timer cases put 600 in each).
func TestTimersConformance(t *testing.T) {
	t.Run("buckets=32768", func(t *testing.T) {
		coordtest.RunTimers(t, func(t *testing.T) coord.Timers {
			ts, _, _ := newTimers(t)
			return ts
		})
	})
	t.Run("buckets=16", func(t *testing.T) {
		coordtest.RunTimers(t, func(t *testing.T) coord.Timers {
			prefix := testinfra.Name(t)
			return redis.NewTimersBuckets(newClient(t, prefix), redis.TimerOptions{Prefix: prefix}, 16)
		})
	})
}

// TestTimersKeys: every key carries the {timers} hash tag, so the scripts
// are Cluster-safe; the key names are the documented ones; a waiting timer
// has no leases or payloads entry, nothing writes the schedule of earlier
// versions, and Done leaves no key behind.
func TestTimersKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ts, client, prefix := newTimers(t)
	var want []string
	for _, k := range []string{"schedule", "claimed", "payloads", "leases", "buckets", "due", "waiting"} {
		want = append(want, prefix+":{timers}:"+k)
	}
	if got := ts.Keys(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Keys() = %v, want %v", got, want)
	}
	base := time.UnixMilli(1_760_000_000_000)
	for _, id := range []string{"a", "b", "c"} {
		if err := ts.Schedule(ctx, id, base, []byte(id)); err != nil {
			t.Fatal(err)
		}
	}
	if n := client.HLen(ctx, want[3]).Val() + client.HLen(ctx, want[2]).Val(); n != 0 {
		t.Fatalf("leases and payloads hold %d entries with no timer claimed, want 0", n)
	}
	if n := client.Get(ctx, want[6]).Val(); n != "3" {
		t.Fatalf("waiting count %q, want 3", n)
	}
	if _, err := ts.Claim(ctx, base, 2, time.Minute); err != nil {
		t.Fatal(err)
	}
	keys := client.Keys(ctx, prefix+":*").Val()
	if len(keys) != 6 || slices.Contains(keys, want[0]) {
		t.Fatalf("keys %v, want the 6 of %v but the schedule", keys, want)
	}
	for _, k := range keys {
		if tag := hashTag(k); tag != "timers" {
			t.Errorf("key %q has hash tag %q, want %q", k, tag, "timers")
		}
		if ttl := client.PTTL(ctx, k).Val(); ttl != -1 {
			t.Errorf("key %q has TTL %v, want none: timers wait for days", k, ttl)
		}
	}
	if l := client.HGet(ctx, want[3], "a").Val(); l != "1760000000000:1" {
		t.Errorf("leases entry of a: %q, want %q", l, "1760000000000:1")
	}
	doneAll(t, ts, client, prefix, "a", "b", "c")
}

// doneAll calls Done on each of ids and wants no key under prefix left.
func doneAll(t *testing.T, ts *redis.Timers, client *goredis.Client, prefix string, ids ...string) {
	t.Helper()
	for _, id := range ids {
		if err := ts.Done(context.Background(), id); err != nil {
			t.Fatal(err)
		}
	}
	if keys := client.Keys(context.Background(), prefix+":*").Val(); len(keys) != 0 {
		t.Fatalf("keys left after every Done: %q", keys)
	}
}

// step is one operation whose round trips a test counts.
type step struct {
	name string
	fn   func() error
}

// oneTripEach runs each step and checks it took exactly one round trip.
func oneTripEach(t *testing.T, hook *tripHook, steps []step) {
	t.Helper()
	for _, s := range steps {
		trips(t, hook, s, 1)
	}
}

// trips runs s and checks it took want round trips.
func trips(t *testing.T, hook *tripHook, s step, want int64) {
	t.Helper()
	before := hook.n.Load()
	if err := s.fn(); err != nil {
		t.Fatalf("%s: %v", s.name, err)
	}
	if n := hook.n.Load() - before; n != want {
		t.Errorf("%s took %d round trips, want %d", s.name, n, want)
	}
}

// tripHook counts round trips to Redis: a command, or a pipeline (a MULTI
// included) sent at once.
type tripHook struct{ n atomic.Int64 }

func (h *tripHook) DialHook(next goredis.DialHook) goredis.DialHook { return next }
func (h *tripHook) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}
func (h *tripHook) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmds)
	}
}

// TestTimersOneRoundTrip: each operation is one round trip once the scripts
// are cached.
func TestTimersOneRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ts, client, _ := newTimers(t)
	base := time.UnixMilli(1_760_000_000_000)
	// Warm the script cache (a cold EVALSHA falls back to EVAL).
	ts.Schedule(ctx, "warm", base, nil)
	ts.Claim(ctx, base, 1, time.Minute)
	ts.Done(ctx, "warm")

	hook := &tripHook{}
	client.AddHook(hook)
	steps := []step{
		{"Schedule", func() error { return ts.Schedule(ctx, "a", base, []byte("p")) }},
		{"Claim", func() error { _, err := ts.Claim(ctx, base, 10, time.Minute); return err }},
		{"Wake", func() error { return ts.Wake(ctx, base, "a", "b") }},
		{"Done", func() error { return ts.Done(ctx, "a") }},
		{"Stats", func() error { _, err := ts.Stats(ctx); return err }},
	}
	oneTripEach(t, hook, steps)
}

// TestInvalidOptionsPanic: every constructor refuses a prefix that would
// break the hash tags and a negative duration; the default prefix is "rune".
func TestInvalidOptionsPanic(t *testing.T) {
	client := goredis.NewClient(&goredis.Options{})
	defer client.Close()
	if k := redis.NewTimers(client, redis.TimerOptions{}).Keys()[0]; k != "rune:{timers}:schedule" {
		t.Errorf("default schedule key %q, want %q", k, "rune:{timers}:schedule")
	}
	for name, f := range map[string]func(){
		"NewTimers prefix":   func() { redis.NewTimers(client, redis.TimerOptions{Prefix: "a{b"}) },
		"New prefix":         func() { redis.New(client, redis.Options{Prefix: "a}b"}) },
		"New TTL":            func() { redis.New(client, redis.Options{TTL: -time.Second}) },
		"New Retain":         func() { redis.New(client, redis.Options{Retain: -time.Second}) },
		"NewBarriers prefix": func() { redis.NewBarriers(client, redis.BarrierOptions{Prefix: "{"}) },
		"NewBarriers Retain": func() { redis.NewBarriers(client, redis.BarrierOptions{Retain: -1}) },
		"NewBlobs prefix":    func() { redis.NewBlobs(client, redis.BlobOptions{Prefix: "}"}) },
		"NewBlobs TTL":       func() { redis.NewBlobs(client, redis.BlobOptions{TTL: -1}) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}

func BenchmarkTimersScheduleClaim(b *testing.B) {
	coordtest.BenchTimersScheduleClaim(b, func(b *testing.B) coord.Timers {
		ts, _, _ := newTimers(b)
		return ts
	})
}

// BenchmarkTimersRedisMemory schedules 100,000 and 1,000,000 timers with
// the engine's ids (32 hex digits) and 236-byte payloads (the frozen message
// of bench.TimerPayload; the bytes do not matter, their number does), dues
// spread over a day, and reports what Redis holds for them: MEMORY USAGE of
// the keys (exact, unaffected by other clients) and the growth of INFO
// used_memory, per timer.
func BenchmarkTimersRedisMemory(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprintf("timers=%d", n), func(b *testing.B) { benchTimersMemory(b, n) })
	}
}

func benchTimersMemory(b *testing.B, n int) {
	ctx := context.Background()
	payload := bytes.Repeat([]byte("x"), 236)
	base := time.UnixMilli(1_760_000_000_000)
	for range b.N {
		b.StopTimer()
		ts, client, _ := newTimers(b)
		before := usedMemory(b, client)
		b.StartTimer()
		var wg sync.WaitGroup
		for w := range 32 {
			wg.Go(func() {
				for i := w; i < n; i += 32 {
					sum := sha256.Sum256(binary.AppendUvarint(nil, uint64(i)))
					id := hex.EncodeToString(sum[:16])
					if err := ts.Schedule(ctx, id, base.Add(time.Duration(i*7919%86_400_000)*time.Millisecond), payload); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		b.StopTimer()
		var keyBytes int64
		for _, k := range ts.Keys() {
			keyBytes += client.MemoryUsage(ctx, k, 0).Val()
		}
		growth := usedMemory(b, client) - before
		b.ReportMetric(float64(keyBytes)/float64(n), "keyB/timer")
		b.ReportMetric(float64(growth)/float64(n), "usedB/timer")
		client.Unlink(ctx, ts.Keys()...)
		b.StartTimer()
	}
}

// usedMemory is INFO memory's used_memory.
func usedMemory(b *testing.B, client *goredis.Client) int64 {
	info, err := client.Info(context.Background(), "memory").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return n
		}
	}
	b.Fatalf("no used_memory in INFO memory")
	return 0
}

// TestTimersCompactIDs: ids of 32 lowercase hex digits (the engine's) are
// kept as 17 bytes; every other id, including ones that look like a packed
// one, comes back from Claim unchanged and Done removes it.
func TestTimersCompactIDs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ts, client, prefix := newTimers(t)
	keys := ts.Keys()
	base := time.UnixMilli(1_760_000_000_000)
	hexID := "0123456789abcdef0123456789abcdef"
	// The last two ids take the bucket record's long id length (255 + 2 bytes).
	ids := []string{hexID, strings.ToUpper(hexID), hexID[:31], "exec:" + hexID, "\x00" + strings.Repeat("\x01", 16), "\x01x", "plain",
		strings.Repeat("L", 255), strings.Repeat("M", 5000)}
	if err := ts.Schedule(ctx, strings.Repeat("N", 70_000), base, nil); err == nil || !strings.Contains(err.Error(), "70000 bytes") {
		t.Fatalf("Schedule of a 70,000-byte id: %v, want an error naming its length", err)
	}
	for i, id := range ids {
		if err := ts.Schedule(ctx, id, base.Add(time.Duration(i)*time.Millisecond), []byte(id)); err != nil {
			t.Fatal(err)
		}
	}
	if s, err := ts.Stats(ctx); err != nil || s.Scheduled != int64(len(ids)) {
		t.Fatalf("Stats %+v (%v), want %d distinct ids scheduled", s, err, len(ids))
	}
	got, err := ts.Claim(ctx, base.Add(time.Second), 100, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// A claimed timer's payload is in the payloads hash, under its id.
	if n := client.HStrLen(ctx, keys[2], "\x00"+string([]byte{0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef})).Val(); n != int64(len(hexID)) {
		t.Fatalf("the hex id is not kept packed (payload length %d under the packed field)", n)
	}
	if len(got) != len(ids) {
		t.Fatalf("claimed %d timers, want %d", len(got), len(ids))
	}
	for i, tm := range got {
		if tm.ID != ids[i] || string(tm.Payload) != ids[i] {
			t.Fatalf("timer %d: id %q payload %q, want %q for both", i, tm.ID, tm.Payload, ids[i])
		}
	}
	doneAll(t, ts, client, prefix, ids...)
}

// TestTimersEarlierLayout: timers that an earlier Rune left waiting (one
// schedule entry and one payloads entry each) are claimed among the new
// ones in due order, are not scheduled twice, wake, count in Stats and are
// removed by Done.
func TestTimersEarlierLayout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ts, client, prefix := newTimers(t)
	keys := ts.Keys()
	base := time.UnixMilli(1_760_000_000_000)
	// As schedule.lua wrote them before buckets.
	for i, id := range []string{"old1", "old3", "oldDone", "oldWoken"} {
		client.HSet(ctx, keys[2], id, "payload of "+id)
		client.ZAdd(ctx, keys[0], goredis.Z{Score: float64(base.Add(time.Duration(2*i+1) * time.Second).UnixMilli()), Member: id})
	}
	client.ZAdd(ctx, keys[0], goredis.Z{Score: float64(base.Add(time.Hour).UnixMilli()), Member: "oldWoken"})
	for i, id := range []string{"new2", "new4"} {
		if err := ts.Schedule(ctx, id, base.Add(time.Duration(2*i+2)*time.Second), []byte("payload of "+id)); err != nil {
			t.Fatal(err)
		}
	}
	if err := ts.Schedule(ctx, "old1", base, []byte("again")); err != nil {
		t.Fatal(err)
	}
	if s, err := ts.Stats(ctx); err != nil || s.Scheduled != 6 || !s.NextDue.Equal(base.Add(time.Second)) {
		t.Fatalf("Stats %+v (%v), want 6 waiting, the first due at +1s", s, err)
	}
	if err := ts.Done(ctx, "oldDone"); err != nil {
		t.Fatal(err)
	}
	if err := ts.Wake(ctx, base.Add(5*time.Second), "oldWoken"); err != nil {
		t.Fatal(err)
	}
	got, err := ts.Claim(ctx, base.Add(10*time.Second), 10, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, tm := range got {
		order = append(order, tm.ID)
		if string(tm.Payload) != "payload of "+tm.ID {
			t.Errorf("timer %s: payload %q", tm.ID, tm.Payload)
		}
	}
	if want := "[old1 new2 old3 new4 oldWoken]"; fmt.Sprint(order) != want {
		t.Fatalf("claimed %v, want %s", order, want)
	}
	doneAll(t, ts, client, prefix, order...)
}

// TestTimersLargePayload: a payload over 1 KiB waits in the payloads hash,
// not in its bucket, and comes back whole from a first claim and from one
// after a lease ran out, next to small ones sharing its bucket.
func TestTimersLargePayload(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	prefix := testinfra.Name(t)
	client := newClient(t, prefix)
	ts := redis.NewTimersBuckets(client, redis.TimerOptions{Prefix: prefix}, 1)
	keys := ts.Keys()
	base := time.UnixMilli(1_760_000_000_000)
	payloads := map[string][]byte{
		"small":   []byte("s"),
		"at1024":  bytes.Repeat([]byte{0xff}, 1024),
		"at1025":  bytes.Repeat([]byte{0x00}, 1025),
		"huge":    bytes.Repeat([]byte("0123456789"), 100_000),
		"empty":   nil,
		"after":   []byte("a"),
		"between": bytes.Repeat([]byte("b"), 70_000),
	}
	order := []string{"small", "at1024", "at1025", "huge", "empty", "between", "after"}
	for i, id := range order {
		if err := ts.Schedule(ctx, id, base.Add(time.Duration(i)*time.Millisecond), payloads[id]); err != nil {
			t.Fatal(err)
		}
	}
	if n := client.HLen(ctx, keys[2]).Val(); n != 3 {
		t.Fatalf("payloads hash holds %d waiting payloads, want the 3 over 1 KiB", n)
	}
	for _, now := range []time.Time{base.Add(time.Second), base.Add(time.Hour)} {
		got, err := ts.Claim(ctx, now, 100, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(order) {
			t.Fatalf("claimed %d timers at %v, want %d", len(got), now, len(order))
		}
		for i, tm := range got {
			if tm.ID != order[i] || !bytes.Equal(tm.Payload, payloads[tm.ID]) {
				t.Fatalf("timer %d: %s with a %d-byte payload, want %s with %d bytes", i, tm.ID, len(tm.Payload), order[i], len(payloads[order[i]]))
			}
		}
	}
	doneAll(t, ts, client, prefix, order...)
}

// TestTimersMatchMemory runs the same random operations on a Redis store of
// four buckets and on the in-process store, and wants the same answers: the
// bucket records (ids of both forms, payloads inline and not, rewrites after
// each claim, done and wake) keep exactly the timers a plain schedule would.
// Due and wake times are all distinct, so Claim's order has no ties.
func TestTimersMatchMemory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	prefix := testinfra.Name(t)
	rs := redis.NewTimersBuckets(newClient(t, prefix), redis.TimerOptions{Prefix: prefix}, 4)
	ms := coordmem.NewTimers()
	rng := rand.New(rand.NewPCG(1, 2))
	ids := make([]string, 40)
	for i := range ids {
		if i%2 == 0 {
			ids[i] = fmt.Sprintf("%032x", rng.Uint64()) // packed
		} else {
			ids[i] = fmt.Sprintf("timer-%d", i)
		}
	}
	base := time.UnixMilli(1_760_000_000_000)
	var clock int64          // ms after base
	used := map[int64]bool{} // every time handed out, so none repeats
	at := func(ms int64) time.Time {
		for used[ms] {
			ms++
		}
		used[ms] = true
		return base.Add(time.Duration(ms) * time.Millisecond)
	}
	tick := func() time.Time { clock += 1 + rng.Int64N(3); return at(clock) }
	claimed, reclaimed := 0, 0
	for step := range 3000 {
		id := ids[rng.IntN(len(ids))]
		var what string
		var rErr, mErr error
		var rGot, mGot []coord.Timer
		switch op := rng.IntN(10); {
		case op < 5:
			due := at(clock + rng.Int64N(60))
			payload := bytes.Repeat([]byte{byte(step)}, []int{0, 10, 200, 1024, 1025, 3000}[rng.IntN(6)])
			what = fmt.Sprintf("Schedule(%s, %v, %d bytes)", id, due.Sub(base), len(payload))
			rErr, mErr = rs.Schedule(ctx, id, due, payload), ms.Schedule(ctx, id, due, payload)
		case op < 7:
			now, max := tick(), 1+rng.IntN(8)
			lease := time.Duration(1+rng.IntN(50)) * time.Millisecond
			what = fmt.Sprintf("Claim(%v, %d)", now.Sub(base), max)
			rGot, rErr = rs.Claim(ctx, now, max, lease)
			mGot, mErr = ms.Claim(ctx, now, max, lease)
		case op < 9:
			what = "Done(" + id + ")"
			rErr, mErr = rs.Done(ctx, id), ms.Done(ctx, id)
		default:
			now := tick()
			what = fmt.Sprintf("Wake(%v, %s)", now.Sub(base), id)
			rErr, mErr = rs.Wake(ctx, now, id), ms.Wake(ctx, now, id)
		}
		if rErr != nil || mErr != nil {
			t.Fatalf("step %d %s: redis %v, memory %v", step, what, rErr, mErr)
		}
		if len(rGot) != len(mGot) {
			t.Fatalf("step %d %s: redis claimed %d timers, memory %d", step, what, len(rGot), len(mGot))
		}
		claimed += len(rGot)
		for _, tm := range rGot {
			if tm.Claims > 1 {
				reclaimed++
			}
		}
		for i := range rGot {
			r, m := rGot[i], mGot[i]
			if r.ID != m.ID || !r.Due.Equal(m.Due) || r.Claims != m.Claims || !bytes.Equal(r.Payload, m.Payload) {
				t.Fatalf("step %d %s: timer %d: redis %s due %v claims %d (%d bytes), memory %s due %v claims %d (%d bytes)",
					step, what, i, r.ID, r.Due.Sub(base), r.Claims, len(r.Payload), m.ID, m.Due.Sub(base), m.Claims, len(m.Payload))
			}
		}
		rs1, err1 := rs.Stats(ctx)
		ms1, err2 := ms.Stats(ctx)
		if err1 != nil || err2 != nil || rs1.Scheduled != ms1.Scheduled || rs1.Claimed != ms1.Claimed || !rs1.NextDue.Equal(ms1.NextDue) {
			t.Fatalf("step %d %s: Stats redis %+v (%v), memory %+v (%v)", step, what, rs1, err1, ms1, err2)
		}
	}
	if claimed < 300 || reclaimed < 30 {
		t.Fatalf("only %d timers claimed, %d after a lease ran out: the operations do not reach Claim's paths", claimed, reclaimed)
	}
	t.Logf("%d timers claimed, %d of them after a lease ran out", claimed, reclaimed)
}

// TestTimersShardedConformance runs the suite on one Redis with the timers
// spread over 4 shards (and 4 buckets, so buckets fill too).
func TestTimersShardedConformance(t *testing.T) {
	coordtest.RunTimers(t, func(t *testing.T) coord.Timers {
		prefix := testinfra.Name(t)
		return redis.NewTimersBuckets(newClient(t, prefix), redis.TimerOptions{Prefix: prefix, Shards: 4}, 4)
	})
}
