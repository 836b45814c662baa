package api_test

import (
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rune-org/rune/client/api"
	"github.com/rune-org/rune/embedded"
	"github.com/rune-org/rune/secrets"
	"github.com/rune-org/rune/server"
	"github.com/rune-org/rune/store/sqlite"
)

// serve runs the embedded server (SQLite, in-process runtime) and returns a
// client of it with an admin token.
func serve(t *testing.T) *api.Client {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "rune.db"))
	if err != nil {
		t.Fatal(err)
	}
	keys, err := secrets.LoadKeys("", filepath.Join(t.TempDir(), "secret.key"), true)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := embedded.New(embedded.Options{ConsumeEvents: true, Secrets: secrets.Store{Store: st, Keys: keys}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := server.New(server.Config{Store: st, Keys: keys, Broker: rt.Broker, Engine: rt.Engine})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(runCtx) }()
	hs := httptest.NewServer(s.Handler())
	tok, rec, err := server.NewToken("client", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CreateToken(ctx, rec); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
		cancel()
		<-done
		rt.Close()
		st.Close()
	})
	return &api.Client{Base: hs.URL, Token: tok}
}

const hello = `{"id":"hello","nodes":[{"id":"start","type":"trigger","trigger":true},
	{"id":"greet","type":"set","parameters":{"values":{"text":"Hello, {{ $trigger.name }}"}}}],
	"edges":[{"id":"e1","src":"start","dst":"greet"}]}`

// The client's typed calls against a real server: workflows with their
// ETags and unchanged pushes, triggers with idempotency keys, lists, the
// event stream, and error answers as *api.Error.
func TestClient(t *testing.T) {
	ctx := context.Background()
	c := serve(t)
	w, err := c.PushWorkflow(ctx, []byte(hello))
	if err != nil || w.ID != "hello" || w.Version != 1 || w.ETag != `"v1"` {
		t.Fatalf("push = %+v, %v; want version 1 with ETag \"v1\"", w, err)
	}
	w, err = c.PushWorkflow(ctx, []byte(hello))
	if err != nil || !w.Unchanged || w.Version != 1 {
		t.Fatalf("second push = %+v, %v; want unchanged version 1", w, err)
	}
	v2 := strings.Replace(hello, "Hello,", "Hi,", 1)
	if w, err = c.UpdateWorkflow(ctx, "hello", []byte(v2), `"v1"`); err != nil || w.Version != 2 {
		t.Fatalf("update on v1 = %+v, %v; want version 2", w, err)
	}
	_, err = c.UpdateWorkflow(ctx, "hello", []byte(hello), `"v1"`)
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Status != 412 || ae.Code != api.CodePreconditionFailed || ae.Detail == "" {
		t.Fatalf("stale update: %v, want a 412 precondition_failed *api.Error", err)
	}
	_, err = c.CreateWorkflow(ctx, []byte(`{"id":"bad","nodes":[{"id":"start","type":"trigger","trigger":true},{"id":"x","type":"nosuch"}],"edges":[]}`))
	if !errors.As(err, &ae) || ae.Code != api.CodeInvalidWorkflow || len(ae.Problems) == 0 || ae.Problems[0].Path == "" {
		t.Fatalf("invalid workflow: %v, want invalid_workflow with its problems", err)
	}

	x, created, err := c.Trigger(ctx, "hello", []byte(`{"name":"Ada"}`), api.TriggerOptions{IdempotencyKey: "k1"})
	if err != nil || !created || x.Version != 2 {
		t.Fatalf("trigger = %+v, %v, %v", x, created, err)
	}
	again, created, err := c.Trigger(ctx, "hello", []byte(`{"name":"Ada"}`), api.TriggerOptions{IdempotencyKey: "k1"})
	if err != nil || created || again.ID != x.ID {
		t.Fatalf("same key again = %+v, %v, %v; want execution %s, not created", again, created, err, x.ID)
	}
	if _, _, err = c.Trigger(ctx, "hello", []byte(`{"name":"Bo"}`), api.TriggerOptions{IdempotencyKey: "k1"}); !api.IsCode(err, api.CodeIdempotencyKeyReused) {
		t.Fatalf("same key, other body: %v, want idempotency_key_reused", err)
	}
	// The event stream runs to the completion and ends.
	body, err := c.ExecutionEvents(ctx, x.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	events, err := io.ReadAll(body)
	body.Close()
	if err != nil || !strings.Contains(string(events), "event: completion") {
		t.Fatalf("events: %v\n%s", err, events)
	}
	got, err := c.GetExecution(ctx, x.ID)
	if err != nil || got.Status != "completed" || len(got.Nodes) != 2 || !strings.Contains(string(got.Completion), "Hi, Ada") {
		t.Fatalf("execution = %+v, %v; want completed with 2 node runs", got, err)
	}
	page, err := c.ListExecutions(ctx, api.ExecutionFilter{WorkflowID: "hello", Status: "completed"})
	if err != nil || len(page.Items) != 1 || page.Items[0].ID != x.ID {
		t.Fatalf("list = %+v, %v", page, err)
	}
	wfs, err := c.ListWorkflows(ctx, 10, "")
	if err != nil || len(wfs.Items) != 1 || wfs.Items[0].Version != 2 {
		t.Fatalf("workflows = %+v, %v", wfs, err)
	}
	if _, err := c.GetExecution(ctx, "exec_none"); !api.IsCode(err, api.CodeNotFound) {
		t.Fatalf("unknown execution: %v, want not_found", err)
	}
}
