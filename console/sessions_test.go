package console_test

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rune-org/rune/console"
)

// revocationReach is how soon logout, a revocation or an expiry must end
// a session and its streams (issue 31).
const revocationReach = 5 * time.Second

// cookie returns the session's cookie value.
func (s *session) cookie() string {
	u, _ := url.Parse(s.tg.url)
	for _, c := range s.jar.Cookies(u) {
		if c.Name == "rune_session" {
			return c.Value
		}
	}
	s.t.Fatal("no session cookie")
	return ""
}

// stream opens a console path that streams (the proxy to /v1/events) in a
// connection of its own and returns a channel closed when it ends.
func (s *session) stream(path string) <-chan struct{} {
	s.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s.t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", s.tg.url+path, nil)
	res, err := s.hc.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "text/event-stream" {
		res.Body.Close()
		s.t.Fatalf("GET %s: %d %s, want a stream", path, res.StatusCode, res.Header.Get("Content-Type"))
	}
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
		}
	}()
	return ended
}

// endsWithin fails t unless ended closes within d of from.
func endsWithin(t *testing.T, what string, ended <-chan struct{}, from time.Time, d time.Duration) {
	t.Helper()
	select {
	case <-ended:
	case <-time.After(time.Until(from.Add(60 * time.Second))):
		t.Fatalf("%s: still open a minute later", what)
	}
	if took := time.Since(from); took > d {
		t.Errorf("%s: ended after %v, want within %v", what, took.Round(time.Millisecond), d)
	}
}

// withCookie is a client without a jar that sends cookie value v.
func withCookie(t *testing.T, base, path, v string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("GET", base+path, nil)
	req.AddCookie(&http.Cookie{Name: "rune_session", Value: v})
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res
}

// TestLogoutEndsTheSession: the proxy acts as the session's token with no
// token in the cookie; logout ends the session where it is kept: the old
// cookie value opens no page and no API call any more, and the session's
// open stream ends within 5 s.
func TestLogoutEndsTheSession(t *testing.T) {
	t.Parallel()
	tg := embeddedTarget(t)
	s := tg.login(t)
	old := s.cookie()
	if code, body := s.get("/ui/api/v1/workflows"); code != http.StatusOK || !strings.Contains(body, `"items"`) {
		t.Fatalf("the API through the session: %d %s", code, limit(body, 200))
	}
	live := s.stream("/ui/api/v1/events")
	_, page := s.get("/")
	csrf := between(page, `<meta name="csrf" content="`, `"`)
	from := time.Now()
	if code, _ := s.do("POST", "/logout", "", "X-Rune-CSRF", csrf); code != http.StatusSeeOther {
		t.Fatalf("logout: %d, want 303", code)
	}
	if res := withCookie(t, tg.url, "/ui/api/v1/workflows", old); res.StatusCode != http.StatusUnauthorized {
		t.Errorf("the API through a logged-out cookie: %d, want 401", res.StatusCode)
	}
	if res := withCookie(t, tg.url, "/executions", old); res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(res.Header.Get("Location"), "/login") {
		t.Errorf("a page with a logged-out cookie: %d to %q, want the login form", res.StatusCode, res.Header.Get("Location"))
	}
	endsWithin(t, "the logged-out session's stream", live, from, revocationReach)
	// The session id is no API token either.
	if code, _ := (&target{url: tg.url, token: old}).api(t, "GET", "/v1/workflows", ""); code != http.StatusUnauthorized {
		t.Errorf("the session id as a bearer token: %d, want 401", code)
	}
}

// TestRevocationEndsSessions: a token revoked in the store (as `rune token
// revoke` does from another process) ends its console sessions, and their
// streams through the proxy, within 5 s; an expiring token's too.
func TestRevocationEndsSessions(t *testing.T) {
	t.Parallel()
	tg := embeddedTarget(t)
	s := tg.login(t)
	cookie := s.cookie()
	live := s.stream("/ui/api/v1/events")
	from := time.Now()
	if err := tg.store.RevokeToken(context.Background(), "console", from); err != nil {
		t.Fatal(err)
	}
	endsWithin(t, "a revoked token's console stream", live, from, revocationReach)
	waitFor(t, "the session to end", func() bool {
		return withCookie(t, tg.url, "/ui/api/v1/workflows", cookie).StatusCode == http.StatusUnauthorized
	})
	if took := time.Since(from); took > revocationReach {
		t.Errorf("the revoked token's session worked for %v, want at most %v", took, revocationReach)
	}
}

// TestLoginThrottle: failed logins from one address are throttled (429
// with Retry-After, the right token refused too) once LoginFailures failed
// within LoginWindow; successes count nothing; another address is not
// throttled; the window passing lets the address in again.
func TestLoginThrottle(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	tg := embeddedTarget(t, func(c *console.Config) { c.LoginFailures, c.LoginWindow, c.Now = 2, time.Minute, clock })
	post := func(from, token string) *http.Response {
		t.Helper()
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
		hc := &http.Client{Transport: &http.Transport{DialContext: d.DialContext},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		res, err := hc.PostForm(tg.url+"/login", url.Values{"token": {token}, "next": {"/"}})
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res
	}
	for range 3 {
		if res := post("127.0.0.1", tg.token); res.StatusCode != http.StatusSeeOther {
			t.Fatalf("login: %d, want 303 (successes count nothing)", res.StatusCode)
		}
	}
	for i := range 2 {
		if res := post("127.0.0.1", "rune_wrong"); res.StatusCode != http.StatusUnauthorized {
			t.Fatalf("failed login %d: %d, want 401", i+1, res.StatusCode)
		}
	}
	for _, tok := range []string{"rune_wrong", tg.token} {
		res := post("127.0.0.1", tok)
		secs, _ := strconv.Atoi(res.Header.Get("Retry-After"))
		if res.StatusCode != http.StatusTooManyRequests || secs < 1 || secs > 60 || len(res.Cookies()) != 0 {
			t.Fatalf("a login after 2 failures: %d, Retry-After %q, cookies %v; want 429, 1–60 s, none",
				res.StatusCode, res.Header.Get("Retry-After"), res.Cookies())
		}
	}
	if res := post("127.0.0.2", tg.token); res.StatusCode != http.StatusSeeOther {
		t.Errorf("a login from another address: %d, want 303", res.StatusCode)
	}
	mu.Lock()
	now = now.Add(61 * time.Second)
	mu.Unlock()
	if res := post("127.0.0.1", tg.token); res.StatusCode != http.StatusSeeOther {
		t.Errorf("a login once the window passed: %d, want 303", res.StatusCode)
	}
}

// TestSecureCookie: with SecureCookie (rune server --public-url https://…,
// a proxy terminating TLS) the cookie is Secure even over plain HTTP.
func TestSecureCookie(t *testing.T) {
	t.Parallel()
	tg := embeddedTarget(t, func(c *console.Config) { c.SecureCookie = true })
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := noRedirect.PostForm(tg.url+"/login", url.Values{"token": {tg.token}, "next": {"/"}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if cs := res.Cookies(); len(cs) != 1 || !cs[0].Secure || !cs[0].HttpOnly || cs[0].SameSite != http.SameSiteStrictMode {
		t.Fatalf("session cookie %+v, want Secure, HttpOnly, SameSite=Strict", cs)
	}
}
