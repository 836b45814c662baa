package server_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rune-org/rune/server"
	"github.com/rune-org/rune/store"
	"github.com/rune-org/rune/store/sqlite"
)

// revocationReach is how soon a revocation or an expiry must end a
// token's streams and sessions (issue 31).
const revocationReach = 5 * time.Second

// storeToken stores a token of role that expires after lifetime (0: never).
func storeToken(t *testing.T, st store.Store, name, role string, lifetime time.Duration) string {
	t.Helper()
	tok, rec, err := server.NewScopedToken(name, role, nil, lifetime, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CreateToken(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	return tok
}

// liveStream is an event stream open in a connection of its own.
type liveStream struct {
	// ended is closed when the server ends the stream.
	ended chan struct{}
	// last is the last line the server sent.
	mu   sync.Mutex
	last string
	stop context.CancelFunc
}

func (s *liveStream) lastLine() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// openStream opens path on base with bearer token tok: a stream when the
// server answers 200 (nil and the status and body otherwise, checked
// against openapi.json). The stream is closed when the test ends.
func openStream(t *testing.T, base, path, tok string) (*liveStream, int, []byte) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", base+path, nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("GET %s: %v", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		checkExchange(t, req, nil, resp.StatusCode, resp.Header, body)
		return nil, resp.StatusCode, body
	}
	s := &liveStream{ended: make(chan struct{}), stop: cancel}
	go func() {
		defer close(s.ended)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if sc.Text() != "" {
				s.mu.Lock()
				s.last = sc.Text()
				s.mu.Unlock()
			}
		}
	}()
	t.Cleanup(cancel)
	return s, http.StatusOK, nil
}

// mustStream is openStream that fails the test unless the stream opens.
func mustStream(t *testing.T, base, path, tok string) *liveStream {
	t.Helper()
	s, code, body := openStream(t, base, path, tok)
	if s == nil {
		t.Fatalf("GET %s: %d %s, want a stream", path, code, body)
	}
	return s
}

// endsWithin fails the test unless s ends within d of from (it waits a
// minute before saying how late it was).
func (s *liveStream) endsWithin(t *testing.T, what string, from time.Time, d time.Duration) {
	t.Helper()
	select {
	case <-s.ended:
	case <-time.After(time.Until(from.Add(60 * time.Second))):
		t.Fatalf("%s: the stream is still open a minute later", what)
	}
	if took := time.Since(from); took > d {
		t.Errorf("%s: the stream ended after %v, want within %v", what, took.Round(time.Millisecond), d)
	} else {
		t.Logf("%s: the stream ended after %v", what, took.Round(time.Millisecond))
	}
}

// waitingWorkflow pushes a workflow whose executions wait ten minutes and
// starts one: its stream stays open.
func waitingExecution(t *testing.T, a *api, id string) string {
	t.Helper()
	a.pushWorkflow(wfDef(id, `{"id":"nap","type":"wait","parameters":{"amount":600}}`, `{"id":"e1","src":"start","dst":"nap"}`))
	x := a.trigger(id, `{}`)
	a.waitStatus(x.ID, "waiting")
	return x.ID
}

// TestStreamsEndWithTheirToken: a token revoked in the store (as `rune
// token revoke`, another process, does it: this server's cache is not told)
// ends its open streams, both kinds, within 5 s; another token's stream
// stays open. A token's expiry ends its stream as well.
func TestStreamsEndWithTheirToken(t *testing.T) {
	t.Parallel()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "rune.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	tg := runTarget(t, st, "admin", func(*server.Config) {})
	a := newAPI(t, tg)
	x := waitingExecution(t, a, "revoke-streams")
	tok := storeToken(t, st, "watcher", store.RoleViewer, 0)
	all := mustStream(t, tg.url, "/v1/events", tok)
	one := mustStream(t, tg.url, "/v1/executions/"+x+"/events", tok)
	other := mustStream(t, tg.url, "/v1/events", tg.token)
	minted := time.Now()
	expiring := storeToken(t, st, "short-lived", store.RoleViewer, 6*time.Second)
	expiresBy := time.Now().Add(6 * time.Second) // the expiry is between minted+6s and this
	short := mustStream(t, tg.url, "/v1/events", expiring)

	revoked := time.Now()
	if err := st.RevokeToken(context.Background(), "watcher", revoked); err != nil {
		t.Fatal(err)
	}
	all.endsWithin(t, "GET /v1/events of a revoked token", revoked, revocationReach)
	one.endsWithin(t, "GET /v1/executions/{id}/events of a revoked token", revoked, revocationReach)
	if l := all.lastLine(); !strings.Contains(l, "revoked") {
		t.Errorf("the stream's last line %q does not say why it ended", l)
	}
	select {
	case <-other.ended:
		t.Fatal("another token's stream ended too")
	default:
	}
	if _, code, _ := openStream(t, tg.url, "/v1/events", tok); code != http.StatusUnauthorized {
		t.Errorf("a revoked token opens a stream: %d, want 401", code)
	}
	short.endsWithin(t, "GET /v1/events of an expired token", expiresBy, revocationReach)
	if time.Now().Before(minted.Add(6 * time.Second)) {
		t.Error("the expiring token's stream ended before its expiry")
	}
}

// TestStreamsCapPerToken: a token may hold MaxStreams event streams on a
// server; one more is refused with 429 rate_limited saying so, another
// token is not affected, and a closed stream makes room again.
func TestStreamsCapPerToken(t *testing.T) {
	t.Parallel()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "rune.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	tg := runTarget(t, st, "admin", func(c *server.Config) { c.MaxStreams = 2 })
	a := newAPI(t, tg)
	x := waitingExecution(t, a, "stream-cap")
	tok := storeToken(t, st, "dashboard", store.RoleViewer, 0)
	first := mustStream(t, tg.url, "/v1/events", tok)
	mustStream(t, tg.url, "/v1/executions/"+x+"/events", tok)
	for _, path := range []string{"/v1/events", "/v1/executions/" + x + "/events"} {
		s, code, body := openStream(t, tg.url, path, tok)
		if s != nil || code != http.StatusTooManyRequests || !strings.Contains(string(body), `"rate_limited"`) ||
			!strings.Contains(string(body), `dashboard\" has 2 event streams open`) {
			t.Fatalf("a third stream (%s): %d %s, want 429 rate_limited naming the token and the limit", path, code, body)
		}
	}
	mustStream(t, tg.url, "/v1/events", tg.token) // another token
	first.stop()
	deadline := time.Now().Add(60 * time.Second)
	for {
		s, code, body := openStream(t, tg.url, "/v1/events", tok)
		if s != nil {
			break
		}
		if code != http.StatusTooManyRequests || time.Now().After(deadline) {
			t.Fatalf("after closing a stream: %d %s, want a stream", code, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// clock is a settable time for Config.Now.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// TestConsoleSessions: a console session (server.Server's Login, Session,
// Logout) holds none of its token, acts as its token through the API
// handler (role included) without sending it, ends at logout, at its
// expiry and at its token's; a RUNE_API_TOKEN session ends when the
// server's RUNE_API_TOKEN changes. A session id is no bearer token and a
// token no session.
func TestConsoleSessions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "rune.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clk := &clock{now: time.Now()}
	s, tg := runServer(t, st, "admin", func(c *server.Config) {
		c.APIToken, c.Now, c.Crons.Off, c.SessionTTL = "env-token-one", clk.Now, true, time.Hour
	})
	tok := storeToken(t, st, "viewer", store.RoleViewer, 0)
	id, err := s.Login(ctx, tok)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(id, tok) || len(id) < 40 {
		t.Fatalf("session id %q holds the token or is short", id)
	}
	sctx, acc, err := s.Session(ctx, id)
	if err != nil || acc.Operate || acc.Edit || !acc.Sees("any") {
		t.Fatalf("Session = %+v, %v; want a viewer's access", acc, err)
	}
	call := func(ctx context.Context, method, path string) int {
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, httptest.NewRequestWithContext(ctx, method, path, strings.NewReader(`{}`)))
		return rec.Code
	}
	if code := call(sctx, "GET", "/v1/workflows"); code != http.StatusOK {
		t.Errorf("GET /v1/workflows as the session: %d, want 200", code)
	}
	if code := call(sctx, "POST", "/v1/workflows"); code != http.StatusForbidden {
		t.Errorf("POST /v1/workflows as a viewer's session: %d, want 403", code)
	}
	if code := call(ctx, "GET", "/v1/workflows"); code != http.StatusUnauthorized {
		t.Errorf("GET /v1/workflows without the session: %d, want 401", code)
	}
	if _, code, _ := openStream(t, tg.url, "/v1/executions", id); code != http.StatusUnauthorized {
		t.Errorf("the session id as a bearer token: %d, want 401", code)
	}
	if _, _, err := s.Session(ctx, tok); err == nil {
		t.Error("a token is accepted as a session id")
	}
	if _, err := s.Login(ctx, "rune_wrong"); err == nil {
		t.Error("Login with a wrong token succeeded")
	}

	// Logout ends it at once; a second logout is harmless.
	if err := s.Logout(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Session(ctx, id); err == nil || !strings.Contains(err.Error(), "log in again") {
		t.Errorf("Session after logout: %v, want an error", err)
	}
	if code := call(sctx, "GET", "/v1/workflows"); code != http.StatusUnauthorized {
		t.Errorf("the API through a logged-out session: %d, want 401", code)
	}
	if err := s.Logout(ctx, id); err != nil {
		t.Errorf("a second logout: %v", err)
	}

	// Expiry: the session's own (an hour), then a token's that ends sooner.
	id, _ = s.Login(ctx, tok)
	clk.add(59 * time.Minute)
	if _, _, err := s.Session(ctx, id); err != nil {
		t.Fatalf("a session within its hour: %v", err)
	}
	clk.add(2 * time.Minute)
	if _, _, err := s.Session(ctx, id); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Errorf("a session past its hour: %v, want expired", err)
	}
	short, rec, _ := server.NewScopedToken("short", store.RoleViewer, nil, 10*time.Minute, clk.Now())
	if err := st.CreateToken(ctx, rec); err != nil {
		t.Fatal(err)
	}
	id, err = s.Login(ctx, short)
	if err != nil {
		t.Fatal(err)
	}
	clk.add(11 * time.Minute)
	if _, _, err := s.Session(ctx, id); err == nil || !strings.Contains(err.Error(), `token "short" expired`) {
		t.Errorf("a session whose token expired: %v, want the token's expiry", err)
	}

	// RUNE_API_TOKEN: an admin session, bound to the token's value.
	envID, err := s.Login(ctx, "env-token-one")
	if err != nil {
		t.Fatal(err)
	}
	if _, acc, err := s.Session(ctx, envID); err != nil || !acc.Purge {
		t.Fatalf("RUNE_API_TOKEN session: %+v, %v; want an admin", acc, err)
	}
	s2, _ := runServer(t, st, "admin2", func(c *server.Config) { c.APIToken, c.Now, c.Crons.Off = "env-token-two", clk.Now, true })
	if _, _, err := s2.Session(ctx, envID); err == nil || !strings.Contains(err.Error(), "RUNE_API_TOKEN") {
		t.Errorf("a RUNE_API_TOKEN session on a server with another RUNE_API_TOKEN: %v, want refused", err)
	}
}

// TestRevocationReachesAnotherProcess: two `rune server` processes on one
// PostgreSQL. A token revoked through server b's API ends its stream open
// on server a within 5 s; a token revoked by `rune token revoke` (a third
// process, on the store) likewise.
func TestRevocationReachesAnotherProcess(t *testing.T) {
	t.Parallel()
	d := newDeployment(t)
	a, b := d.server(), d.server()
	d.waitHealthy(a)
	d.waitHealthy(b)
	st := d.store()
	admin := storeToken(t, st, "admin", store.RoleAdmin, 0)
	t1 := storeToken(t, st, "through-api", store.RoleViewer, 0)
	t2 := storeToken(t, st, "through-cli", store.RoleViewer, 0)
	s1 := mustStream(t, "http://"+a.addr, "/v1/events", t1)
	s2 := mustStream(t, "http://"+a.addr, "/v1/events", t2)

	req, _ := http.NewRequest("DELETE", "http://"+b.addr+"/v1/tokens/through-api", nil)
	req.Header.Set("Authorization", "Bearer "+admin)
	revoked := time.Now()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE /v1/tokens/through-api on server b: %d", res.StatusCode)
	}
	s1.endsWithin(t, "revoked through another server", revoked, revocationReach)

	cli := exec.Command(runeBin, "token", "revoke", "through-cli", "--postgres", d.pgURL)
	if out, err := cli.CombinedOutput(); err != nil {
		t.Fatalf("rune token revoke: %v: %s", err, out)
	}
	revoked = time.Now() // once the CLI process has committed and exited
	s2.endsWithin(t, "revoked by rune token revoke", revoked, revocationReach)
}
