package runtimetest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rune-org/rune/message"
)

// LeakSecret is the secret of the leak scenario: every credential of
// LeakSecrets holds it, and no byte a runtime emits may contain it in any
// form (LeakForms).
const LeakSecret = "lk-S3cr3t-7f1e9a2b"

// MapSecrets resolves credential references from a map; it implements
// node.Secrets.
type MapSecrets map[string]map[string]string

// Resolve implements node.Secrets.
func (m MapSecrets) Resolve(_ context.Context, ref string) (map[string]string, error) {
	f, ok := m[ref]
	if !ok {
		return nil, fmt.Errorf("credential %q: not configured", ref)
	}
	return f, nil
}

// LeakSecrets are the credentials of LeakWorkflow.
func LeakSecrets() MapSecrets {
	return MapSecrets{
		"bearer": {"token": LeakSecret},
		"apikey": {"header:X-Api-Key": LeakSecret},
		"basic":  {"username": "svc-user", "password": LeakSecret},
	}
}

// LeakForms are the forms of LeakSecret a leak would take: SecretForms,
// and inside HTTP Basic's value.
func LeakForms() []string {
	return append(SecretForms(LeakSecret), base64.StdEncoding.EncodeToString([]byte("svc-user:"+LeakSecret)))
}

// SecretForms are the forms a secret value takes when it leaks: as it is,
// base64 (standard and URL alphabets, padded or not) and URL-escaped (as a
// query value and as a path segment), each once.
func SecretForms(secret string) []string {
	b := []byte(secret)
	var forms []string
	for _, f := range []string{
		secret,
		base64.StdEncoding.EncodeToString(b),
		base64.RawStdEncoding.EncodeToString(b),
		base64.URLEncoding.EncodeToString(b),
		base64.RawURLEncoding.EncodeToString(b),
		url.QueryEscape(secret),
		url.PathEscape(secret),
	} {
		if !slices.Contains(forms, f) {
			forms = append(forms, f)
		}
	}
	return forms
}

// FindLeak returns the first form of LeakSecret in data, or "".
func FindLeak(data []byte) string { return FindSecret(data, LeakForms()) }

// FindSecret returns the first of forms found in data, or "".
func FindSecret(data []byte, forms []string) string {
	for _, f := range forms {
		if bytes.Contains(data, []byte(f)) {
			return f
		}
	}
	return ""
}

// LeakServer is a hostile API: /echo answers 200 with every request header
// in its JSON body, /fail answers 500 echoing them as text, /hop redirects
// to /echo on another host name (localhost for 127.0.0.1), which must
// receive no credential. It counts the credentials that reached /echo
// after a cross-host hop in CrossHost.
type LeakServer struct {
	*httptest.Server
	// Other is the same server under the host name localhost.
	Other     string
	CrossHost chan string
}

// NewLeakServer starts a LeakServer, stopped at the end of t.
func NewLeakServer(t *testing.T) *LeakServer {
	t.Helper()
	s := &LeakServer{CrossHost: make(chan string, 100)}
	mux := http.NewServeMux()
	echo := func(r *http.Request) map[string]any {
		h := map[string]any{}
		for k, v := range r.Header {
			h[k] = strings.Join(v, ", ")
		}
		return map[string]any{"headers": h, "url": r.URL.String()}
	}
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.Host, "localhost") && (r.Header.Get("Authorization") != "" || r.Header.Get("X-Api-Key") != "") {
			s.CrossHost <- r.Host
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, "%s", mustJSON(echo(r)))
	})
	mux.HandleFunc("/fail", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		for k, v := range r.Header {
			fmt.Fprintf(w, "%s: %s\n", k, strings.Join(v, ", "))
		}
	})
	mux.HandleFunc("/hop", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, s.Other+"/echo", http.StatusFound)
	})
	s.Server = httptest.NewServer(mux)
	s.Other = strings.Replace(s.URL, "127.0.0.1", "localhost", 1)
	t.Cleanup(s.Close)
	return s
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// LeakWorkflow calls s with every kind of credential: an echo of the
// request headers in a success, a redirect to another host, a 500 echoing
// them that is retried and then ignored, and a log node and a failing
// final call that halt with the echo in the completion's failure.
func LeakWorkflow(s *LeakServer) string {
	return wf("leak", fmt.Sprintf(`
		{"id":"echo_bearer","type":"http","credentials":{"ref":"bearer"},"parameters":{"url":"%[1]s/echo?k={{ $trigger.k }}"}},
		{"id":"echo_basic","type":"http","credentials":{"ref":"basic"},"parameters":{"url":"%[1]s/echo"}},
		{"id":"hop","type":"http","credentials":{"ref":"apikey"},"parameters":{"url":"%[1]s/hop"}},
		{"id":"fail_retried","type":"http","credentials":{"ref":"apikey"},"error":{"type":"ignore"},
		 "retry":{"max_attempts":2,"initial_delay":"10ms"},"parameters":{"url":"%[1]s/fail"}},
		{"id":"say","type":"log","parameters":{"message":"echoed {{ $echo_bearer.body.headers }}"}},
		{"id":"fail_halt","type":"http","credentials":{"ref":"bearer"},
		 "retry":{"max_attempts":2,"initial_delay":"10ms"},"parameters":{"url":"%[1]s/fail"}}`, s.URL),
		`{"id":"e1","src":"start","dst":"echo_bearer"},{"id":"e2","src":"echo_bearer","dst":"echo_basic"},
		{"id":"e3","src":"echo_basic","dst":"hop"},{"id":"e4","src":"hop","dst":"fail_retried"},
		{"id":"e5","src":"fail_retried","dst":"say"},{"id":"e6","src":"say","dst":"fail_halt"}`)
}

// LeakScenario runs LeakWorkflow on rt, whose nodes resolve LeakSecrets,
// and checks what a user relies on: the calls happen with their
// credentials, the redirect target gets none, and no status, completion
// or final context holds the secret. It returns every status and the
// completion as JSON, for callers that also check their logs and wire.
func LeakScenario(t *testing.T, rt Runtime) []byte {
	t.Helper()
	srv := NewLeakServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r := &result{t: t}
	var mu sync.Mutex
	c, err := rt.Run(ctx, []byte(LeakWorkflow(srv)), map[string]any{"k": "v"}, func(s *message.NodeStatus) {
		mu.Lock()
		defer mu.Unlock()
		r.add(s)
	})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	r.c = c
	r.status(message.CompletionFailed)
	if f := c.FailureReason; f == nil || f.NodeID != "fail_halt" {
		t.Fatalf("failure %+v, want node fail_halt's", f)
	}
	if got := r.get("$echo_bearer.body.headers.Authorization"); got != "Bearer [redacted]" {
		t.Errorf("the echoed Authorization is %v, want Bearer [redacted] (the server got the token, the context must not)", got)
	}
	for _, id := range []string{"fail_retried", "fail_halt"} {
		if n := r.count(id, message.StatusRetrying); n != 1 {
			t.Errorf("%s retried %d times, want 1", id, n)
		}
	}
	select {
	case host := <-srv.CrossHost:
		t.Errorf("a credential followed the redirect to %s", host)
	default:
	}
	out, err := json.Marshal(map[string]any{"statuses": r.statuses, "completion": c})
	if err != nil {
		t.Fatal(err)
	}
	if f := FindLeak(out); f != "" {
		t.Errorf("the secret (as %q) is in the statuses or completion: %s", f, out)
	}
	return out
}
