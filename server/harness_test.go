package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rune-org/rune/internal/testinfra"
	"github.com/rune-org/rune/server"
	"github.com/rune-org/rune/store"
)

// target is a running server the API suite talks to over HTTP.
type target struct {
	url string
	// client, when not nil, sends the benchmarks' requests (post).
	client *http.Client
	token  string // an API token stored in the server's store
	// store is the server's store, opened by the test (tokens, checks).
	store store.Store
	// output returns everything the server processes logged so far.
	output func() string
	// spy, when not nil, starts reading a copy of every message published
	// on the target's broker from now on (the distributed target; the
	// embedded one has no broker).
	spy func(t *testing.T) *testinfra.Spy
}

// api is a test client of one target that records every response body,
// so a test can show that a secret never appears in any of them.
type api struct {
	t  *testing.T
	tg *target
	mu sync.Mutex
	// bodies holds every response body read.
	bodies bytes.Buffer
}

func newAPI(t *testing.T, tg *target) *api { return &api{t: t, tg: tg} }

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r *response) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
}

// errorBody is the API's problem details (RFC 9457); Error holds the
// members the tests read, under the names they had in the earlier shape.
type errorBody struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Error  struct {
		Code     string `json:"code"`
		Message  string `json:"detail"`
		Problems []struct {
			Path    string `json:"path"`
			Message string `json:"message"`
		} `json:"problems"`
	}
}

func (e *errorBody) UnmarshalJSON(b []byte) error {
	type top struct {
		Type   string `json:"type"`
		Title  string `json:"title"`
		Status int    `json:"status"`
	}
	var t top
	if err := json.Unmarshal(b, &t); err != nil {
		return err
	}
	e.Type, e.Title, e.Status = t.Type, t.Title, t.Status
	return json.Unmarshal(b, &e.Error)
}

// do sends a request with the target's token (token "" sends none when
// noAuth is set through header "Authorization: -").
func (a *api) do(method, path string, body []byte, header map[string]string) *response {
	a.t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, a.tg.url+path, rd)
	if err != nil {
		a.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+a.tg.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		a.t.Fatalf("%s %s: read: %v", method, path, err)
	}
	a.mu.Lock()
	a.bodies.Write(data)
	a.bodies.WriteByte('\n')
	a.mu.Unlock()
	checkExchange(a.t, req, body, resp.StatusCode, resp.Header, data)
	return &response{status: resp.StatusCode, header: resp.Header, body: data}
}

// want sends a request and fails unless the status is status; it decodes
// the body into out when out is not nil.
func (a *api) want(status int, method, path string, body []byte, out any, header ...string) *response {
	a.t.Helper()
	h := map[string]string{}
	for i := 0; i+1 < len(header); i += 2 {
		h[header[i]] = header[i+1]
	}
	r := a.do(method, path, body, h)
	if r.status != status {
		a.t.Fatalf("%s %s: status %d, want %d; body %s", method, path, r.status, status, r.body)
	}
	if out != nil {
		r.decode(a.t, out)
	}
	return r
}

// wantError checks an error answer: status, JSON error body with code.
func (a *api) wantError(status int, code, method, path string, body []byte, header ...string) errorBody {
	a.t.Helper()
	var e errorBody
	r := a.want(status, method, path, body, &e, header...)
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		a.t.Fatalf("%s %s: error Content-Type %q, want application/problem+json", method, path, ct)
	}
	if e.Error.Code != code || e.Error.Message == "" || e.Status != status || e.Type != server.ProblemTypeBase+code || e.Title != http.StatusText(status) {
		a.t.Fatalf("%s %s: error %+v, want problem details of status %d, code %q with a detail", method, path, e, status, code)
	}
	return e
}

// execution is the part of GET /v1/executions/{id} the tests read.
// nodeRun is one run of a node in the execution the API shows.
type nodeRun struct {
	NodeID        string          `json:"node_id"`
	Branch        string          `json:"branch"`
	Status        string          `json:"status"`
	Attempt       int             `json:"attempt"`
	Output        json.RawMessage `json:"output"`
	StartedAt     *time.Time      `json:"started_at"`
	FinishedAt    *time.Time      `json:"finished_at"`
	NextAttemptAt *time.Time      `json:"next_attempt_at"`
	ResumeAt      *time.Time      `json:"resume_at"`
}

type execution struct {
	ID              string                     `json:"id"`
	WorkflowID      string                     `json:"workflow_id"`
	Version         int                        `json:"version"`
	Status          string                     `json:"status"`
	Cursor          []string                   `json:"cursor"`
	Attempts        int                        `json:"attempts"`
	AvailableAt     time.Time                  `json:"available_at"`
	Vars            map[string]json.RawMessage `json:"vars"`
	Trigger         string                     `json:"trigger"`
	CancelRequested bool                       `json:"cancel_requested"`
	DispatchedAt    *time.Time                 `json:"dispatched_at"`
	Completion      json.RawMessage            `json:"completion"`
	Nodes           []nodeRun                  `json:"nodes"`
	Splits          []struct {
		SplitNodeID string `json:"split_node_id"`
		Total       int    `json:"total"`
		Done        int    `json:"done"`
		Failed      int    `json:"failed"`
		Skipped     int    `json:"skipped"`
	} `json:"splits"`
}

// waitFor polls execution id until cond holds, for up to a minute (a
// loaded machine), and returns it.
func (a *api) waitFor(id, what string, cond func(*execution) bool) *execution {
	a.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var x execution
		a.want(http.StatusOK, "GET", "/v1/executions/"+id, nil, &x)
		if cond(&x) {
			return &x
		}
		if time.Now().After(deadline) {
			a.t.Fatalf("execution %s: not %s within 60 s; last %+v", id, what, x)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (a *api) waitStatus(id string, statuses ...string) *execution {
	a.t.Helper()
	return a.waitFor(id, "in "+strings.Join(statuses, "/"), func(x *execution) bool {
		for _, s := range statuses {
			if x.Status == s {
				return true
			}
		}
		return false
	})
}

// pushWorkflow creates a workflow from def.
func (a *api) pushWorkflow(def string) {
	a.t.Helper()
	a.want(http.StatusCreated, "POST", "/v1/workflows", []byte(def), nil)
}

// trigger enqueues an execution and returns it.
func (a *api) trigger(workflowID, input string, header ...string) execution {
	a.t.Helper()
	var x execution
	a.want(http.StatusCreated, "POST", "/v1/workflows/"+workflowID+"/executions", []byte(input), &x, header...)
	return x
}

// sseEvent is one Server-Sent Event.
type sseEvent struct {
	ID    string
	Event string
	Data  string
}

// stream opens an SSE stream and returns its events on a channel that
// closes when the stream ends; cancel closes the connection.
func (a *api) stream(path string, lastID string) (<-chan sseEvent, *http.Response, context.CancelFunc) {
	a.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", a.tg.url+path, nil)
	req.Header.Set("Authorization", "Bearer "+a.tg.token)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		a.t.Fatalf("GET %s: %v", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		a.t.Fatalf("GET %s: %d %s", path, resp.StatusCode, data)
	}
	ch := make(chan sseEvent, 1024)
	go func() {
		defer close(ch)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			if line == "" {
				if ev.Event != "" {
					a.mu.Lock()
					a.bodies.WriteString(ev.Data + "\n")
					a.mu.Unlock()
					ch <- ev
				}
				ev = sseEvent{}
				continue
			}
			k, v, _ := strings.Cut(line, ":")
			v = strings.TrimPrefix(v, " ")
			switch k {
			case "id":
				ev.ID = v
			case "event":
				ev.Event = v
			case "data":
				ev.Data += v
			}
		}
	}()
	return ch, resp, cancel
}

// collect reads events until the stream ends or n events came (n < 0: all),
// failing after a minute.
func (a *api) collect(ch <-chan sseEvent, n int) []sseEvent {
	a.t.Helper()
	var out []sseEvent
	timeout := time.After(60 * time.Second)
	for n < 0 || len(out) < n {
		select {
		case ev, ok := <-ch:
			if !ok {
				return out
			}
			out = append(out, ev)
		case <-timeout:
			a.t.Fatalf("stream: %d events after 60 s, want %d: %+v", len(out), n, out)
		}
	}
	return out
}

// newToken stores a fresh token in the target's store.
func newToken(t testing.TB, st store.Store, name string) string {
	t.Helper()
	tok, rec, err := server.NewToken(name, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CreateToken(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	return tok
}

func wfDef(id, nodes, edges string) string {
	return fmt.Sprintf(`{"id":%q,"nodes":[{"id":"start","type":"trigger","trigger":true},%s],"edges":[%s]}`, id, nodes, edges)
}
