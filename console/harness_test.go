package console_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rune-org/rune/console"
	"github.com/rune-org/rune/embedded"
	"github.com/rune-org/rune/internal/testinfra"
	"github.com/rune-org/rune/secrets"
	"github.com/rune-org/rune/server"
	"github.com/rune-org/rune/store"
	"github.com/rune-org/rune/store/sqlite"
)

// target is a running server with the console mounted, as `rune server`
// serves it.
type target struct {
	url   string
	token string
	store store.Store
}

// embeddedTarget starts the embedded default in this process: SQLite in a
// temporary directory, the in-process worker and scheduler, the API and the
// console on an httptest server.
func embeddedTarget(t *testing.T, opts ...func(*console.Config)) *target {
	return embeddedTargetWith(t, func(*server.Config) {}, opts...)
}

// embeddedTargetWith is embeddedTarget with tweak adjusting the server's
// config.
func embeddedTargetWith(t *testing.T, tweak func(*server.Config), opts ...func(*console.Config)) *target {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := sqlite.Open(ctx, filepath.Join(dir, "rune.db"))
	if err != nil {
		t.Fatal(err)
	}
	keys, err := secrets.LoadKeys("", filepath.Join(dir, "secret.key"), true)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(&testinfra.Buffer{}, nil))
	rt, err := embedded.New(embedded.Options{Logger: log, ConsumeEvents: true, Secrets: secrets.Store{Store: st, Keys: keys}})
	if err != nil {
		t.Fatal(err)
	}
	scfg := server.Config{Store: st, Broker: rt.Broker, Engine: rt.Engine, Keys: keys, Logger: log}
	tweak(&scfg)
	s, err := server.New(scfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg := console.Config{API: s.Handler(), Store: st, Tokens: s, Mode: "embedded", Logger: log,
		Validate: func(def []byte) error { _, err := rt.Engine.Compile(def); return err }}
	for _, o := range opts {
		o(&cfg)
	}
	c, err := console.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(runCtx) }()
	hs := httptest.NewServer(console.Mount(s.Handler(), c))
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("server run: %v", err)
		}
		rt.Close()
		st.Close()
	})
	tok, rec, err := server.NewToken("console", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CreateToken(ctx, rec); err != nil {
		t.Fatal(err)
	}
	return &target{url: hs.URL, token: tok, store: st}
}

// api calls the JSON API with the bearer token and returns status and body.
func (tg *target) api(t *testing.T, method, path, body string, header ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, tg.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tg.token)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// mustAPI is api that fails the test unless the status is want.
func (tg *target) mustAPI(t *testing.T, want int, method, path, body string, header ...string) string {
	t.Helper()
	code, out := tg.api(t, method, path, body, header...)
	if code != want {
		t.Fatalf("%s %s: status %d, want %d: %s", method, path, code, want, out)
	}
	return out
}

// session is a browser-like HTTP client (cookie jar, no redirects
// followed) logged in to the console.
type session struct {
	t   *testing.T
	tg  *target
	hc  *http.Client
	jar http.CookieJar
}

func (tg *target) login(t *testing.T) *session {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	s := &session{t: t, tg: tg, jar: jar, hc: &http.Client{Jar: jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	res, err := s.hc.PostForm(tg.url+"/login", url.Values{"token": {tg.token}, "next": {"/"}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("login: status %d, want 303", res.StatusCode)
	}
	return s
}

// get fetches a console path and returns status and body.
func (s *session) get(path string) (int, string) {
	s.t.Helper()
	res, err := s.hc.Get(s.tg.url + path)
	if err != nil {
		s.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// do sends a console request with extra headers.
func (s *session) do(method, path, body string, header ...string) (int, string) {
	s.t.Helper()
	req, _ := http.NewRequest(method, s.tg.url+path, strings.NewReader(body))
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := s.hc.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// waitFor polls cond until it holds or a deadline sized for a loaded
// machine passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
