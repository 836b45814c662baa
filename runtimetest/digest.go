package runtimetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rune-org/rune/message"
)

// The digest scenario (issue 36).

// DigestWorkflow collects the trigger's n per user for window, then runs
// "after" with the digest.
func DigestWorkflow(id, window string) []byte {
	return []byte(wf(id, fmt.Sprintf(`
		{"id":"dg","type":"digest","parameters":{"key":"{{ $trigger.user }}","window":%q,"value":"{{ $trigger.n }}"}},
		{"id":"after","type":"set","parameters":{"values":{"count":"{{ $dg.count }}","user":"{{ $trigger.user }}"}}}`, window),
		`{"id":"e1","src":"start","dst":"dg"},{"id":"e2","src":"dg","dst":"after"}`))
}

// Digests: ten triggers for alice and five for bob, interleaved and each
// started once the one before has reached the digest, within a window of
// 4 s: alice's first execution waits and goes on with count 10 and the
// items 0..9 in order, the nine others complete at once with digested_into
// the first's id and run nothing after the digest; bob's likewise, apart.
// Once alice's digest has gone out, her next trigger opens a new one.
func Digests(t *testing.T, rt Runtime) {
	def := DigestWorkflow("digests", "4s")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	type run struct {
		user string
		n    int
		c    *message.Completion
		r    *result
		err  error
		// reached: when the runtime reported the run at the digest; it
		// joined (or opened) no later.
		reached time.Time
	}
	var order []*run
	for i := range 10 {
		order = append(order, &run{user: "alice", n: i})
		if i < 5 {
			order = append(order, &run{user: "bob", n: i})
		}
	}
	done := make(chan *run, len(order))
	for _, ru := range order {
		reached := make(chan struct{})
		once := false
		ru.r = &result{t: t}
		statuses := make(chan *message.NodeStatus, 64)
		go func() {
			c, err := rt.Run(ctx, def, map[string]any{"user": ru.user, "n": ru.n}, func(s *message.NodeStatus) { statuses <- s })
			ru.c, ru.err = c, err
			close(statuses)
		}()
		go func() {
			for s := range statuses {
				ru.r.add(s)
				if s.NodeID == "dg" && (s.Status == message.StatusWaiting || s.Status == message.StatusSuccess) && !once {
					once = true
					ru.reached = time.Now()
					close(reached)
				}
			}
			if !once {
				close(reached)
			}
			done <- ru
		}()
		select {
		case <-reached:
		case <-ctx.Done():
			t.Fatalf("%s's trigger %d did not reach the digest", ru.user, ru.n)
		}
	}
	for range order {
		select {
		case <-done:
		case <-ctx.Done():
			t.Fatal("the digested executions did not all complete")
		}
	}
	for _, user := range []string{"alice", "bob"} {
		var runs []*run
		for _, ru := range order {
			if ru.user != user {
				continue
			}
			if ru.err != nil {
				t.Fatalf("%s's trigger %d: %v", user, ru.n, ru.err)
			}
			ru.r.c = ru.c
			ru.r.status(message.CompletionCompleted)
			runs = append(runs, ru)
		}
		var drs []digestRun
		for _, ru := range runs {
			drs = append(drs, digestRun{ru.n, ru.r, ru.reached})
		}
		checkDigested(t, user, drs)
	}
	// The window has closed and the digest gone out: the next opens anew.
	r := &result{t: t}
	var mu sync.Mutex
	c, err := rt.Run(ctx, def, map[string]any{"user": "alice", "n": 10}, func(s *message.NodeStatus) {
		mu.Lock()
		defer mu.Unlock()
		r.add(s)
	})
	if err != nil {
		t.Fatal(err)
	}
	r.c = c
	r.status(message.CompletionCompleted)
	r.equal("$dg", `{"items":[10],"count":1}`)
}

// digestRun is one trigger of the digest scenario: its value, what the
// runtime reported, and when it was seen at the digest (it joined, or
// opened, no later).
type digestRun struct {
	n       int
	r       *result
	reached time.Time
}

// checkDigested checks one user's runs (values 0..n-1, started in order)
// of the digest scenario. Every value is in exactly one opener's items,
// its own first, the others in order; a run that joined completed at once
// with digested_into naming the opener that holds its value, and ran
// nothing after the digest. When every run reached the digest before the
// first's window closed (the usual case), that one opener holds them all:
// on a machine so loaded that a later run reached it after the window, the
// later runs may open a digest of their own, and only the rest is checked.
func checkDigested(t *testing.T, user string, runs []digestRun) {
	t.Helper()
	var closes time.Time
	for _, s := range runs[0].r.statuses {
		if s.NodeID == "dg" && s.Status == message.StatusWaiting && s.ResumeAt != nil {
			closes = *s.ResumeAt
		}
	}
	if closes.IsZero() {
		t.Fatalf("%s's first execution did not wait in the digest", user)
	}
	openers := map[string][]any{} // execution id → its items
	inTime := true
	type joined struct {
		n    int
		into string
	}
	var joins []joined
	for _, dr := range runs {
		v, r := dr.n, dr.r
		switch dg, _ := r.get("$dg").(map[string]any); {
		case dg["digested_into"] != nil:
			r.absent("$after")
			if got := r.count("dg", message.StatusWaiting); got != 0 {
				t.Fatalf("%s's trigger %d waited in the digest it joined", user, v)
			}
			joins = append(joins, joined{v, fmt.Sprint(dg["digested_into"])})
		case dg["items"] != nil:
			items, _ := dg["items"].([]any)
			if len(items) == 0 || fmt.Sprint(items[0]) != fmt.Sprint(v) || fmt.Sprint(dg["count"]) != fmt.Sprint(len(items)) {
				t.Fatalf("%s's trigger %d opened a digest of %v, want its own value first and the count", user, v, dg)
			}
			r.equal("$after.count", fmt.Sprint(len(items)))
			if got := r.count("dg", message.StatusWaiting); got != 1 {
				t.Fatalf("%s's trigger %d reported %d waiting statuses of the digest it opened, want 1", user, v, got)
			}
			openers[r.c.ExecutionID] = items
		default:
			t.Fatalf("%s's trigger %d: $dg = %v, neither a digest nor a join", user, v, dg)
		}
		if v > 0 {
			inTime = inTime && dr.reached.Before(closes)
		}
	}
	seen := map[string]int{}
	for _, items := range openers {
		for i, it := range items {
			seen[fmt.Sprint(it)]++
			if i > 0 && items[i-1].(float64) >= it.(float64) {
				t.Fatalf("%s's digest %v is out of order", user, items)
			}
		}
	}
	for _, j := range joins {
		found := false
		for _, it := range openers[j.into] {
			found = found || fmt.Sprint(it) == fmt.Sprint(j.n)
		}
		if !found {
			t.Fatalf("%s's trigger %d joined %s, whose digest %v lacks it", user, j.n, j.into, openers[j.into])
		}
	}
	for v := range len(runs) {
		if seen[fmt.Sprint(v)] != 1 {
			t.Fatalf("%s's value %d is in %d digests, want 1 (digests %v)", user, v, seen[fmt.Sprint(v)], openers)
		}
	}
	if inTime && len(openers) != 1 {
		t.Fatalf("every one of %s's triggers reached the digest before its window closed at %s, yet %d digests went out: %v", user, closes, len(openers), openers)
	}
	if !inTime {
		t.Logf("%s: a trigger reached the digest after the first window closed (a loaded machine): %d digests, checked for exactly-once only", user, len(openers))
	}
}
