package engine_test

// The specifications' own examples (issue 30, item 7), read from
// testdata/spec (README.md there says where each comes from), validate and
// run on the embedded runtime as their specification says. HTTP and SMTP go
// to servers of the test on 127.0.0.1.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rune-org/rune/embedded"
	"github.com/rune-org/rune/engine"
	"github.com/rune-org/rune/internal/catcher"
	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/secrets"
)

// specNode reads a node object of testdata/spec.
func specNode(t *testing.T, name string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "spec", name))
	if err != nil {
		t.Fatal(err)
	}
	var n map[string]any
	if err := json.Unmarshal(raw, &n); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return n
}

// specWorkflow is a workflow of nodes (after a trigger "start") and edges
// [src, dst] (ids e1, e2, ...).
func specWorkflow(t *testing.T, id string, nodes []map[string]any, edges [][2]string) []byte {
	t.Helper()
	all := append([]map[string]any{{"id": "start", "type": "trigger", "trigger": true}}, nodes...)
	var es []map[string]any
	for i, e := range edges {
		es = append(es, map[string]any{"id": "e" + strconv.Itoa(i+1), "src": e[0], "dst": e[1]})
	}
	raw, err := json.Marshal(map[string]any{"id": id, "nodes": all, "edges": es})
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func newEmbedded(t *testing.T, opts embedded.Options) *embedded.Runtime {
	t.Helper()
	rt, err := embedded.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	return rt
}

// statusLog collects the statuses of a run.
type statusLog struct {
	mu  sync.Mutex
	all []*message.NodeStatus
}

func (l *statusLog) add(s *message.NodeStatus) {
	l.mu.Lock()
	l.all = append(l.all, s)
	l.mu.Unlock()
}

func (l *statusLog) find(node, status string) *message.NodeStatus {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.all {
		if s.NodeID == node && s.Status == status {
			return s
		}
	}
	return nil
}

// RFC 005 §3's merge node, verbatim (name, output and error included),
// joins two HTTP calls (http_request_A and http_request_B, as §6.1 names
// them): wait_for_all waits for both, reports waiting with {"arrived": 1,
// "expected": 2} (§6.2), then succeeds once with both payloads appended.
func TestSpecRFC005MergeExample(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/b" {
			time.Sleep(200 * time.Millisecond) // B arrives second
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"from": %q}`, r.URL.Path)
	}))
	defer srv.Close()
	httpNode := func(id, path string) map[string]any {
		return map[string]any{"id": id, "type": "http", "parameters": map[string]any{"method": "GET", "url": "{{ $trigger.base }}" + path}}
	}
	merge := specNode(t, "rfc005_merge_node.json")
	def := specWorkflow(t, "rfc005_merge", []map[string]any{
		httpNode("http_request_A", "/a"), httpNode("http_request_B", "/b"), merge,
		{"id": "after", "type": "set", "parameters": map[string]any{"values": map[string]any{"n": "{{ len($merge_1.items) }}"}}},
	}, [][2]string{{"start", "http_request_A"}, {"start", "http_request_B"}, {"http_request_A", "merge_1"}, {"http_request_B", "merge_1"}, {"merge_1", "after"}})
	rt := newEmbedded(t, embedded.Options{})
	var log statusLog
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := rt.Run(ctx, def, map[string]any{"base": srv.URL}, log.add)
	if err != nil {
		t.Fatal(err)
	}
	if c.Status != message.CompletionCompleted {
		t.Fatalf("completion %s (%+v)", c.Status, c.FailureReason)
	}
	out, _ := c.FinalContext["$merge_1"].(map[string]any)
	items, _ := out["items"].([]any)
	bodies := map[string]bool{}
	for _, it := range items {
		resp, _ := it.(map[string]any)
		body, _ := resp["body"].(map[string]any)
		bodies[fmt.Sprint(body["from"])] = true
	}
	if len(items) != 2 || !bodies["/a"] || !bodies["/b"] || fmt.Sprint(c.FinalContext["$after"]) != "map[n:2]" {
		t.Fatalf("$merge_1 = %v, $after = %v; want both responses appended", out, c.FinalContext["$after"])
	}
	w := log.find("merge_1", message.StatusWaiting)
	if w == nil || fmt.Sprint(w.Details) != "map[arrived:1 expected:2]" {
		t.Fatalf("merge_1's waiting status %+v, want details {arrived: 1, expected: 2}", w)
	}
	n := 0
	for _, s := range log.all {
		if s.NodeID == "merge_1" && s.Status == message.StatusSuccess {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("merge_1 succeeded %d times, want once", n)
	}
}

// RFC 006 §3's wait node, verbatim, suspends its branch for 2 hours: it
// reports waiting with resume_at two hours ahead (§5.1) and holds no
// worker. The test then wakes its timer (as the clock reaching resume_at
// would) and the branch resumes: wait_node_1 succeeds and the next node
// runs (§5.3). Without amount (RFC 006's default of 1) the same node waits
// one unit: with unit seconds, a second, for real.
func TestSpecRFC006WaitExample(t *testing.T) {
	t.Parallel()
	t.Run("as written", func(t *testing.T) {
		t.Parallel()
		def := specWorkflow(t, "rfc006_wait", []map[string]any{specNode(t, "rfc006_wait_node.json"),
			{"id": "approved", "type": "set", "parameters": map[string]any{"values": map[string]any{"at": "{{ $wait_node_1.resume_at }}"}}}},
			[][2]string{{"start", "wait_node_1"}, {"wait_node_1", "approved"}})
		rt := newEmbedded(t, embedded.Options{})
		var log statusLog
		woke := make(chan error, 1)
		start := time.Now()
		onStatus := func(s *message.NodeStatus) {
			log.add(s)
			if s.NodeID != "wait_node_1" || s.Status != message.StatusWaiting {
				return
			}
			go func() {
				// Parked before the status: its timer is known.
				ids, err := rt.Coord.Parked(context.Background(), s.ExecutionID)
				if err == nil && len(ids) != 1 {
					err = fmt.Errorf("%d parked timers, want 1", len(ids))
				}
				if err == nil {
					err = rt.Timers.Wake(context.Background(), time.Now(), ids...)
				}
				woke <- err
			}()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		c, err := rt.Run(ctx, def, map[string]any{}, onStatus)
		if err != nil {
			t.Fatal(err)
		}
		if err := <-woke; err != nil {
			t.Fatalf("wake the timer: %v", err)
		}
		if c.Status != message.CompletionCompleted {
			t.Fatalf("completion %s (%+v)", c.Status, c.FailureReason)
		}
		w := log.find("wait_node_1", message.StatusWaiting)
		if w.ResumeAt == nil || w.ResumeAt.Before(start.Add(2*time.Hour)) || w.ResumeAt.After(time.Now().Add(2*time.Hour)) {
			t.Fatalf("waiting status resume_at %v, want 2 hours after the start (%v)", w.ResumeAt, start)
		}
		if log.find("wait_node_1", message.StatusSuccess) == nil {
			t.Fatal("wait_node_1 did not report success when it resumed (RFC 006 §6.2)")
		}
		// Woken early, the wait's output says when it did resume.
		approved, _ := c.FinalContext["$approved"].(map[string]any)
		at, err := time.Parse(time.RFC3339Nano, fmt.Sprint(approved["at"]))
		if err != nil || at.Before(start.Add(-time.Second)) || at.After(time.Now()) {
			t.Fatalf("$approved = %v, want the time the branch resumed", approved)
		}
	})
	t.Run("default amount", func(t *testing.T) {
		t.Parallel()
		n := specNode(t, "rfc006_wait_node.json")
		params := n["parameters"].(map[string]any)
		delete(params, "amount")
		params["unit"] = "seconds"
		def := specWorkflow(t, "rfc006_wait_default", []map[string]any{n}, [][2]string{{"start", "wait_node_1"}})
		rt := newEmbedded(t, embedded.Options{})
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		start := time.Now()
		c, err := rt.Run(ctx, def, map[string]any{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		out, _ := c.FinalContext["$wait_node_1"].(map[string]any)
		resume, err := engine.ResumeTime(out)
		if c.Status != message.CompletionCompleted || err != nil || took < time.Second {
			t.Fatalf("completion %s after %v, $wait_node_1 %v; want completed after 1 s", c.Status, took, out)
		}
		// The node's clock is in milliseconds: a millisecond of slack.
		if d := resume.Sub(start); d < time.Second-time.Millisecond || d > time.Second+took {
			t.Fatalf("resume_at %v after the start, want 1 s", d)
		}
	})
}

// Seed 003's notification workflow, with its field names (email to,
// subject, body; sms to, body; delay delayMs and duration) and its vars
// (email_<nodeId>, sms_<nodeId>): two mails (one HTML body, one text body)
// through the test's SMTP server, a text through the test's SMS webhook,
// two delays, once each.
func TestSpecSeed003Example(t *testing.T) {
	t.Parallel()
	mail, err := catcher.StartSMTP(catcher.SMTPConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer mail.Close()
	var smsMu sync.Mutex
	var texts []map[string]any
	sms := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m map[string]any
		_ = json.NewDecoder(r.Body).Decode(&m)
		smsMu.Lock()
		texts = append(texts, m)
		smsMu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"message_id": "sms-1"}`)
	}))
	defer sms.Close()
	raw, err := os.ReadFile(filepath.Join("testdata", "spec", "seed003_notification.json"))
	if err != nil {
		t.Fatal(err)
	}
	rt := newEmbedded(t, embedded.Options{Secrets: secrets.Static{
		"mail":  {"type": "smtp", "host": "127.0.0.1", "port": strconv.Itoa(mail.Port()), "tls": "none", "from": "hello@rune.test"},
		"texts": {"type": "webhook", "url": sms.URL + "/send", "from": "+15550000000"},
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	start := time.Now()
	c, err := rt.Run(ctx, raw, map[string]any{"name": "Ada", "email": "ada@example.com", "phone": "+14155550100"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Status != message.CompletionCompleted {
		t.Fatalf("completion %s (%+v)", c.Status, c.FailureReason)
	}
	if took := time.Since(start); took < time.Second {
		t.Fatalf("completed after %v: the delays (500 ms each) did not wait", took)
	}
	mails := mail.Mails()
	if len(mails) != 2 {
		t.Fatalf("%d mails, want 2", len(mails))
	}
	types := map[string]string{}
	for _, m := range mails {
		types[m.Header.Get("Subject")] = m.Header.Get("Content-Type")
	}
	if !strings.HasPrefix(types["Welcome, Ada"], "text/html") || !strings.HasPrefix(types["How is it going?"], "text/plain") {
		t.Fatalf("mails %v: want the HTML body as text/html and the text body as text/plain", types)
	}
	smsMu.Lock()
	defer smsMu.Unlock()
	welcome, _ := c.FinalContext["$welcome"].(map[string]any)
	if len(texts) != 1 || texts[0]["to"] != "+14155550100" || texts[0]["body"] != fmt.Sprintf("Hi Ada, we sent you %v", welcome["message_id"]) {
		t.Fatalf("texts %v, want one to +14155550100 naming the welcome mail's message id %v", texts, welcome["message_id"])
	}
}
