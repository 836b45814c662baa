package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/store"
)

// streamPage is how many events one read of the event log returns.
const streamPage = 500

// executionEvents streams one execution's events: the persisted history
// first, then live events, and ends after its completion and the statuses
// that came with it (or after its cancel before it ran).
func (s *Server) executionEvents(w http.ResponseWriter, r *http.Request) error {
	x, err := s.execution(r)
	if err != nil {
		return err
	}
	return s.stream(w, r, x.ID)
}

// allEvents streams every execution's events, for dashboards; it never ends
// by itself. Without a last event id it starts from now (the history of
// every execution is rarely what a dashboard wants), unless ?from=beginning.
func (s *Server) allEvents(w http.ResponseWriter, r *http.Request) error {
	return s.stream(w, r, "")
}

// streamStart is the event id a stream starts after: the client's last
// event id when it reconnects; else, for the stream of all executions, the
// newest event unless ?from=beginning; else 0 (an execution's whole history).
func (s *Server) streamStart(r *http.Request, execID string) (int64, error) {
	after, err := lastEventID(r)
	if err != nil || execID != "" {
		return after, err
	}
	from := r.URL.Query().Get("from")
	if from != "" && from != "beginning" && from != "now" {
		return 0, badRequest("query parameter from: want beginning or now, got %q", limitText(from, 40))
	}
	if after > 0 || from == "beginning" || r.Header.Get("Last-Event-ID") != "" || r.URL.Query().Has("last_event_id") {
		return after, nil
	}
	return store.LatestEventID(r.Context(), s.store, "")
}

// lastEventID reads where a reconnecting client stopped: the Last-Event-ID
// header, or the last_event_id query parameter.
func lastEventID(r *http.Request) (int64, error) {
	v := r.Header.Get("Last-Event-ID")
	name := "header Last-Event-ID"
	if v == "" {
		v, name = r.URL.Query().Get("last_event_id"), "query parameter last_event_id"
	}
	if v == "" {
		return 0, nil
	}
	id, err := strconv.ParseInt(v, 10, 64)
	if err != nil || id < 0 {
		return 0, badRequest("%s: want an event id (a non-negative integer), got %q", name, limitText(v, 40))
	}
	return id, nil
}

// stream writes Server-Sent Events of execution execID ("" for all) after
// the client's last event id: replay from the store, then what commits
// (woken by this process's commits, and by a poll for other replicas').
func (s *Server) stream(w http.ResponseWriter, r *http.Request, execID string) error {
	after, err := s.streamStart(r, execID)
	if err != nil {
		return err
	}
	ctx := r.Context()
	p := principalOf(ctx)
	if !s.streams.acquire(p.Name, s.cfg.MaxStreams) {
		return errorf(http.StatusTooManyRequests, CodeRateLimited,
			"token %q has %d event streams open on this server, the most one token may (rune server --max-streams): close one first", p.Name, s.cfg.MaxStreams)
	}
	defer s.streams.release(p.Name)
	rc := http.NewResponseController(w)
	// The server's WriteTimeout would cut a long stream; each write below
	// is bounded by the client's reading instead.
	if err := rc.SetWriteDeadline(time.Time{}); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if _, err := io.WriteString(w, ": stream\n\n"); err != nil {
		return nil
	}
	if err := rc.Flush(); err != nil {
		return nil
	}
	// A stream outlives its request's authentication: it checks again,
	// in the store, that its token or session still holds.
	cred, authenticated := credentialOf(ctx)
	recheck := time.NewTicker(s.cfg.StreamRecheck)
	defer recheck.Stop()
	poll := time.NewTicker(s.cfg.StreamPoll)
	defer poll.Stop()
	heartbeat := time.NewTicker(s.cfg.Heartbeat)
	defer heartbeat.Stop()
	var ended time.Time // when the stream's last event was seen
	for {
		// Take the commit signal before reading, so a commit between the
		// read and the wait is not missed.
		commit := s.commitSignal()
		evs, err := s.store.Events(ctx, store.EventFilter{ExecutionID: execID, AfterID: after, Limit: streamPage})
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			s.log.Warn("stream: read events failed", "execution", execID, "err", err)
			return nil // headers are sent: end the stream; the client reconnects with Last-Event-ID
		}
		for _, ev := range evs {
			after = ev.ID
			if !p.seesEvent(ev) {
				continue
			}
			if err := writeEvent(w, ev); err != nil {
				return nil
			}
			if execID != "" && ended.IsZero() && s.endsStream(ctx, ev) {
				ended = time.Now()
			}
		}
		if len(evs) > 0 {
			if err := rc.Flush(); err != nil {
				return nil
			}
		}
		if len(evs) == streamPage {
			continue
		}
		if !ended.IsZero() && s.settled(ctx, execID, ended) {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-commit:
		case <-poll.C:
		case <-recheck.C:
			if !authenticated {
				continue
			}
			if _, err := s.resolve(ctx, cred, true); err != nil {
				var ae *apiError
				if !errors.As(err, &ae) || ae.Status != http.StatusUnauthorized {
					// The store is unreachable: the next read ends the
					// stream if it still is.
					s.log.Warn("stream: re-check of its token failed", "err", err)
					continue
				}
				s.log.Info("stream ended: its token or session no longer holds", "token", p.Name, "reason", ae.Message)
				_, _ = fmt.Fprintf(w, ": ended: %s\n\n", ae.Message)
				_ = rc.Flush()
				return nil
			}
		case <-heartbeat.C:
			if _, err := io.WriteString(w, ": heartbeat\n\n"); err != nil {
				return nil
			}
			if err := rc.Flush(); err != nil {
				return nil
			}
		}
	}
}

// settleMax bounds how long a stream waits, after an execution's
// completion, for statuses still on their way.
const settleMax = 10 * time.Second

// settled reports whether an ended execution's stream may close: its
// completion and statuses travel on different queues, so the statuses the
// last node sent with the completion may be committed just after it. The
// stream closes once no node run is left running, waiting or retrying, or
// settleMax after the completion (a status lost for good).
func (s *Server) settled(ctx context.Context, execID string, ended time.Time) bool {
	if time.Since(ended) > settleMax {
		return true
	}
	runs, err := s.store.NodeRuns(ctx, execID)
	if err != nil {
		return false
	}
	for _, r := range runs {
		switch r.Status {
		case message.StatusRunning, message.StatusWaiting, message.StatusRetrying, message.StatusPaused:
			return false
		}
	}
	return true
}

// endsStream reports whether ev is an execution's last event: its
// completion, its cancel before it ran, or the status of a dead-lettered
// message while the execution is still failed by it (not yet replayed).
func (s *Server) endsStream(ctx context.Context, ev store.Event) bool {
	switch ev.Kind {
	case "completion":
		return true
	case "status":
		var st message.NodeStatus
		if !bytes.Contains(ev.Body, []byte(message.CodeDeadLettered)) || json.Unmarshal(ev.Body, &st) != nil || !st.DeadLetter() {
			return false
		}
		x, err := s.store.GetExecution(ctx, ev.ExecutionID)
		return err == nil && x.Status == store.StatusFailed
	case "execution":
		var c store.ExecutionChange
		return json.Unmarshal(ev.Body, &c) == nil && c.Change == store.ChangeCancelled && store.Final(c.Status)
	}
	return false
}

// writeEvent writes one SSE frame. Bodies are JSON on one line (compacted
// if need be: a newline would end the data field).
func writeEvent(w io.Writer, ev store.Event) error {
	data := []byte(ev.Body)
	if bytes.ContainsAny(data, "\r\n") {
		var b bytes.Buffer
		if err := json.Compact(&b, data); err == nil {
			data = b.Bytes()
		}
	}
	_, err := fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", ev.ID, ev.Kind, data)
	return err
}

// streamCounts counts the open event streams of each token on this server
// (Config.MaxStreams).
type streamCounts struct {
	mu sync.Mutex
	n  map[string]int
}

// acquire counts one more stream of token name, unless it has limit open.
func (c *streamCounts) acquire(name string, limit int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	if c.n[name] >= limit {
		return false
	}
	c.n[name]++
	return true
}

// release counts one stream of token name less.
func (c *streamCounts) release(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n[name]--; c.n[name] <= 0 {
		delete(c.n, name)
	}
}
