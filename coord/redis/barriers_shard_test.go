package redis_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rune-org/rune/coord"
	"github.com/rune-org/rune/coord/redis"
)

// TestBarrierShardCrashOrder: a worker that wrote its slot's value to the
// shard and died before arrive.lua counted it. Nothing is counted until the
// redelivery, which counts the slot once and completes the barrier with
// every value; the repeat gets the same completion. A value written but
// never counted is no value of the completion.
func TestBarrierShardCrashOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, _, _ := newBarriers(t, redis.BarrierOptions{Shards: 4})
	spec := coord.BarrierSpec{Total: 3, Need: 3}
	for slot, v := range []string{"a", "b"} {
		if a, err := b.Arrive(ctx, "e", "agg", spec, slot, []byte(v)); err != nil || a.Complete || a.Arrived != slot+1 {
			t.Fatalf("Arrive slot %d: %+v, %v; want pending with %d arrived", slot, a, err, slot+1)
		}
	}
	if err := b.WriteValue(ctx, "e", "agg", spec, 2, []byte("c")); err != nil {
		t.Fatal(err)
	}
	// The crashed arrival counted nothing.
	if a, err := b.Arrive(ctx, "e", "agg", spec, 1, []byte("b")); err != nil || !a.Duplicate || a.Complete || a.Arrived != 2 {
		t.Fatalf("repeat of slot 1 after the crash: %+v, %v; want a pending Duplicate with 2 arrived", a, err)
	}
	want := []string{"a", "b", "c"}
	for i, dup := range []bool{false, true} {
		a, err := b.Arrive(ctx, "e", "agg", spec, 2, []byte("c"))
		if err != nil {
			t.Fatalf("redelivery %d of slot 2: %v", i+1, err)
		}
		if !a.Complete || a.Duplicate != dup || a.Arrived != 3 || fmt.Sprintf("%q", a.Values) != fmt.Sprintf("%q", want) {
			t.Fatalf("redelivery %d of slot 2: %+v; want Complete, Duplicate %v, 3 arrived, values %q", i+1, a, dup, want)
		}
	}

	// wait_for_any: slot 0's value was written, never counted; slot 1
	// completes the barrier alone.
	anySpec := coord.BarrierSpec{Total: 3, Need: 1}
	if err := b.WriteValue(ctx, "e", "any", anySpec, 0, []byte("uncounted")); err != nil {
		t.Fatal(err)
	}
	a, err := b.Arrive(ctx, "e", "any", anySpec, 1, []byte("y"))
	if err != nil || !a.Complete || a.Arrived != 1 || a.Values[0] != nil || string(a.Values[1]) != "y" || a.Values[2] != nil {
		t.Fatalf("wait_for_any: %+v, %v; want Complete with only slot 1's value", a, err)
	}
	if _, err := b.Arrive(ctx, "e", "any", anySpec, 0, []byte("uncounted")); !errors.Is(err, coord.ErrBarrierClosed) {
		t.Fatalf("redelivery of the uncounted slot 0: %v, want ErrBarrierClosed", err)
	}
}

// TestBarrierShardKeys: the values are in shard keys of hash tags of their
// own, living twice the TTL while open; on completion every key but the
// execution's closed marker drops to Retain; Cancel deletes the shards; a
// late arrival's value does not stay behind.
func TestBarrierShardKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const ttl, retain, shards = time.Hour, time.Minute, 4
	b, client, prefix := newBarriers(t, redis.BarrierOptions{Retain: retain, Shards: shards})
	spec := coord.BarrierSpec{Total: 6, Need: 6, TTL: ttl}
	shard := func(key string, i int) string {
		return fmt.Sprintf("%s:{e/%s/%d}:bar:%s:vals.%d", prefix, key, i, key, i)
	}
	for slot := range 5 {
		if _, err := b.Arrive(ctx, "e", "agg", spec, slot, []byte{byte('a' + slot)}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range shards {
		ttlOf(t, client, shard("agg", i), 2*ttl-time.Minute, 2*ttl)
		if hashTag(shard("agg", i)) != fmt.Sprintf("e/agg/%d", i) {
			t.Fatalf("shard %d: hash tag %q", i, hashTag(shard("agg", i)))
		}
	}
	if v := client.HGetAll(ctx, shard("agg", 0)).Val(); len(v) != 2 || v["0"] != "a" || v["4"] != "e" {
		t.Fatalf("shard 0 holds %v, want slots 0 and 4", v)
	}
	base := prefix + ":{e}:bar:agg:"
	if n := client.Exists(ctx, base+"vals").Val(); n != 0 {
		t.Fatalf("the execution's slot holds a vals hash with shards")
	}
	ttlOf(t, client, base+"seen", ttl-time.Minute, ttl)

	if a, err := b.Arrive(ctx, "e", "agg", spec, 5, []byte("f")); err != nil || !a.Complete || string(a.Values[5]) != "f" {
		t.Fatalf("completing Arrive: %+v, %v", a, err)
	}
	for _, k := range client.Keys(ctx, prefix+":*").Val() {
		if k == prefix+":{e}:closed" {
			ttlOf(t, client, k, ttl-time.Minute, ttl) // the marker, as without shards
			continue
		}
		ttlOf(t, client, k, 0, retain)
	}

	// A late arrival at a completed wait_for_any writes its value, then
	// deletes it: its shard (no slot of it arrived) does not come to life.
	anySpec := coord.BarrierSpec{Total: 8, Need: 1, TTL: ttl}
	if a, err := b.Arrive(ctx, "e", "any", anySpec, 0, []byte("x")); err != nil || !a.Complete {
		t.Fatalf("Arrive: %+v, %v", a, err)
	}
	if _, err := b.Arrive(ctx, "e", "any", anySpec, 5, []byte("late")); !errors.Is(err, coord.ErrBarrierClosed) {
		t.Fatalf("late Arrive: %v, want ErrBarrierClosed", err)
	}
	if n := client.Exists(ctx, shard("any", 1)).Val(); n != 0 {
		t.Fatalf("the late arrival's shard remains: %v, TTL %v", client.HGetAll(ctx, shard("any", 1)).Val(), client.PTTL(ctx, shard("any", 1)).Val())
	}

	// Cancel deletes every shard; a later arrival leaves none behind.
	for slot := range 3 {
		if _, err := b.Arrive(ctx, "e", "c", spec, slot, []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	if was, err := b.Cancel(ctx, "e", "c"); err != nil || !was {
		t.Fatalf("Cancel: %v, %v", was, err)
	}
	if _, err := b.Arrive(ctx, "e", "c", spec, 4, []byte("late")); !errors.Is(err, coord.ErrBarrierClosed) {
		t.Fatalf("Arrive after Cancel: %v, want ErrBarrierClosed", err)
	}
	for i := range shards {
		if n := client.Exists(ctx, shard("c", i)).Val(); n != 0 {
			t.Fatalf("shard %d remains after Cancel", i)
		}
	}
}

// TestBarrierShardRenew: a shard written once, early, outlives twice the
// barrier's TTL while other slots keep the barrier alive: arrive.lua has
// its TTL renewed, so the completion still finds its value.
func TestBarrierShardRenew(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const ttl = 2 * time.Second
	b, _, _ := newBarriers(t, redis.BarrierOptions{Shards: 2})
	spec := coord.BarrierSpec{Total: 3, Need: 3, TTL: ttl}
	if _, err := b.Arrive(ctx, "e", "agg", spec, 0, []byte("early")); err != nil {
		t.Fatal(err)
	}
	// Slot 1 (shard 1) and its redeliveries for 2.5 TTLs: shard 0 was
	// written only by slot 0, 5 s ago by the end (its first TTL: 4 s).
	for end := time.Now().Add(5*ttl/2 + 100*time.Millisecond); time.Now().Before(end); {
		if _, err := b.Arrive(ctx, "e", "agg", spec, 1, []byte("b")); err != nil {
			t.Fatal(err)
		}
		time.Sleep(ttl / 10)
	}
	a, err := b.Arrive(ctx, "e", "agg", spec, 2, []byte("c"))
	if err != nil {
		t.Fatalf("completing Arrive: %v", err)
	}
	if !a.Complete || strings.Join([]string{string(a.Values[0]), string(a.Values[1]), string(a.Values[2])}, ",") != "early,b,c" {
		t.Fatalf("completing Arrive: %+v, want the values early, b, c", a)
	}
}

// TestBarrierShardRoundTrips: with shards an Arrive is two round trips (the
// value, then the count), the first pending one of a barrier four (the
// shards' TTL renewed, then the barrier's state read to undo a renewal
// that came after the completion), the completing one three (the shards read back
// in one pipeline), a Cancel two (the shards deleted in one pipeline).
func TestBarrierShardRoundTrips(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, client, _ := newBarriers(t, redis.BarrierOptions{Shards: 4})
	spec := coord.BarrierSpec{Total: 3, Need: 3}
	// Warm the script cache (a cold EVALSHA falls back to EVAL).
	b.Arrive(ctx, "warm", "k", spec, 0, nil)
	b.Cancel(ctx, "warm", "k")

	hook := &tripHook{}
	client.AddHook(hook)
	arrive := func(slot int) func() error {
		return func() error { _, err := b.Arrive(ctx, "e", "k", spec, slot, []byte("v")); return err }
	}
	trips(t, hook, step{"first Arrive", arrive(0)}, 4)
	trips(t, hook, step{"Arrive", arrive(1)}, 2)
	trips(t, hook, step{"completing Arrive", arrive(2)}, 3)
	trips(t, hook, step{"Cancel", func() error { _, err := b.Cancel(ctx, "e", "other"); return err }}, 2)
}

// TestBarrierShardRenewAfterCompletion: a pending arrival's renewal of the
// shards' TTL that lands after another arrival completed the barrier (the
// branches of a split resumed from one wait arrive together) leaves the
// shards no longer than the retention: they go with the ended execution's
// other keys, not twice the barrier's TTL later (distributed
// TestStateOutlivesTTL saw a shard kept 2h10m).
func TestBarrierShardRenewAfterCompletion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, client, prefix := newBarriers(t, redis.BarrierOptions{Shards: 2, Retain: time.Minute})
	spec := coord.BarrierSpec{Total: 3, Need: 3, TTL: time.Hour}
	for slot := range 3 {
		if _, err := b.Arrive(ctx, "e", "agg", spec, slot, []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.RenewShards(ctx, "e", "agg", spec); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		key := fmt.Sprintf("%s:{e/agg/%d}:bar:agg:vals.%d", prefix, i, i)
		if ttl, err := client.PTTL(ctx, key).Result(); err != nil || ttl > time.Minute || ttl <= 0 {
			t.Errorf("shard %s: TTL %v (%v) after a late renewal; want at most the retention (1m)", key, ttl, err)
		}
	}
}
