package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	goredis "github.com/redis/go-redis/v9"

	"github.com/rune-org/rune/broker"
	"github.com/rune-org/rune/broker/amqp"
	"github.com/rune-org/rune/broker/sign"
	"github.com/rune-org/rune/client"
	"github.com/rune-org/rune/internal/testinfra"
	"github.com/rune-org/rune/message"
)

// roleWorkflows are run under the three roles: one per kind of traffic
// (first messages, fan-out, timers, delayed retries, barrier timeouts).
func roleWorkflows(flaky string) map[string]string {
	wf := func(id, nodes, edges string) string {
		return fmt.Sprintf(`{"id":%q,"nodes":[{"id":"start","type":"trigger","trigger":true},%s],"edges":[%s]}`, id, nodes, edges)
	}
	return map[string]string{
		"start": wf("r_start", `{"id":"a","type":"set","parameters":{"values":{"v":"{{ $trigger.n + 1 }}"}}}`,
			`{"id":"e1","src":"start","dst":"a"}`),
		"fanout": wf("r_fanout", `{"id":"each","type":"split","parameters":{"input_array":"{{ [1, 2, 3] }}"}},
			{"id":"double","type":"set","parameters":{"values":{"v":"{{ $item * 2 }}"}}},
			{"id":"all","type":"aggregator","parameters":{"value":"{{ $double.v }}"}}`,
			`{"id":"e1","src":"start","dst":"each"},{"id":"e2","src":"each","dst":"double"},{"id":"e3","src":"double","dst":"all"}`),
		"wait": wf("r_wait", `{"id":"pause","type":"wait","parameters":{"amount":1,"unit":"seconds"}},
			{"id":"after","type":"set","parameters":{"values":{"v":1}}}`,
			`{"id":"e1","src":"start","dst":"pause"},{"id":"e2","src":"pause","dst":"after"}`),
		"retry": wf("r_retry", fmt.Sprintf(`{"id":"call","type":"http","retry":{"max_attempts":3,"initial_delay":"200ms"},"parameters":{"url":%q}}`, flaky),
			`{"id":"e1","src":"start","dst":"call"}`),
		"merge timeout": wf("r_merge", `{"id":"fast","type":"set","parameters":{"values":{"v":1}}},
			{"id":"slow","type":"delay","parameters":{"delayMs":2500}},
			{"id":"join","type":"merge","parameters":{"timeout":1},"error":{"type":"branch","error_edge":"e_late"}},
			{"id":"joined","type":"set","parameters":{"values":{"v":1}}},
			{"id":"late","type":"set","parameters":{"values":{"why":"{{ $error.code }}"}}}`,
			`{"id":"e1","src":"start","dst":"fast"},{"id":"e2","src":"start","dst":"slow"},{"id":"e3","src":"fast","dst":"join"},
			{"id":"e4","src":"slow","dst":"join"},{"id":"e_ok","src":"join","dst":"joined"},{"id":"e_late","src":"join","dst":"late"}`),
	}
}

// Issue 12, finding 1: the documented permissions broke `rune start`. Here
// the users get exactly what `rune permissions` prints — RabbitMQ
// permissions in a vhost of their own and Redis ACL users — and the
// workflows run under them, with signed messages; each role is refused what
// it must not do.
func TestRolesEndToEnd(t *testing.T) {
	t.Parallel()
	testinfra.RequireCommand(t, "rabbitmqctl")
	testinfra.RequireCommand(t, "redis-cli")
	base, err := url.Parse(testinfra.AMQPURL(t))
	if err != nil {
		t.Fatal(err)
	}
	redisURL := testinfra.RedisURL(t)
	name := testinfra.Name(t)
	vhost := "rune-" + name
	password := "pw-" + name
	user := func(role string) string { return name + "-" + role }
	roles := []string{amqp.RoleWorker, amqp.RoleMaster, amqp.RoleScheduler}

	admin := testinfra.OwnVhost(t, vhost) // the test's own administrator, to look at the DLQ
	ropts, err := goredis.ParseURL(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	radmin := goredis.NewClient(ropts)
	t.Cleanup(func() {
		ctx := context.Background()
		for _, role := range roles {
			_ = exec.Command("rabbitmqctl", "-q", "delete_user", user(role)).Run()
			radmin.Do(ctx, "ACL", "DELUSER", user(role))
		}
		iter := radmin.Scan(ctx, 0, name+":*", 1000).Iterator()
		for iter.Next(ctx) {
			radmin.Del(ctx, iter.Val())
		}
		radmin.Close()
	})

	// What `rune permissions` prints, run as printed.
	for _, role := range roles {
		out, errOut, code := runCLI(t, 30*time.Second, "permissions", "--role", role, "--prefix", name, "--vhost", vhost, "--user", user(role))
		if code != 0 {
			t.Fatalf("rune permissions --role %s: exit %d: %s", role, code, errOut)
		}
		for _, line := range strings.Split(out, "\n") {
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			line = strings.ReplaceAll(line, "PASSWORD", password)
			line = strings.Replace(line, "redis-cli ", "redis-cli -u "+shellWord(redisURL)+" ", 1)
			if out, err := exec.Command("sh", "-c", line).CombinedOutput(); err != nil || strings.Contains(string(out), "ERR") {
				t.Fatalf("%s: %v\n%s", line, err, out)
			}
		}
	}
	amqpURL := func(role string) string {
		u := *base
		u.User = url.UserPassword(user(role), password)
		u.Path = "/" + vhost
		return u.String()
	}
	redisFor := func(role string) string {
		u, _ := url.Parse(redisURL)
		u.User = url.UserPassword(user(role), password)
		return u.String()
	}
	server := func(role string) []string {
		return []string{"--amqp", amqpURL(role), "--redis", redisFor(role), "--prefix", name}
	}
	keys := "k1:" + name + "-signing-key"
	env := []string{sign.EnvVar + "=" + keys}

	// An API that fails once, then answers: the retry goes through a delay queue.
	var calls atomic.Int32
	flaky := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, `{"ok": true}`)
	}))
	defer flaky.Close()

	w := startProcEnv(t, "worker", env, append(append([]string{"worker"}, server(amqp.RoleWorker)...), allowLoopback...)...)
	w.waitLog(t, "worker started", 30*time.Second)
	s := startProcEnv(t, "scheduler", env, append([]string{"scheduler"}, server(amqp.RoleScheduler)...)...)
	s.waitLog(t, "scheduler started", 30*time.Second)

	dir := t.TempDir()
	for wfName, def := range roleWorkflows(flaky.URL) {
		path := filepath.Join(dir, strings.ReplaceAll(wfName, " ", "_")+".json")
		if err := os.WriteFile(path, []byte(def), 0o600); err != nil {
			t.Fatal(err)
		}
		stdout, stderr, code := runCLIEnv(t, 90*time.Second, env, append([]string{"start", path, "--input", `{"n": 1}`, "--wait", "--json", "--quiet"}, server(amqp.RoleMaster)...)...)
		if code != 0 {
			t.Fatalf("%s: rune start --wait exit %d\nstdout: %s\nstderr: %s", wfName, code, stdout, stderr)
		}
		var c message.Completion
		if err := json.Unmarshal([]byte(stdout), &c); err != nil || c.Status != message.CompletionCompleted {
			t.Fatalf("%s: completion %s (%v)", wfName, stdout, err)
		}
		check := map[string]func() bool{
			"start":         func() bool { return fmt.Sprint(c.FinalContext["$a"]) == "map[v:2]" },
			"fanout":        func() bool { return fmt.Sprint(c.FinalContext["$all"].(map[string]any)["items"]) == "[2 4 6]" },
			"wait":          func() bool { return c.FinalContext["$after"] != nil },
			"retry":         func() bool { return calls.Load() == 2 },
			"merge timeout": func() bool { return fmt.Sprint(c.FinalContext["$late"]) == "map[why:TIMEOUT]" },
		}[wfName]
		if !check() {
			t.Errorf("%s: unexpected final context %v", wfName, c.FinalContext)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	signing, err := sign.Parse(keys)
	if err != nil {
		t.Fatal(err)
	}
	open := func(role, brokerRole string) *amqp.Broker {
		b, err := amqp.New(ctx, amqp.Config{URL: amqpURL(role), Prefix: name + ".", Role: brokerRole, Logger: testLogger(), Signing: signing})
		if err != nil {
			t.Fatalf("connect as %s: %v", role, err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}
	master := open(amqp.RoleMaster, amqp.RoleMaster)

	// Dead letters: the worker dead-letters a message of no execution, and
	// the master following it learns so instead of waiting forever.
	exec := "exec_nobody_started"
	events, err := master.Follow(ctx, exec)
	if err != nil {
		t.Fatal(err)
	}
	def := roleWorkflows("")["start"]
	m := &message.NodeExecution{MessageID: "m-dead", WorkflowID: "r_start", ExecutionID: exec, CurrentNode: "a", FromNode: "start",
		Attempt: 1, StartedAt: time.Now().UTC(), WorkflowDefinition: json.RawMessage(def), AccumulatedContext: map[string]any{}}
	if err := master.Publish(ctx, broker.Message{Topic: broker.Execution, ID: m.MessageID, Key: exec, Body: m}).Wait(ctx); err != nil {
		t.Fatalf("master publish: %v", err)
	}
	_, err = client.Wait(ctx, events, nil)
	var de *client.DeadLetteredError
	if !errors.As(err, &de) {
		t.Fatalf("following a dead-lettered execution: %v, want a DeadLetteredError", err)
	}
	adminConn, err := amqp091.Dial(admin)
	if err != nil {
		t.Fatal(err)
	}
	defer adminConn.Close()
	waitFor(t, 30*time.Second, "the dead letter in workflow.dlq", func() bool {
		ch, err := adminConn.Channel()
		if err != nil {
			t.Fatal(err)
		}
		defer ch.Close()
		q, err := ch.QueueDeclarePassive(name+".workflow.dlq", true, false, false, false, nil)
		return err == nil && q.Messages >= 1
	})

	// Refusals, each on a connection of its own (a refusal closes the channel).
	refused := func(what string, err error) {
		t.Helper()
		var aerr *amqp091.Error
		if !errors.As(err, &aerr) || aerr.Code != amqp091.AccessRefused {
			t.Errorf("%s: %v, want ACCESS_REFUSED", what, err)
		}
	}
	consume := func(role, queue string) error {
		conn, err := amqp091.Dial(amqpURL(role))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		ch, err := conn.Channel()
		if err != nil {
			t.Fatal(err)
		}
		_, err = ch.Consume(name+"."+queue, "", false, false, false, false, nil)
		return err
	}
	publish := func(role, exchange, key string) error {
		conn, err := amqp091.Dial(amqpURL(role))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		ch, err := conn.Channel()
		if err != nil {
			t.Fatal(err)
		}
		if err := ch.Confirm(false); err != nil {
			return err
		}
		closed := ch.NotifyClose(make(chan *amqp091.Error, 1))
		if err := ch.PublishWithContext(ctx, name+"."+exchange, key, false, false, amqp091.Publishing{Body: []byte("{}")}); err != nil {
			return err
		}
		select {
		case e := <-closed:
			return e
		case <-time.After(10 * time.Second):
			return nil
		}
	}
	refused("master consuming workflow.execution", consume(amqp.RoleMaster, "workflow.execution"))
	refused("scheduler consuming workflow.execution", consume(amqp.RoleScheduler, "workflow.execution"))
	refused("scheduler consuming workflow.completion", consume(amqp.RoleScheduler, "workflow.completion"))
	refused("worker consuming workflow.dlq", consume(amqp.RoleWorker, "workflow.dlq"))
	refused("master consuming workflow.dlq", consume(amqp.RoleMaster, "workflow.dlq"))
	refused("master publishing a timeout", publish(amqp.RoleMaster, "workflow.timeout.x", name+".workflow.timeout.process"))
	for _, role := range roles {
		rc := goredis.NewClient(mustRedisOpts(t, redisFor(role)))
		if err := rc.Set(ctx, name+":ok", "1", time.Minute).Err(); err != nil {
			t.Errorf("redis %s: a key under the prefix: %v", role, err)
		}
		for what, cmd := range map[string][]any{
			"another prefix's key": {"GET", "other-" + name + ":x"},
			"FLUSHALL":             {"FLUSHALL"},
			"CONFIG GET":           {"CONFIG", "GET", "requirepass"},
			"KEYS":                 {"KEYS", "*"},
		} {
			if err := rc.Do(ctx, cmd...).Err(); err == nil || !strings.Contains(err.Error(), "NOPERM") {
				t.Errorf("redis %s: %s: %v, want NOPERM", role, what, err)
			}
		}
		rc.Close()
	}
}

func mustRedisOpts(t *testing.T, u string) *goredis.Options {
	t.Helper()
	o, err := goredis.ParseURL(u)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// shellWord quotes s for sh.
func shellWord(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
