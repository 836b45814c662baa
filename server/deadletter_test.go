package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/rune-org/rune/message"
)

// TestDeadLetterEndsExecutionAndReplayResumesIt, on the distributed
// master (RFC 001 §9.2): a node message a worker dead-letters (here: its
// definition reference no longer resolves) ends its execution failed with
// code DEAD_LETTERED, without any completion from a worker — shown by the
// API, ?status=failed and the console's failure banner; `rune dlq replay`
// (with the definition) takes it up again, and it completes.
func TestDeadLetterEndsExecutionAndReplayResumesIt(t *testing.T) {
	d := newDeployment(t)
	first := d.worker()
	srv := d.server()
	d.waitHealthy(srv)
	d.waitLog("worker started", 60*time.Second)
	st := d.store()
	tg := &target{url: "http://" + srv.addr, token: newToken(t, st, "dlq"), store: st, output: d.logs.String}
	a := newAPI(t, tg)
	wfID := "dead_" + strings.ToLower(d.prefix)
	def := wfDef(wfID, `{"id":"s","type":"set","parameters":{"values":{"greeting":"hello {{ $trigger.name }}"}}}`, `{"id":"e1","src":"start","dst":"s"}`)
	a.pushWorkflow(def)

	// No worker while the first message is published; then its definition
	// goes from the definition store, so the next worker refuses it.
	first.stop()
	x := a.trigger(wfID, `{"name":"Ada"}`)
	a.waitFor(x.ID, "dispatched", func(x *execution) bool { return x.DispatchedAt != nil })
	dropDefinitions(t, d)
	d.worker()

	failed := a.waitStatus(x.ID, "failed", "completed", "halted", "cancelled")
	var comp message.Completion
	if err := json.Unmarshal(failed.Completion, &comp); err != nil || failed.Status != "failed" || comp.Status != message.CompletionFailed ||
		comp.FailureReason == nil || comp.FailureReason.NodeID != "s" || comp.FailureReason.Code != message.CodeDeadLettered ||
		!strings.Contains(comp.FailureReason.Message, "definition") {
		t.Fatalf("after the dead letter: status %s, completion %s; want failed with s's DEAD_LETTERED reason", failed.Status, failed.Completion)
	}
	var page struct {
		Items []execution `json:"items"`
	}
	a.want(http.StatusOK, "GET", "/v1/executions?workflow_id="+wfID+"&status=failed", nil, &page)
	if len(page.Items) != 1 || page.Items[0].ID != x.ID {
		t.Fatalf("?status=failed lists %+v, want %s", page.Items, x.ID)
	}
	if banner := consolePage(t, tg, "/executions/"+x.ID); !strings.Contains(banner, `id="failure"`) ||
		!strings.Contains(between(banner, `id="failure"`, `</p>`), "DEAD_LETTERED") {
		t.Fatalf("the console's execution page shows no DEAD_LETTERED failure banner")
	}

	// Following it ends at once, exit status 1, naming the dead letter.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	follow := exec.CommandContext(ctx, runeBin, "executions", "follow", x.ID, "--quiet", "--server", tg.url, "--token", tg.token)
	var ferr bytes.Buffer
	follow.Stderr = &ferr
	if err := follow.Run(); follow.ProcessState == nil || follow.ProcessState.ExitCode() != 1 || !strings.Contains(ferr.String(), "dead-lettered") {
		t.Fatalf("rune executions follow of a dead-lettered execution: %v, stderr %q; want exit status 1 naming the dead letter", err, ferr.String())
	}

	// Replay it, with its definition (the cause), from the dead-letter queue.
	out := d.rune(t, "dlq", "list", "--json")
	var dl struct {
		ID          string `json:"id"`
		ExecutionID string `json:"execution_id"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(out), &dl); err != nil || dl.ExecutionID != x.ID {
		t.Fatalf("rune dlq list: %s (%v), want the one dead letter of %s", out, err, x.ID)
	}
	defPath := filepath.Join(t.TempDir(), "def.json")
	if err := os.WriteFile(defPath, []byte(def), 0o600); err != nil {
		t.Fatal(err)
	}
	d.rune(t, "dlq", "replay", dl.ID, "--workflow", defPath)
	done := a.waitFor(x.ID, "completed after the replay", func(x *execution) bool { return x.Status == "completed" })
	comp = message.Completion{}
	if err := json.Unmarshal(done.Completion, &comp); err != nil || done.Status != "completed" || comp.Status != message.CompletionCompleted ||
		comp.FinalContext["$s"] == nil {
		t.Fatalf("after the replay: status %s, completion %s; want completed with $s", done.Status, done.Completion)
	}
	for _, n := range done.Nodes {
		if n.NodeID == "s" && (n.Status != message.StatusSuccess || n.Attempt != 1) {
			t.Fatalf("node s after the replay: %+v, want success on attempt 1", n)
		}
	}
	a.want(http.StatusOK, "GET", "/v1/executions?workflow_id="+wfID+"&status=failed", nil, &page)
	if len(page.Items) != 0 {
		t.Fatalf("?status=failed still lists %+v after the replay", page.Items)
	}
}

// waitLog waits until the deployment's processes have logged s.
func (d *deployment) waitLog(s string, within time.Duration) {
	d.t.Helper()
	deadline := time.Now().Add(within)
	for !strings.Contains(d.logs.String(), s) {
		if time.Now().After(deadline) {
			d.t.Fatalf("no %q logged within %s", s, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// dropDefinitions deletes the deployment's definition store in Redis.
func dropDefinitions(t *testing.T, d *deployment) {
	t.Helper()
	opts, err := goredis.ParseURL(d.redisURL)
	if err != nil {
		t.Fatal(err)
	}
	rc := goredis.NewClient(opts)
	defer rc.Close()
	ctx := context.Background()
	keys, err := rc.Keys(ctx, d.prefix+":{definitions*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("the definition store's keys under %s: %v, %v", d.prefix, keys, err)
	}
	if err := rc.Del(ctx, keys...).Err(); err != nil {
		t.Fatal(err)
	}
}

// rune runs a rune command against the deployment's RabbitMQ and returns
// its standard output; it fails the test unless the command exits 0.
func (d *deployment) rune(t *testing.T, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, runeBin, append(args, "--amqp", d.amqpURL, "--prefix", d.prefix)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("rune %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out
}

// consolePage logs in to the console with the target's token and returns
// the page at path.
func consolePage(t *testing.T, tg *target, path string) string {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	res, err := hc.PostForm(tg.url+"/login", url.Values{"token": {tg.token}, "next": {"/"}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	res, err = hc.Get(tg.url + path)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, res.StatusCode, b)
	}
	return string(b)
}
