package worker_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/rune-org/rune/embedded"
	"github.com/rune-org/rune/message"
)

// A user watching a slow HTTP call sees its node running while the call is
// still in progress: the server answers only once the follower saw it.
func TestSlowNodeIsSeenRunning(t *testing.T) {
	t.Parallel()
	sawRunning := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-sawRunning:
			_, _ = w.Write([]byte(`{"ok":true}`))
		case <-time.After(30 * time.Second):
			w.WriteHeader(http.StatusGatewayTimeout)
		}
	}))
	defer srv.Close()
	rt, err := embedded.New(embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	def := `{"id":"slow","nodes":[{"id":"start","type":"trigger","trigger":true},
		{"id":"call","type":"http","parameters":{"method":"GET","url":"` + srv.URL + `"}}],
		"edges":[{"id":"e1","src":"start","dst":"call"}]}`
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var once bool
	c, err := rt.Run(ctx, []byte(def), nil, func(s *message.NodeStatus) {
		if s.NodeID == "call" && s.Status == message.StatusRunning && !once {
			once = true
			close(sawRunning)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if !once || c.Status != message.CompletionCompleted {
		t.Fatalf("completion %s (running seen: %v), want completed after the running status", c.Status, once)
	}
}
