package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rune-org/rune/internal/testinfra"
	"github.com/rune-org/rune/runtimetest"
	"github.com/rune-org/rune/store/sqlite"
)

// loopbackAPI is a server on 127.0.0.1 that counts its requests.
func loopbackAPI(t *testing.T) (url string, hits *atomic.Int64) {
	hits = &atomic.Int64{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"ok": true}`)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, hits
}

// nodeError is the error of node nodeID's last run in execution x.
func nodeError(t *testing.T, a *api, x *execution, nodeID string) (code, msg string) {
	t.Helper()
	var full struct {
		Nodes []struct {
			NodeID string          `json:"node_id"`
			Error  json.RawMessage `json:"error"`
		} `json:"nodes"`
	}
	a.want(http.StatusOK, "GET", "/v1/executions/"+x.ID, nil, &full)
	for _, n := range full.Nodes {
		if n.NodeID == nodeID && len(n.Error) > 0 {
			var e struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			}
			_ = json.Unmarshal(n.Error, &e)
			code, msg = e.Code, e.Message
		}
	}
	return code, msg
}

// wantDenied runs workflow wf once and checks that its node "call" failed
// with EGRESS_DENIED by rule, naming the host and address of target.
func wantDenied(t *testing.T, a *api, wf, target, rule string) {
	t.Helper()
	x := a.trigger(wf, `{}`)
	done := a.waitStatus(x.ID, "completed", "failed", "halted")
	code, msg := nodeError(t, a, done, "call")
	u, _ := url.Parse(target)
	if done.Status != "failed" || code != "EGRESS_DENIED" || !strings.Contains(msg, u.Host) || !strings.Contains(msg, `"`+rule+`"`) {
		t.Fatalf("%s: %s, node error %s %q; want failed by EGRESS_DENIED naming %s and rule %q", wf, done.Status, code, msg, u.Host, rule)
	}
	if done.Attempts > 1 {
		for _, n := range done.Nodes {
			if n.NodeID == "call" && n.Attempt > 1 {
				t.Fatalf("%s: node retried (attempt %d): EGRESS_DENIED is not retryable", wf, n.Attempt)
			}
		}
	}
}

func callWorkflow(id, target, cred string) string {
	credRef := ""
	if cred != "" {
		credRef = `,"credentials":{"ref":"` + cred + `"}`
	}
	return wfDef(id, `{"id":"call","type":"http","parameters":{"method":"POST","url":"`+target+`","body":{"x":1}},"retry":{"max_attempts":3,"initial_delay":"100ms"}`+credRef+`}`,
		`{"id":"e1","src":"start","dst":"call"}`)
}

// TestEgressEmbeddedServer: a `rune server` process (the embedded default)
// refuses its nodes loopback and its own API. The exfiltration of issue 31,
// a node sending credential "api" to the server's own hook, which would
// copy its headers into an execution's input, fails with EGRESS_DENIED and
// the secret reaches no one. RUNE_EGRESS_ALLOW=127.0.0.0/8 opens loopback,
// not the server's own listener.
func TestEgressEmbeddedServer(t *testing.T) {
	t.Parallel()
	d := &deployment{t: t, key: testSecretKey, logs: &testinfra.Buffer{}}
	data := t.TempDir()
	st, err := sqlite.Open(context.Background(), filepath.Join(data, "rune.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	token := newToken(t, st, "egress")
	local, hits := loopbackAPI(t)

	start := func(env []string) (*proc, *api) {
		d.env = env
		p := d.start(true, "server", "--addr", "127.0.0.1:0", "--data", data)
		d.waitHealthy(p)
		return p, newAPI(t, &target{url: "http://" + p.addr, token: token, store: st, output: d.logs.String})
	}
	p, a := start(nil)
	a.want(http.StatusCreated, "POST", "/v1/credentials", []byte(`{"name":"api","type":"bearer","value":{"token":"`+runtimetest.LeakSecret+`"}}`), nil)
	a.pushWorkflow(wfDef("sink", `{"id":"keep","type":"set","parameters":{"values":{"got":"{{ $trigger }}"}}}`, `{"id":"e1","src":"start","dst":"keep"}`))
	var hk struct {
		URL string `json:"url"`
	}
	a.want(http.StatusCreated, "POST", "/v1/workflows/sink/hooks", []byte(`{"name":"inbox"}`), &hk)
	self := "http://" + p.addr + hk.URL
	a.pushWorkflow(callWorkflow("exfil", self, "api"))
	a.pushWorkflow(callWorkflow("local", local, "api"))

	wantDenied(t, a, "exfil", self, "self")
	wantDenied(t, a, "local", local, "loopback")
	if hits.Load() != 0 {
		t.Fatalf("the loopback server got %d requests, want none", hits.Load())
	}
	p.stop()

	p, a = start([]string{"RUNE_EGRESS_ALLOW=127.0.0.0/8"})
	x := a.trigger("local", `{}`)
	if done := a.waitStatus(x.ID, "completed", "failed", "halted"); done.Status != "completed" || hits.Load() != 1 {
		t.Fatalf("with 127.0.0.0/8 allowed: %s, %d requests; want completed, one request", done.Status, hits.Load())
	}
	// The server's own API stays closed: 127.0.0.0/8 does not name its port.
	self = "http://" + p.addr + hk.URL
	a.pushWorkflow(callWorkflow("exfil2", self, "api"))
	wantDenied(t, a, "exfil2", self, "self")

	var sink struct {
		Items []json.RawMessage `json:"items"`
	}
	a.want(http.StatusOK, "GET", "/v1/executions?workflow_id=sink", nil, &sink)
	if len(sink.Items) != 0 {
		t.Fatalf("the hook's workflow ran %d times: %s", len(sink.Items), sink.Items)
	}
	a.mu.Lock()
	bodies := a.bodies.Bytes()
	a.mu.Unlock()
	if f := runtimetest.FindLeak(bodies); f != "" {
		t.Fatalf("an API answer holds the secret (%q)", f)
	}
	if f := runtimetest.FindLeak([]byte(d.logs.String())); f != "" {
		t.Fatalf("the server's log holds the secret (%q)", f)
	}
}

// TestEgressDistributedWorker: a `rune worker` process refuses its nodes
// loopback by default; one started with RUNE_EGRESS_ALLOW=127.0.0.0/8 runs
// the same workflow.
func TestEgressDistributedWorker(t *testing.T) {
	t.Parallel()
	d := newDeployment(t)
	w := d.worker()
	srv := d.server()
	d.waitHealthy(srv)
	st := d.store()
	a := newAPI(t, &target{url: "http://" + srv.addr, token: newToken(t, st, "egress"), store: st, output: d.logs.String})
	local, hits := loopbackAPI(t)
	a.pushWorkflow(callWorkflow("local", local, ""))
	wantDenied(t, a, "local", local, "loopback")
	if hits.Load() != 0 {
		t.Fatalf("the loopback server got %d requests, want none", hits.Load())
	}
	w.stop()

	d.env = allowLoopback
	d.worker()
	x := a.trigger("local", `{}`)
	if done := a.waitStatus(x.ID, "completed", "failed", "halted"); done.Status != "completed" || hits.Load() != 1 {
		t.Fatalf("with 127.0.0.0/8 allowed: %s, %d requests; want completed, one request", done.Status, hits.Load())
	}
}
