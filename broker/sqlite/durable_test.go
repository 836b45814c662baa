package sqlite_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rune-org/rune/broker"
	"github.com/rune-org/rune/broker/sqlite"
	"github.com/rune-org/rune/internal/sqlitedb"
	"github.com/rune-org/rune/message"
)

// childEnv names the file TestHelperChild works on; without it the test
// does nothing.
const childEnv = "RUNE_SQLITE_BROKER_CHILD"

const (
	childMessages = 40
	childDelayed  = 6 // the last ones, published with childDelay
	childDelay    = 4 * time.Second
	childAcks     = 12
	childInHand   = 5
	rejectID      = "m-reject"
)

func execBody(id, key string) *message.NodeExecution {
	return &message.NodeExecution{MessageID: id, WorkflowID: "wf", ExecutionID: key, CurrentNode: "n", Attempt: 1,
		WorkflowDefinition: []byte(`{"id":"wf"}`), AccumulatedContext: map[string]any{"$trigger": map[string]any{"id": id}}}
}

func execMsg(id string, delay time.Duration) broker.Message {
	return broker.Message{Topic: broker.Execution, ID: id, Key: "exec-" + id, Body: execBody(id, "exec-"+id), Delay: delay}
}

// TestHelperChild is the process TestKill9 kills. It publishes
// childMessages messages (the last childDelayed delayed) and one it
// rejects, acks childAcks, and then holds childInHand in handlers that never
// return. It reports on stdout: "published NS" (the time before publishing),
// "delivered ID NS" for every handler call, "acked ID" once the acks have
// committed, and "ready" when the messages are in hand.
func TestHelperChild(t *testing.T) {
	path := os.Getenv(childEnv)
	if path == "" {
		t.Skip("run by TestKill9")
	}
	out := make(chan string, 1024)
	go func() {
		for line := range out {
			fmt.Println(line)
		}
	}()
	say := func(format string, args ...any) { out <- fmt.Sprintf(format, args...) }
	db, err := sqlitedb.Open(ctxBG, path, sqlitedb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b := newBroker(t, db, sqlite.Options{})
	msgs := []broker.Message{execMsg(rejectID, 0)}
	for i := range childMessages {
		var delay time.Duration
		if i >= childMessages-childDelayed {
			delay = childDelay
		}
		msgs = append(msgs, execMsg(fmt.Sprintf("m%02d", i), delay))
	}
	say("published %d", time.Now().UnixNano())
	if err := b.Publish(ctxBG, msgs...).Wait(ctxBG); err != nil {
		t.Fatal(err)
	}

	// Phase 1: reject one, ack childAcks, hand back what else was in hand.
	ctx, cancel := context.WithCancel(ctxBG)
	var (
		mu    sync.Mutex
		acked []string
	)
	err = b.Consume(ctx, broker.Execution, broker.ConsumeOptions{Concurrency: 3, Prefetch: 3}, func(ctx context.Context, d *broker.Delivery) error {
		say("delivered %s %d", d.ID, time.Now().UnixNano())
		if d.ID == rejectID {
			return fmt.Errorf("child says no: %w", broker.ErrReject)
		}
		mu.Lock()
		ack := len(acked) < childAcks
		if ack {
			acked = append(acked, d.ID)
			if len(acked) == childAcks {
				cancel()
			}
		}
		mu.Unlock()
		if ack {
			return nil
		}
		<-ctx.Done()
		return ctx.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range acked { // Consume has returned: the acks committed
		say("acked %s", id)
	}

	// Phase 2: hold childInHand until killed.
	var inHand atomic.Int64
	go b.Consume(ctxBG, broker.Execution, broker.ConsumeOptions{Concurrency: childInHand, Prefetch: childInHand}, func(ctx context.Context, d *broker.Delivery) error {
		say("delivered %s %d", d.ID, time.Now().UnixNano())
		if inHand.Add(1) == childInHand {
			say("ready")
		}
		select {} // until killed
	})
	select {}
}

// TestKill9: a process killed with kill -9 while it holds messages in hand
// loses nothing: after reopening the file every message not acked is
// delivered exactly once more, Redelivered exactly when it was delivered
// before; acked ones never come back; delayed ones keep their due time; a
// dead letter is still there.
func TestKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a process")
	}
	path := filepath.Join(t.TempDir(), "rune.db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"="+path)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	t.Cleanup(func() {
		if !killed {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	var (
		published time.Time
		delivered = map[string]int{} // by the child
		acked     = map[string]bool{}
		ready     = make(chan struct{})
		lines     = make(chan string)
	)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	due := func(id string) time.Time {
		if n, err := strconv.Atoi(strings.TrimPrefix(id, "m")); err == nil && n >= childMessages-childDelayed {
			return published.Add(childDelay)
		}
		return time.Time{}
	}
	checkDue := func(id string, at time.Time) {
		if d := due(id); at.Before(d) {
			t.Errorf("delayed message %s delivered %v before its due time", id, d.Sub(at))
		}
	}
	deadline := time.After(90 * time.Second)
read:
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatal("child exited before holding its messages")
			}
			f := strings.Fields(line)
			switch {
			case len(f) == 2 && f[0] == "published":
				ns, _ := strconv.ParseInt(f[1], 10, 64)
				published = time.Unix(0, ns)
			case len(f) == 3 && f[0] == "delivered":
				ns, _ := strconv.ParseInt(f[2], 10, 64)
				delivered[f[1]]++
				checkDue(f[1], time.Unix(0, ns))
			case len(f) == 2 && f[0] == "acked":
				acked[f[1]] = true
			case line == "ready":
				close(ready)
				break read
			}
		case <-deadline:
			t.Fatal("child did not get its messages in hand within 90s")
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	killed = true
	if len(acked) != childAcks {
		t.Fatalf("child acked %d messages, want %d", len(acked), childAcks)
	}

	db := openDB(t, path)
	b := newBroker(t, db, sqlite.Options{})
	t.Cleanup(func() { b.Close() })
	dls, total, err := b.DeadLetters(ctxBG, 0)
	if err != nil {
		t.Fatal(err)
	}
	if total != 1 || len(dls) != 1 || dls[0].ID != rejectID || !strings.Contains(dls[0].Reason, "child says no") || dls[0].Topic != broker.Execution {
		t.Errorf("dead letters after the kill = %d %+v, want %s rejected by the child", total, dls, rejectID)
	}

	want := map[string]bool{} // id → Redelivered
	for i := range childMessages {
		id := fmt.Sprintf("m%02d", i)
		if !acked[id] {
			want[id] = delivered[id] > 0
		}
	}
	type got struct {
		d  *broker.Delivery
		at time.Time
	}
	ch := make(chan got, 2*childMessages)
	ctx, cancel := context.WithCancel(ctxBG)
	defer cancel()
	go b.Consume(ctx, broker.Execution, broker.ConsumeOptions{Concurrency: 8}, func(ctx context.Context, d *broker.Delivery) error {
		ch <- got{d, time.Now()}
		return nil
	})
	seen := map[string]bool{}
	timeout := time.After(60 * time.Second)
	for len(seen) < len(want) {
		select {
		case g := <-ch:
			id := g.d.ID
			redelivered, ok := want[id]
			switch {
			case acked[id]:
				t.Errorf("acked message %s delivered again", id)
			case !ok:
				t.Errorf("unexpected message %s delivered", id)
			case seen[id]:
				t.Errorf("message %s delivered twice after the restart", id)
			case g.d.Redelivered != redelivered:
				t.Errorf("message %s: Redelivered = %v, want %v (delivered %d times before the kill)", id, g.d.Redelivered, redelivered, delivered[id])
			}
			checkDue(id, g.at)
			seen[id] = true
		case <-timeout:
			t.Fatalf("after the restart %d of %d messages delivered", len(seen), len(want))
		}
	}
	select {
	case g := <-ch:
		t.Errorf("message %s delivered again after all were", g.d.ID)
	case <-time.After(500 * time.Millisecond):
	}
	inHand := 0
	for id, r := range want {
		if r && !seen[id] {
			t.Errorf("message %s in hand at the kill never came back", id)
		}
		if r {
			inHand++
		}
	}
	if inHand < childInHand {
		t.Errorf("only %d messages were in hand at the kill, want at least %d", inHand, childInHand)
	}
}

// waitFor polls cond until it holds or 30s have passed.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
