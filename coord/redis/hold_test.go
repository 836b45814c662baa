package redis_test

import (
	"context"
	"errors"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/rune-org/rune/coord"
	"github.com/rune-org/rune/coord/redis"
	"github.com/rune-org/rune/internal/testinfra"
)

// TestHold: a parked timer, a delayed successor and a barrier's deadline keep
// every key of their execution (its state, finished records, final context,
// parked set, closed barriers' markers, large values) at least until their
// time plus the TTL, whatever else happens meanwhile; nothing is kept
// longer, nothing for ever; and once the execution ends every key goes
// within Retain, as before.
func TestHold(t *testing.T) {
	t.Parallel()
	t.Run("redis", func(t *testing.T) {
		t.Parallel()
		prefix := testinfra.Name(t)
		testHold(t, newClient(t, prefix), prefix)
	})
	t.Run("cluster", func(t *testing.T) {
		t.Parallel()
		prefix := testinfra.Name(t)
		testHold(t, newClusterClient(t, prefix), prefix)
	})
}

func testHold(t *testing.T, client goredis.UniversalClient, prefix string) {
	ctx := context.Background()
	const ttl, retain = 2 * time.Second, 500 * time.Millisecond
	c := redis.New(client, redis.Options{Prefix: prefix, TTL: ttl, Retain: retain})
	blobs := redis.NewBlobs(client, redis.BlobOptions{Prefix: prefix, TTL: ttl})
	bars := redis.NewBarriers(client, redis.BarrierOptions{Prefix: prefix, Retain: retain})
	const exec = "exec-hold"
	base := prefix + ":{" + exec + "}:"
	keys := []string{"meta", "done", "ctx", "parked", "closed", "blobs"}

	// check checks that every key's TTL is in (lo, hi]: -1 (no TTL)
	// fails, and -2 (no key) unless gone is allowed.
	check := func(when string, lo, hi time.Duration, gone bool) {
		t.Helper()
		for _, k := range keys {
			pttl, err := client.PTTL(ctx, base+k).Result()
			if err != nil {
				t.Fatal(err)
			}
			if gone && pttl == -2*time.Nanosecond {
				continue
			}
			if pttl <= lo || pttl > hi {
				t.Errorf("%s: key %s has TTL %v, want in (%v, %v]", when, k, pttl, lo, hi)
			}
		}
	}
	between := func(when string, lo, hi time.Duration) { t.Helper(); check(when, lo, hi, false) }
	finish := func(id string, f coord.Finish) coord.Outcome {
		t.Helper()
		o, err := c.Finish(ctx, exec, id, f)
		if err != nil {
			t.Fatalf("Finish %s: %v", id, err)
		}
		return o
	}

	if err := c.Start(ctx, exec, 1); err != nil {
		t.Fatal(err)
	}
	// a spawns three: two that wait, one that goes on.
	finish("a", coord.Finish{Spawned: 3, Record: coord.Bytes("ra"), End: map[string]any{"$a": 1.0}})
	if _, err := blobs.Put(ctx, exec, []byte("a large value")); err != nil {
		t.Fatal(err)
	}
	// A closed barrier leaves its marker in the closed hash.
	if _, err := bars.Arrive(ctx, exec, "merge:m", coord.BarrierSpec{Total: 1, Need: 1}, 0, []byte("v")); err != nil {
		t.Fatal(err)
	}
	const hour = time.Hour
	if wake, err := c.Park(ctx, exec, "w1", time.Now().Add(hour)); err != nil || wake {
		t.Fatalf("Park w1: %v, %v", wake, err)
	}
	between("after Park due in an hour", hour-time.Minute, hour+ttl)

	// Activity later does not shorten it: a Finish, a Put.
	finish("b", coord.Finish{Spawned: 1, Record: coord.Bytes("rb")})
	if _, err := blobs.Put(ctx, exec, []byte("another large value")); err != nil {
		t.Fatal(err)
	}
	between("after a Finish and a Put", hour-time.Minute, hour+ttl)

	// An earlier due time changes nothing; a later one holds longer.
	if _, err := c.Park(ctx, exec, "w2", time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	between("after Park due in a minute", hour-time.Minute, hour+ttl)
	const months = 90 * 24 * time.Hour
	if _, err := c.Park(ctx, exec, "w2", time.Now().Add(months)); err != nil {
		t.Fatal(err)
	}
	between("after Park due in 90 days", months-time.Minute, months+ttl)

	// A delayed successor or a barrier's deadline beyond that (Finish.Hold).
	const longer = 200 * 24 * time.Hour
	finish("c", coord.Finish{Spawned: 1, Record: coord.Bytes("rc"), Hold: time.Now().Add(longer)})
	between("after a Finish holding 200 days", longer-time.Minute, longer+ttl)

	// The end: every key within Retain, however far the holds reached.
	finish("w1", coord.Finish{Record: coord.Bytes("rw1")})
	finish("w2", coord.Finish{Record: coord.Bytes("rw2")})
	// (c counted itself out and its successor in: three are live.)
	if o := finish("d", coord.Finish{Record: coord.Bytes("rd")}); !o.Last() {
		t.Fatalf("the last Finish: %+v, want Last", o)
	}
	check("after the end", 0, retain, true) // the parked set emptied, so gone
}

// TestHoldExpires: a held execution's keys outlive the TTL until the hold,
// then go by themselves a TTL later when nothing happens.
func TestHoldExpires(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const ttl = 300 * time.Millisecond
	c, client, prefix := newCoord(t, redis.Options{TTL: ttl})
	const exec = "exec-expires"
	if err := c.Start(ctx, exec, 1); err != nil {
		t.Fatal(err)
	}
	due := time.Now().Add(2 * time.Second)
	if _, err := c.Park(ctx, exec, "w", due); err != nil {
		t.Fatal(err)
	}
	meta := prefix + ":{" + exec + "}:meta"
	// Waited past the TTL, not yet to the due time (checked: a slow
	// machine that overslept proves nothing and says so).
	time.Sleep(3 * ttl)
	exists := client.Exists(ctx, meta).Val() == 1
	if time.Now().Before(due) && !exists {
		t.Fatalf("the state expired %v after its last activity, before its timer's due time", 3*ttl)
	}
	deadline := due.Add(ttl + 30*time.Second)
	for client.Exists(ctx, meta).Val() == 1 {
		if time.Now().After(deadline) {
			t.Fatalf("the state is still there 30 s after its due time plus the TTL")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if since := time.Since(due); since < 0 {
		t.Fatalf("the state expired %v before its timer's due time", -since)
	}
	if _, err := c.Finish(ctx, exec, "w", coord.Finish{}); !errors.Is(err, coord.ErrUnknownExecution) {
		t.Fatalf("Finish after the state expired: %v, want ErrUnknownExecution", err)
	}
}
