package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rune-org/rune/internal/catcher"
)

// The embedded default (`rune server --data DIR`) is durable: executions
// that wait on timers, retry with backoff, send an email and wait inside a
// split survive the server being killed (kill -9) or stopped (SIGTERM) and
// restarted on the same directory; each completes with its right final
// context, and no email goes out twice. While it runs, a second server on
// the directory is refused and disturbs nothing.
func TestDurableServerKill(t *testing.T) {
	t.Parallel()
	testDurableServer(t, func(t *testing.T, p *proc) {
		if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		p.wait(t, 30*time.Second)
	})
}

func TestDurableServerSIGTERM(t *testing.T) {
	t.Parallel()
	// The drain is bounded by --drain-timeout (5s); what waits stays durable.
	testDurableServer(t, func(t *testing.T, p *proc) { p.terminate(t, 60*time.Second) })
}

// durableExecutions is how many executions each scenario runs.
const durableExecutions = 100

// durableWorkflow: an http call that fails its first 1–3 attempts (retried
// with backoff), a wait of 2–3 s, an email, then a split of two items whose
// branches each wait 1 s before an aggregator sums them.
const durableWorkflow = `{"id": "durable", "nodes": [
	{"id": "start", "type": "trigger", "trigger": true},
	{"id": "fetch", "type": "http", "parameters": {"method": "GET", "url": "%s/flaky/{{ $trigger.n }}", "timeout": "5s"},
		"retry": {"max_attempts": 6, "initial_delay": "1s", "multiplier": 1.5}},
	{"id": "pause", "type": "wait", "parameters": {"amount": "{{ $trigger.secs }}", "unit": "seconds"}},
	{"id": "mail", "type": "email", "credentials": {"ref": "mail"},
		"parameters": {"from": "a@rune.test", "to": "user{{ $trigger.n }}@rune.test", "subject": "n {{ $trigger.n }}", "text": "x"}},
	{"id": "each", "type": "split", "parameters": {"input_array": "{{ $trigger.items }}"}},
	{"id": "hold", "type": "wait", "parameters": {"amount": 1, "unit": "seconds"}},
	{"id": "tag", "type": "set", "parameters": {"values": {"v": "{{ $item * 10 }}"}}},
	{"id": "gather", "type": "aggregator", "parameters": {"timeout": 300}},
	{"id": "done", "type": "set", "parameters": {"values": {"n": "{{ $trigger.n }}", "got": "{{ $fetch.body.n }}", "sum": "{{ sum(map($gather.items, .v)) }}"}}}
], "edges": [
	{"id": "e1", "src": "start", "dst": "fetch"},
	{"id": "e2", "src": "fetch", "dst": "pause"},
	{"id": "e3", "src": "pause", "dst": "mail"},
	{"id": "e4", "src": "mail", "dst": "each"},
	{"id": "e5", "src": "each", "dst": "hold"},
	{"id": "e6", "src": "hold", "dst": "tag"},
	{"id": "e7", "src": "tag", "dst": "gather"},
	{"id": "e8", "src": "gather", "dst": "done"}
]}`

// flaky answers /flaky/N with 503 to its first 1 + N%3 requests, then
// {"n": N}.
type flaky struct {
	mu    sync.Mutex
	calls map[int]int
}

func (f *flaky) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/flaky/"))
	if err != nil {
		http.NotFound(w, r)
		return
	}
	f.mu.Lock()
	f.calls[n]++
	c := f.calls[n]
	f.mu.Unlock()
	if c <= 1+n%3 {
		http.Error(w, "try again", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"n": %d}`, n)
}

// embeddedServer is a `rune server` process on a data directory, and how to
// call its API.
type embeddedServer struct {
	*proc
	url string
}

const durableToken = "durable-test-token"

func startEmbedded(t *testing.T, name, data string) *embeddedServer {
	t.Helper()
	p := startProcEnv(t, name, []string{"RUNE_API_TOKEN=" + durableToken, "RUNE_EGRESS_ALLOW=127.0.0.0/8"},
		"server", "--data", data, "--addr", "127.0.0.1:0", "--dispatch-lease", "2s", "--drain-timeout", "5s")
	p.waitLog(t, "server listening", 60*time.Second)
	m := regexp.MustCompile(`server listening.*?addr="?([0-9.]+:[0-9]+)`).FindStringSubmatch(p.stderr.String())
	if m == nil {
		t.Fatalf("%s: no address in its log:\n%s", name, p.stderr.String())
	}
	return &embeddedServer{proc: p, url: "http://" + m[1]}
}

// call sends a request to the API and decodes its answer into out (when not
// nil), failing t unless the status is want.
func (s *embeddedServer) call(t *testing.T, method, path string, body any, want int, out any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, s.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+durableToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %d %s, want %d", method, path, resp.StatusCode, b, want)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, path, err, b)
		}
	}
}

// durableExecution is what the test reads of an execution.
type durableExecution struct {
	ID         string `json:"id"`
	Status     string `json:"status"`
	Completion *struct {
		Status       string         `json:"status"`
		FinalContext map[string]any `json:"final_context"`
	} `json:"completion"`
	Input map[string]any `json:"input"`
}

func (s *embeddedServer) executions(t *testing.T) []durableExecution {
	t.Helper()
	var page struct {
		Items []durableExecution `json:"items"`
	}
	s.call(t, "GET", "/v1/executions?workflow_id=durable&limit=500", nil, http.StatusOK, &page)
	return page.Items
}

func testDurableServer(t *testing.T, stop func(*testing.T, *proc)) {
	data := filepath.Join(t.TempDir(), "data")
	api := httptest.NewServer(&flaky{calls: map[int]int{}})
	t.Cleanup(api.Close)
	mail, err := catcher.StartSMTP(catcher.SMTPConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mail.Close() })

	first := startEmbedded(t, "server", data)
	first.call(t, "POST", "/v1/credentials", map[string]any{"name": "mail", "type": "smtp",
		"value": map[string]string{"type": "smtp", "host": "127.0.0.1", "port": strconv.Itoa(mail.Port()), "tls": "none"}}, http.StatusCreated, nil)
	first.call(t, "POST", "/v1/workflows", json.RawMessage(fmt.Sprintf(durableWorkflow, api.URL)), http.StatusCreated, nil)
	for n := range durableExecutions {
		first.call(t, "POST", "/v1/workflows/durable/executions",
			map[string]any{"n": n, "secs": 2 + n%2, "items": []int{1, 2}}, http.StatusCreated, nil)
	}

	// A second server on the directory is refused at once, naming it and the
	// first's PID, and touches nothing (the first goes on below).
	second := startProcEnv(t, "second server", []string{"RUNE_API_TOKEN=" + durableToken},
		"server", "--data", data, "--addr", "127.0.0.1:0")
	if code := second.wait(t, 30*time.Second); code != 2 {
		t.Fatalf("a second server on %s exited %d, want 2:\n%s", data, code, second.stderr.String())
	}
	if msg := second.stderr.String(); !strings.Contains(msg, data) || !strings.Contains(msg, "PID "+strconv.Itoa(first.cmd.Process.Pid)) {
		t.Fatalf("the second server's error does not name %s and PID %d:\n%s", data, first.cmd.Process.Pid, msg)
	}
	// CLI commands on the store work beside the running server.
	if out, errOut, code := runCLI(t, 60*time.Second, "token", "list", "--data", data); code != 0 {
		t.Fatalf("rune token list beside the server: exit %d\n%s%s", code, out, errOut)
	}

	// Stop the server mid-run: some executions retry, some wait, some sent
	// their email and wait in the split, some are done.
	waitFor(t, 60*time.Second, "the first emails", func() bool { return len(mail.Mails()) >= durableExecutions/10 })
	unfinished := 0
	for _, x := range first.executions(t) {
		if x.Status == "processing" || x.Status == "waiting" || x.Status == "enqueued" {
			unfinished++
		}
	}
	stop(t, first.proc)
	// Else the restart would have nothing to continue.
	if unfinished < durableExecutions/2 {
		t.Fatalf("only %d executions were unfinished when the server stopped", unfinished)
	}

	again := startEmbedded(t, "restarted server", data)
	var xs []durableExecution
	waitFor(t, 120*time.Second, fmt.Sprintf("%d executions to end", durableExecutions), func() bool {
		xs = again.executions(t)
		ended := 0
		for _, x := range xs {
			switch x.Status {
			case "completed", "failed", "halted", "cancelled":
				ended++
			}
		}
		return ended == durableExecutions
	})
	if len(xs) != durableExecutions {
		t.Fatalf("%d executions, want %d", len(xs), durableExecutions)
	}
	for _, x := range xs {
		n := int(x.Input["n"].(float64))
		if x.Status != "completed" || x.Completion == nil || x.Completion.Status != "completed" {
			t.Errorf("execution %s (n=%d): %s, completion %+v; want completed", x.ID, n, x.Status, x.Completion)
			continue
		}
		done, _ := x.Completion.FinalContext["$done"].(map[string]any)
		if fmt.Sprint(done["n"], done["got"], done["sum"]) != fmt.Sprint(n, n, 30) {
			t.Errorf("execution %s (n=%d): $done = %v, want n %d, got %d, sum 30", x.ID, n, done, n, n)
		}
	}
	// One email per execution: a restart repeats no recorded send. (A mail
	// whose final "." was written just before a kill -9, not yet recorded,
	// goes out again with the same Message-ID: docs/dsl.md's documented
	// window, which an inbox holds once.)
	inboxes := mail.Inboxes()
	for n := range durableExecutions {
		rcpt := fmt.Sprintf("user%d@rune.test", n)
		if got := len(inboxes[rcpt]); got != 1 {
			t.Errorf("%s received %d emails, want 1", rcpt, got)
		}
	}
	if extra := len(mail.Mails()) - durableExecutions; extra != 0 {
		t.Logf("%d mail(s) sent again with the same Message-ID (the window before the record)", extra)
	}
	again.terminate(t, 60*time.Second)
}
