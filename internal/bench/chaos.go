package bench

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"
)

// FaultItems is the width of FaultWorkflow's split.
const FaultItems = 5

// FaultWorkflow is the workflow of the fault tests and of `rune bench --mode
// chaos` (issue 10): http → conditional → split ×FaultItems → http →
// aggregator → wait 1 s → http, every call a POST to base (a SideEffects
// server): /a/<execution>, /b/<execution>/<item>, /c/<execution>?resume_at=….
// Its input is {"items": [0, 1, …]}: FaultInput.
func FaultWorkflow(base string) []byte {
	return fmt.Appendf(nil, `{"id":"faults","name":"fault tests","nodes":[
		{"id":"start","type":"trigger","trigger":true},
		{"id":"a","type":"http","parameters":{"method":"POST","url":"%[1]s/a/{{ $execution.id }}","timeout":"10s"},
		 "retry":{"max_attempts":5,"initial_delay":"200ms"}},
		{"id":"ok","type":"conditional","parameters":{"expression":"$a.status == 200","true_edge_id":"e3"}},
		{"id":"each","type":"split","parameters":{"input_array":"{{ $trigger.items }}"}},
		{"id":"b","type":"http","parameters":{"method":"POST","url":"%[1]s/b/{{ $execution.id }}/{{ $item_index }}","timeout":"10s"},
		 "retry":{"max_attempts":5,"initial_delay":"200ms"}},
		{"id":"gather","type":"aggregator","parameters":{"value":"{{ $b.body.n }}","timeout":600}},
		{"id":"pause","type":"wait","parameters":{"amount":1,"unit":"seconds"}},
		{"id":"c","type":"http","parameters":{"method":"POST","url":"%[1]s/c/{{ $execution.id }}",
		 "query":{"resume_at":"{{ $pause.resume_at }}"},"timeout":"10s"},
		 "retry":{"max_attempts":5,"initial_delay":"200ms"}}],
		"edges":[{"id":"e1","src":"start","dst":"a"},{"id":"e2","src":"a","dst":"ok"},{"id":"e3","src":"ok","dst":"each"},
		{"id":"e4","src":"each","dst":"b"},{"id":"e5","src":"b","dst":"gather"},{"id":"e6","src":"gather","dst":"pause"},
		{"id":"e7","src":"pause","dst":"c"}]}`, base)
}

// FaultInput is FaultWorkflow's trigger payload.
func FaultInput() map[string]any {
	items := make([]any, FaultItems)
	for i := range items {
		items[i] = i
	}
	return map[string]any{"items": items}
}

// SideEffects is the HTTP server FaultWorkflow calls: it counts the calls to
// each path by Idempotency-Key, so that a run can tell a side effect
// repeated under its key (allowed: the receiver deduplicates) from one
// repeated under another (a bug), and notes when each execution's c call
// came and its wait's resume_at.
type SideEffects struct {
	// URL is the server's base URL, for FaultWorkflow.
	URL string
	srv *httptest.Server

	mu       sync.Mutex
	keys     map[string]map[string]int // path -> Idempotency-Key -> calls
	calls    int
	resumeAt map[string]time.Time // execution -> its wait's resume_at (first c call)
	called   map[string]time.Time // execution -> its first c call
}

// NewSideEffects starts a SideEffects server on loopback; Close stops it.
func NewSideEffects() *SideEffects {
	s := &SideEffects{keys: map[string]map[string]int{}, resumeAt: map[string]time.Time{}, called: map[string]time.Time{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	return s
}

// Close stops the server.
func (s *SideEffects) Close() { s.srv.Close() }

func (s *SideEffects) serve(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	var n int
	parts := strings.Split(r.URL.Path, "/")
	if len(parts) == 4 && parts[1] == "b" {
		n, _ = strconv.Atoi(parts[3])
	}
	s.mu.Lock()
	k := s.keys[r.URL.Path]
	if k == nil {
		k = map[string]int{}
		s.keys[r.URL.Path] = k
	}
	k[r.Header.Get("Idempotency-Key")]++
	s.calls++
	if len(parts) == 3 && parts[1] == "c" {
		if _, seen := s.called[parts[2]]; !seen {
			s.called[parts[2]] = now
			if at, err := time.Parse(time.RFC3339Nano, r.URL.Query().Get("resume_at")); err == nil {
				s.resumeAt[parts[2]] = at
			}
		}
	}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"n":%d}`, n)
}

// Count is how many calls came to paths starting with prefix ("/b/": the
// split's).
func (s *SideEffects) Count(prefix string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for p, k := range s.keys {
		if strings.HasPrefix(p, prefix) {
			for _, c := range k {
				n += c
			}
		}
	}
	return n
}

// ResumeAt returns the resume_at of exec's wait, known once its c call came.
func (s *SideEffects) ResumeAt(exec string) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	at, ok := s.resumeAt[exec]
	return at, ok
}

// Check returns the problems of the side effects of executions ids: a call
// never made, or made under more than one idempotency key; and how many
// calls repeated one under its key, and all calls.
func (s *SideEffects) Check(ids []string) (problems []string, repeats, calls int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		paths := []string{"/a/" + id, "/c/" + id}
		for i := range FaultItems {
			paths = append(paths, fmt.Sprintf("/b/%s/%d", id, i))
		}
		for _, p := range paths {
			keys := s.keys[p]
			switch {
			case len(keys) == 0:
				problems = append(problems, p+": never called")
			case len(keys) > 1:
				problems = append(problems, fmt.Sprintf("%s: called with %d different idempotency keys", p, len(keys)))
			}
			for _, n := range keys {
				repeats += n - 1
			}
		}
	}
	return problems, repeats, s.calls
}
