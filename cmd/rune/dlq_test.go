package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rune-org/rune/broker"
	"github.com/rune-org/rune/client"
	"github.com/rune-org/rune/distributed"
	"github.com/rune-org/rune/engine"
	"github.com/rune-org/rune/expr"
	"github.com/rune-org/rune/internal/testinfra"
	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/metrics"
	"github.com/rune-org/rune/metrics/metricstest"
	"github.com/rune-org/rune/node"
	"github.com/rune-org/rune/nodes"
	"github.com/rune-org/rune/worker"
	"github.com/rune-org/rune/workflow"
)

// shoutType is a node type only "new" workers know: a rolling upgrade's
// old workers dead-letter the messages of workflows that use it.
type shoutType struct{}

func (shoutType) Check(*workflow.NodeCheck) {}
func (shoutType) Compile(*workflow.Node, *expr.Compiler) (node.Runner, error) {
	return shoutRunner{}, nil
}

type shoutRunner struct{}

func (shoutRunner) Run(context.Context, *node.Input) (node.Result, error) {
	return node.Result{Output: map[string]any{"said": "HELLO"}}, nil
}

const shoutWorkflow = `{"id": "shouting", "nodes": [
  {"id": "start", "type": "trigger", "trigger": true},
  {"id": "shout", "type": "shout"},
  {"id": "after", "type": "set", "parameters": {"values": {"heard": "{{ $shout.said }}"}}}],
 "edges": [{"id": "e1", "src": "start", "dst": "shout"}, {"id": "e2", "src": "shout", "dst": "after"}]}`

// startWorker runs a worker whose engine knows the node types of reg on
// rt's servers, until the returned stop is called.
func startWorker(t *testing.T, rt *distributed.Runtime, reg *node.Registry, rec *metrics.Recorder) (stop func()) {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	eng, err := engine.New(engine.Config{Registry: reg, Coord: rt.Coord, Barriers: rt.Barriers, Timers: rt.Timers, Logger: log, Metrics: rec})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := worker.Run(ctx, worker.Config{Broker: rt.Broker, Engine: eng, Concurrency: 4, Logger: log, Metrics: rec}); err != nil {
			t.Errorf("worker: %v", err)
		}
	})
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); wg.Wait() }) }
	t.Cleanup(stop)
	return stop
}

// A poison message — a workflow whose node type the old workers do not
// know — is listed by `rune dlq list` with its reason; once workers that
// know the type run, `rune dlq replay` runs it to completion, once, and the
// dead-letter queue is empty.
func TestDLQPoisonReplay(t *testing.T) {
	t.Parallel()
	amqpURL, redisURL, prefix := testinfra.AMQPURL(t), testinfra.RedisURL(t), testinfra.Name(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rt, err := distributed.Connect(ctx, distributed.Config{AMQPURL: amqpURL, RedisURL: redisURL, Prefix: prefix, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = rt.DeleteTopology(context.Background(), prefix)
		rt.Close()
	})
	oldTypes := nodes.NewRegistry(nodes.Options{})
	newTypes := nodes.NewRegistry(nodes.Options{})
	newTypes.Register("shout", shoutType{})

	oldMetrics := metrics.New(metrics.Config{})
	stopOld := startWorker(t, rt, oldTypes, oldMetrics)
	master, err := engine.New(engine.Config{Registry: newTypes, Coord: rt.Coord})
	if err != nil {
		t.Fatal(err)
	}
	wf, err := master.Compile([]byte(shoutWorkflow))
	if err != nil {
		t.Fatal(err)
	}
	execID := engine.NewExecutionID(time.Now())
	follow, err := rt.Broker.Follow(ctx, execID)
	if err != nil {
		t.Fatal(err)
	}
	if err := client.Start(ctx, rt.Broker, master, wf, execID, map[string]any{}); err != nil {
		t.Fatal(err)
	}

	// The old worker dead-letters the message of node "shout".
	var listed string
	for deadline := time.Now().Add(60 * time.Second); ; {
		code, out, errOut := runCLI(t, nil, "dlq", "list", "--amqp", amqpURL, "--prefix", prefix, "--json")
		if code != exitOK {
			t.Fatalf("rune dlq list: exit %d, stderr %s", code, errOut)
		}
		if out != "" {
			listed = out
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the poison message never reached the dead-letter queue")
		}
		time.Sleep(100 * time.Millisecond)
	}
	var entry dlqEntry
	if err := json.Unmarshal([]byte(strings.TrimSpace(listed)), &entry); err != nil {
		t.Fatalf("rune dlq list --json printed %q: %v", listed, err)
	}
	if entry.ExecutionID != execID || entry.Topic != string(broker.Execution) || !strings.Contains(entry.Reason, `unknown node type "shout"`) {
		t.Fatalf("listed %+v, want execution %s from %s with the unknown node type as reason", entry, execID, broker.Execution)
	}
	srv := httptest.NewServer(oldMetrics.Handler())
	defer srv.Close()
	if n := metricstest.Scrape(t, srv.URL)[`rune_dead_letters_total{topic="workflow.execution"}`]; n != 1 {
		t.Errorf("the old worker's rune_dead_letters_total = %v, want 1", n)
	}
	code, out, _ := runCLI(t, nil, "dlq", "list", "--amqp", amqpURL, "--prefix", prefix)
	if code != exitOK || !strings.Contains(out, "1 dead letter(s)") || !strings.Contains(out, entry.ID) || !strings.Contains(out, "unknown node type") {
		t.Errorf("rune dlq list: exit %d, output:\n%s\nwant one dead letter with its id and reason", code, out)
	}
	code, out, _ = runCLI(t, nil, "dlq", "show", entry.ID, "--amqp", amqpURL, "--prefix", prefix)
	if code != exitOK || !strings.Contains(out, "reason:") || !strings.Contains(out, `"current_node": "shout"`) {
		t.Errorf("rune dlq show: exit %d, output:\n%s\nwant the reason and the original message", code, out)
	}

	// Fix the cause: workers that know the node type replace the old one.
	stopOld()
	startWorker(t, rt, newTypes, nil)
	code, out, errOut := runCLI(t, nil, "dlq", "replay", entry.ID, "--amqp", amqpURL, "--prefix", prefix)
	if code != exitOK || strings.TrimSpace(out) != "replayed "+entry.ID {
		t.Fatalf("rune dlq replay: exit %d, stdout %q, stderr %s", code, out, errOut)
	}
	shouts := 0
	var comp *message.Completion
	for comp == nil {
		select {
		case m, ok := <-follow:
			if !ok {
				t.Fatal("follow ended before the completion")
			}
			switch b := m.Body.(type) {
			case *message.NodeStatus:
				if b.NodeID == "shout" && b.Status == message.StatusSuccess {
					shouts++
				}
			case *message.Completion:
				comp = b
			}
		case <-ctx.Done():
			t.Fatal("the replayed execution did not complete")
		}
	}
	if comp.Status != message.CompletionCompleted || shouts != 1 {
		t.Fatalf("completion %s after %d successful shouts, want completed after 1", comp.Status, shouts)
	}
	if after, _ := comp.FinalContext["$after"].(map[string]any); after["heard"] != "HELLO" {
		t.Errorf("final context %v, want $after.heard HELLO", comp.FinalContext)
	}
	code, out, _ = runCLI(t, nil, "dlq", "list", "--amqp", amqpURL, "--prefix", prefix)
	if code != exitOK || !strings.HasPrefix(out, "0 dead letter(s)") {
		t.Errorf("after the replay, rune dlq list: exit %d, %q; want an empty queue", code, out)
	}
	code, _, errOut = runCLI(t, nil, "dlq", "replay", entry.ID, "--amqp", amqpURL, "--prefix", prefix)
	if code != exitFailed || !strings.Contains(errOut, entry.ID) {
		t.Errorf("replaying it again: exit %d, stderr %q; want 1 and an error naming the id", code, errOut)
	}
}

// Usage mistakes exit 2 with a message naming what is wrong, before any
// server is contacted.
func TestDLQUsage(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"dlq"}, "want a subcommand"},
		{[]string{"dlq", "drop"}, `unknown subcommand "drop"`},
		{[]string{"dlq", "show"}, "exactly one message id"},
		{[]string{"dlq", "replay"}, "one or more message ids"},
		{[]string{"dlq", "purge"}, "--yes"},
		{[]string{"dlq", "list", "x"}, "takes no message ids"},
		{[]string{"dlq", "list", "--workflow", "f.json"}, "--workflow is for replay"},
		{[]string{"dlq", "list"}, "--amqp"},
	} {
		code, _, errOut := runCLI(t, nil, c.args...)
		if code != exitInvalid || !strings.Contains(errOut, c.want) {
			t.Errorf("rune %s: exit %d, stderr %q; want 2 and %q", strings.Join(c.args, " "), code, errOut, c.want)
		}
	}
}
