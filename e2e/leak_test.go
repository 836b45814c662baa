package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/rune-org/rune/internal/testinfra"
	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/runtimetest"
	"github.com/rune-org/rune/secrets"
)

// Issue 12, "done when": a grep of every message (all that is published in
// the test's vhost, through RabbitMQ's firehose), every log line, the
// output of rune start and every value kept in Redis, after a distributed
// run with credentials echoed back, a cross-host redirect, failures and
// retries, finds no form of the secret.
func TestNoSecretInMessagesLogsOrOutput(t *testing.T) {
	t.Parallel()
	testinfra.RequireCommand(t, "rabbitmqctl")
	vhost := "rune-leak-" + testinfra.Name(t)
	amqpURL := testinfra.OwnVhost(t, vhost)
	testinfra.Rabbitmqctl(t, "trace_on", "-p", vhost)
	c := newCluster(t, amqpURL)

	// The spy: RabbitMQ copies every message published in the vhost, to
	// any exchange, to amq.rabbitmq.trace.
	spy := testinfra.NewSpy(t, amqpURL)

	var env []string
	for ref, fields := range runtimetest.LeakSecrets() {
		b, _ := json.Marshal(fields)
		env = append(env, secrets.Var(ref)+"="+string(b))
	}
	env = append(env, "RUNE_LOG_LEVEL=debug")
	w := startProcEnv(t, "worker", env, append(append([]string{"worker"}, c.serverArgs()...), allowLoopback...)...)
	w.waitLog(t, "worker started", 30*time.Second)

	srv := runtimetest.NewLeakServer(t)
	path := filepath.Join(t.TempDir(), "leak.json")
	if err := os.WriteFile(path, []byte(runtimetest.LeakWorkflow(srv)), 0o600); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := runCLIEnv(t, 90*time.Second, []string{"RUNE_LOG_LEVEL=debug"},
		append([]string{"start", path, "--input", `{"k": "v"}`, "--wait", "--json"}, c.serverArgs()...)...)
	if code != 1 { // failed at fail_halt, as the workflow intends
		t.Fatalf("rune start --wait: exit %d, want 1 (failed)\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	var comp message.Completion
	if err := json.Unmarshal([]byte(stdout), &comp); err != nil || comp.Status != message.CompletionFailed || comp.FailureReason == nil || comp.FailureReason.NodeID != "fail_halt" {
		t.Fatalf("completion %s (%v), want failed by fail_halt", stdout, err)
	}
	select {
	case host := <-srv.CrossHost:
		t.Errorf("a credential followed the redirect to %s", host)
	default:
	}

	// Everything published, until the completion's copy has come by.
	if !spy.Until(60*time.Second, func(d amqp091.Delivery) bool { return bytes.Contains(d.Body, []byte(`"final_context"`)) }) {
		t.Fatalf("the completion never showed on the wire (%d messages seen)", spy.Len())
	}
	wire, n := spy.Wire(), spy.Len()
	if !bytes.Contains(wire, []byte("Bearer [redacted]")) {
		t.Fatalf("the echoed header is not on the wire: the spy saw the wrong traffic (%d messages)", n)
	}

	// What Redis keeps of the execution: records, contexts, barriers.
	var stored bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	iter := c.redis.Scan(ctx, 0, c.prefix+":*", 1000).Iterator()
	for iter.Next(ctx) {
		key := iter.Val()
		switch c.redis.Type(ctx, key).Val() {
		case "string":
			stored.WriteString(c.redis.Get(ctx, key).Val())
		case "hash":
			for k, v := range c.redis.HGetAll(ctx, key).Val() {
				stored.WriteString(k + "=" + v + "\n")
			}
		}
	}

	for what, data := range map[string]string{
		"published messages": string(wire),
		"worker logs":        w.stderr.String(),
		"rune start output":  stdout + stderr,
		"Redis values":       stored.String(),
	} {
		if f := runtimetest.FindLeak([]byte(data)); f != "" {
			i := strings.Index(data, f)
			t.Errorf("%s hold the secret (as %q): …%s…", what, f, data[max(0, i-200):min(len(data), i+100)])
		}
	}
	if !strings.Contains(w.stderr.String(), "Bearer [redacted]") {
		t.Errorf("the log node's line (with the echoed headers) is not in the worker's log:\n%s", w.stderr.String())
	}
	t.Logf("checked %d published messages, %d bytes of worker logs, %d bytes in Redis", n, len(w.stderr.String()), stored.Len())
}
