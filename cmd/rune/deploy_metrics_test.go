package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/rune-org/rune/internal/testinfra"
	"github.com/rune-org/rune/metrics/metricstest"
	"github.com/rune-org/rune/store/storetest"
)

// metricName finds the metrics a PromQL text names: Rune's own and the Go
// and process collectors'. Recorded series (rune:…) are expanded to the
// metrics of their rule; Prometheus's own `up` is not scraped.
var metricName = regexp.MustCompile(`\b(?:rune|go|process)_[a-z0-9_]*[a-z0-9]\b`)

// recordingRules reads deploy/prometheus/rules.yml's recorded series and
// the expression of each (the file is YAML, but its rules are one
// `record:` line and one `expr:` line each, which is all this needs).
func recordingRules(t *testing.T, raw string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^\s*- record: (\S+)\n\s*expr: (.+)$`).FindAllStringSubmatch(raw, -1) {
		out[m[1]] = m[2]
	}
	if len(out) == 0 {
		t.Fatal("deploy/prometheus/rules.yml: no recording rules found")
	}
	return out
}

// metricsIn returns the metrics expr names, through recorded series.
func metricsIn(expr string, recorded map[string]string) []string {
	names := metricName.FindAllString(expr, -1)
	for _, r := range regexp.MustCompile(`rune:[a-z0-9_:]+`).FindAllString(expr, -1) {
		names = append(names, metricName.FindAllString(recorded[r], -1)...)
	}
	return names
}

// The metrics deploy/ names exist: a real worker, scheduler and server run
// workflows (an http node that succeeds, one retried until its execution
// fails, a delay the scheduler fires), and then every metric of
// deploy/prometheus/rules.yml is in some process's /metrics, and every
// metric of a row of deploy/grafana/rune.json in the /metrics of the role
// that row is about. A metric renamed in the code, or misspelt in deploy/,
// fails here. The probes' paths of deploy/kubernetes answer 200 on each.
func TestDeployMetricsExist(t *testing.T) {
	t.Parallel()
	rulesRaw, err := os.ReadFile("../../deploy/prometheus/rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	dashRaw, err := os.ReadFile("../../deploy/grafana/rune.json")
	if err != nil {
		t.Fatal(err)
	}
	recorded := recordingRules(t, string(rulesRaw))
	var dash struct {
		Panels []struct {
			Type, Title string
			Targets     []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(dashRaw, &dash); err != nil {
		t.Fatalf("deploy/grafana/rune.json: %v", err)
	}
	// What each role must expose: the dashboard's rows by role.
	need := map[string]map[string]bool{"worker": {}, "scheduler": {}, "server": {}}
	role := ""
	for _, p := range dash.Panels {
		if p.Type == "row" {
			role = ""
			for r := range need {
				if strings.Contains(p.Title, "(rune-"+r+")") {
					role = r
				}
			}
			if role == "" {
				t.Fatalf("deploy/grafana/rune.json: row %q names no role (rune-worker, rune-scheduler, rune-server)", p.Title)
			}
			continue
		}
		for _, q := range p.Targets {
			for _, n := range metricsIn(q.Expr, recorded) {
				need[role][n] = true
			}
		}
	}
	anywhere := map[string]bool{}
	for _, n := range metricsIn(string(rulesRaw), recorded) {
		anywhere[n] = true
	}

	amqpURL, redisURL, prefix := testinfra.AMQPURL(t), testinfra.RedisURL(t), testinfra.Name(t)
	t.Cleanup(func() { cleanupPrefix(t, amqpURL, redisURL, prefix) })
	called := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/fail" {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte(`{"ok": true}`))
	}))
	defer called.Close()
	conn := []string{"--amqp", amqpURL, "--redis", redisURL, "--prefix", prefix, "--log-format", "json"}
	worker, _, _ := serveCommand(t, append([]string{"worker", "--metrics-addr", "127.0.0.1:0", "--concurrency", "4",
		"--egress-allow", strings.TrimPrefix(called.URL, "http://")}, conn...)...)
	scheduler, _, _ := serveCommand(t, append([]string{"scheduler", "--metrics-addr", "127.0.0.1:0"}, conn...)...)
	const token = "deploy-metrics-test-token"
	server := startDistributedServer(t, map[string]string{"RUNE_API_TOKEN": token},
		append([]string{"server", "--addr", freeAddr(t), "--postgres", storetest.PostgresURL(t)}, conn...)...)

	dir := t.TempDir()
	for _, wf := range []struct{ name, body, want string }{
		{"deploy-ok", `{"id": "deploy-ok", "nodes": [
		  {"id": "start", "type": "trigger", "trigger": true},
		  {"id": "call", "type": "http", "parameters": {"url": "` + called.URL + `/ok"}},
		  {"id": "pause", "type": "delay", "parameters": {"duration": "PT0.2S"}},
		  {"id": "say", "type": "log", "parameters": {"message": "done"}}],
		 "edges": [{"id": "e1", "src": "start", "dst": "call"}, {"id": "e2", "src": "call", "dst": "pause"}, {"id": "e3", "src": "pause", "dst": "say"}]}`, "completed"},
		{"deploy-fail", `{"id": "deploy-fail", "nodes": [
		  {"id": "start", "type": "trigger", "trigger": true},
		  {"id": "call", "type": "http", "parameters": {"url": "` + called.URL + `/fail"}, "retry": {"max_attempts": 2, "initial_delay": "10ms"}}],
		 "edges": [{"id": "e1", "src": "start", "dst": "call"}]}`, "failed"},
	} {
		path := filepath.Join(dir, wf.name+".json")
		if err := os.WriteFile(path, []byte(wf.body), 0o600); err != nil {
			t.Fatal(err)
		}
		_, out, errOut := runCLI(t, nil, append([]string{"start", path, "--wait", "--json", "--quiet"}, conn[:6]...)...)
		var done struct{ Status string }
		if json.Unmarshal([]byte(out), &done) != nil || done.Status != wf.want {
			t.Fatalf("rune start %s: want status %s\n%s\n%s", wf.name, wf.want, out, errOut)
		}
	}

	scrapeServer := func() map[string]float64 {
		req, _ := http.NewRequest(http.MethodGet, server+"/metrics", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("scrape the server: %v", err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("scrape the server: %s", resp.Status)
		}
		return metricstest.Parse(t, server+"/metrics", resp.Body)
	}
	scrapes := map[string]func() map[string]float64{
		"worker":    func() map[string]float64 { return metricstest.Scrape(t, worker+"/metrics") },
		"scheduler": func() map[string]float64 { return metricstest.Scrape(t, scheduler+"/metrics") },
		"server":    scrapeServer,
	}
	// Sampled gauges (queue depths, timers) and counters bumped after a
	// completion arrive a little later: wait for them.
	names := map[string]map[string]bool{}
	for r, scrape := range scrapes {
		names[r] = metricNames(metricstest.Until(t, scrape, func(got map[string]float64) []string {
			return missing(metricNames(got), need[r], "rune-"+r)
		}))
	}
	for n := range anywhere {
		if !names["worker"][n] && !names["scheduler"][n] && !names["server"][n] {
			t.Errorf("deploy/prometheus/rules.yml names %s, which no worker, scheduler or server exposes", n)
		}
	}

	// The probes of deploy/kubernetes answer on each role.
	bases := map[string]string{"worker": worker, "scheduler": scheduler, "server": server}
	for r, base := range bases {
		raw, err := os.ReadFile("../../deploy/kubernetes/" + r + ".yaml")
		if err != nil {
			t.Fatal(err)
		}
		paths := regexp.MustCompile(`(?m)^\s*path: (/\S+)$`).FindAllStringSubmatch(string(raw), -1)
		if len(paths) < 2 {
			t.Errorf("deploy/kubernetes/%s.yaml: %d probe paths, want liveness and readiness", r, len(paths))
		}
		for _, p := range paths {
			if code, body := get(t, base+p[1]); code != http.StatusOK {
				t.Errorf("rune %s: GET %s (a probe of deploy/kubernetes/%s.yaml): %d %q, want 200", r, p[1], r, code, body)
			}
		}
	}
}

// metricNames are the metric names of a scrape's series.
func metricNames(series map[string]float64) map[string]bool {
	out := map[string]bool{}
	for s := range series {
		if i := strings.IndexByte(s, '{'); i >= 0 {
			s = s[:i]
		}
		out[s] = true
	}
	return out
}

func missing(have, want map[string]bool, role string) []string {
	var out []string
	for n := range want {
		if !have[n] {
			out = append(out, "deploy/grafana/rune.json's "+role+" row names "+n+", which rune "+strings.TrimPrefix(role, "rune-")+" does not expose")
		}
	}
	sort.Strings(out)
	return out
}

// startDistributedServer runs `rune server` with args and environment env
// until the test ends, and returns its base URL once /healthz answers.
func startDistributedServer(t *testing.T, env map[string]string, args ...string) string {
	t.Helper()
	var addr string
	for i, a := range args {
		if a == "--addr" {
			addr = args[i+1]
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	logs := &testinfra.Buffer{}
	done := make(chan int, 1)
	go func() {
		done <- runMain(ctx, &cliEnv{stdout: logs, stderr: logs, getenv: func(k string) string { return env[k] }}, args)
	}()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != exitOK {
			t.Errorf("rune server exited %d:\n%s", code, logs.String())
		}
	})
	base := (&url.URL{Scheme: "http", Host: addr}).String()
	for deadline := time.Now().Add(time.Minute); ; {
		if resp, err := http.Get(base + "/healthz"); err == nil {
			resp.Body.Close()
			return base
		}
		select {
		case code := <-done:
			done <- code
			t.Fatalf("rune server exited %d:\n%s", code, logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("rune server not answering after a minute:\n%s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// KEDA's RabbitMQ user, made as docs/operations.md ("Deploying") says,
// reads workflow.execution's depth with a passive declare and can take no
// message: it has no permission at all.
func TestKEDAUserReadsDepthOnly(t *testing.T) {
	t.Parallel()
	docs, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	perms := regexp.MustCompile(`rabbitmqctl set_permissions -p rune rune-keda '([^']*)' '([^']*)' '([^']*)'`).FindStringSubmatch(string(docs))
	if perms == nil {
		t.Fatal("docs/operations.md: no `rabbitmqctl set_permissions -p rune rune-keda …` for KEDA's user")
	}
	vhost := testinfra.Name(t)
	adminURL := testinfra.OwnVhost(t, vhost)
	user, password := "keda-"+vhost, testinfra.Name(t)
	testinfra.Rabbitmqctl(t, "add_user", user, password)
	t.Cleanup(func() { _ = exec.Command("rabbitmqctl", "-q", "delete_user", user).Run() })
	testinfra.Rabbitmqctl(t, "set_permissions", "-p", vhost, user, perms[1], perms[2], perms[3])

	ch := channel(t, adminURL)
	if _, err := ch.QueueDeclare("workflow.execution", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := ch.Publish("", "workflow.execution", false, false, amqp091.Publishing{Body: []byte("{}")}); err != nil {
			t.Fatal(err)
		}
	}

	u, _ := url.Parse(adminURL)
	u.User = url.UserPassword(user, password)
	kch := channel(t, u.String())
	// The publishes above are on another connection: wait until the
	// queue holds them.
	deadline := time.Now().Add(30 * time.Second)
	for {
		q, err := kch.QueueDeclarePassive("workflow.execution", true, false, false, false, nil)
		if err != nil {
			t.Fatalf("KEDA's user cannot read the depth: %v", err)
		}
		if q.Messages == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("depth %d, want 3", q.Messages)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, _, err := kch.Get("workflow.execution", false); err == nil {
		t.Error("KEDA's user took a message from workflow.execution")
	} else if !strings.Contains(err.Error(), "ACCESS_REFUSED") {
		t.Errorf("basic.get: %v, want ACCESS_REFUSED", err)
	}
}

// channel opens a connection to amqpURL and a channel on it, closed when
// the test ends.
func channel(t *testing.T, amqpURL string) *amqp091.Channel {
	t.Helper()
	conn, err := amqp091.Dial(amqpURL)
	if err != nil {
		t.Fatalf("connect to RabbitMQ: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	return ch
}
