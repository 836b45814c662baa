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
		var opener *run
		var members []*run
		for _, ru := range order {
			if ru.user != user {
				continue
			}
			if ru.err != nil {
				t.Fatalf("%s's trigger %d: %v", user, ru.n, ru.err)
			}
			ru.r.c = ru.c
			ru.r.status(message.CompletionCompleted)
			if ru.n == 0 {
				opener = ru
			} else {
				members = append(members, ru)
			}
		}
		items := "["
		for i := range len(members) + 1 {
			if i > 0 {
				items += ","
			}
			items += fmt.Sprint(i)
		}
		items += "]"
		opener.r.equal("$dg", fmt.Sprintf(`{"items":%s,"count":%d}`, items, len(members)+1))
		opener.r.equal("$after", fmt.Sprintf(`{"count":%d,"user":%q}`, len(members)+1, user))
		if got := opener.r.count("dg", message.StatusWaiting); got != 1 {
			t.Fatalf("%s's first execution reported %d waiting statuses of the digest, want 1", user, got)
		}
		for _, m := range members {
			m.r.equal("$dg", fmt.Sprintf(`{"digested_into":%q}`, opener.c.ExecutionID))
			m.r.absent("$after")
			if got := m.r.count("dg", message.StatusWaiting); got != 0 {
				t.Fatalf("%s's trigger %d waited in the digest it joined", user, m.n)
			}
		}
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
