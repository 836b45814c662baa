package runtimetest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/rune-org/rune/message"
)

// RetrySpacing runs an http node against a server that answers 503 twice,
// then 200: the node is retried after its backoff (300 ms, then 600 ms),
// never sooner, with a retrying status before each wait, and completes.
func RetrySpacing(t *testing.T, rt Runtime) {
	t.Helper()
	var mu sync.Mutex
	var calls []time.Time
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls = append(calls, time.Now())
		n := len(calls)
		mu.Unlock()
		if n <= 2 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	defer srv.Close()
	def := wf("retry", `{"id":"call","type":"http","parameters":{"url":"`+srv.URL+`/x"},
		"retry":{"max_attempts":4,"initial_delay":"300ms","multiplier":2}}`,
		`{"id":"e1","src":"start","dst":"call"}`)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := &result{t: t}
	c, err := rt.Run(ctx, []byte(def), nil, r.add)
	if err != nil {
		t.Fatal(err)
	}
	r.c = c
	r.status(message.CompletionCompleted)
	r.equal("$call.body", `{"ok":true}`)
	mu.Lock()
	defer mu.Unlock()
	if len(calls) != 3 {
		t.Fatalf("%d calls, want 3 (two 503s, then 200)", len(calls))
	}
	for i, want := range []time.Duration{300 * time.Millisecond, 600 * time.Millisecond} {
		if gap := calls[i+1].Sub(calls[i]); gap < want {
			t.Fatalf("attempt %d came %s after attempt %d, before its backoff of %s", i+2, gap, i+1, want)
		}
	}
	if n := r.count("call", message.StatusRetrying); n != 2 {
		t.Fatalf("%d retrying statuses, want 2", n)
	}
	for _, s := range r.statuses {
		if s.Status == message.StatusRetrying && (s.NextAttemptAt == nil || s.Error == nil || s.Error.Code != "HTTP_STATUS") {
			t.Fatalf("retrying status without next_attempt_at or HTTP_STATUS error: %+v", s)
		}
	}
}
