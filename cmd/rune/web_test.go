package main

import (
	"context"
	"crypto/tls"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/rune-org/rune/internal/catcher"
	"github.com/rune-org/rune/internal/testinfra"
)

// serve runs `rune server` with args until the test ends, and waits until
// base/healthz answers 200 through hc.
func serve(t *testing.T, c *cli, hc *http.Client, base string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	logs := &testinfra.Buffer{}
	env := &cliEnv{stdout: logs, stderr: logs, getenv: func(k string) string { return c.vars[k] }}
	done := make(chan int, 1)
	go func() { done <- runMain(ctx, env, append([]string{"server"}, args...)) }()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("rune server exited %d: %s", code, logs.String())
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := hc.Get(base + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case code := <-done:
			done <- code
			t.Fatalf("rune server exited %d: %s", code, logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("rune server not answering after 60 s (%v): %s", err, logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// loginCookie logs in to the console at base with token and returns the
// session cookie.
func loginCookie(t *testing.T, hc *http.Client, base, token string) *http.Cookie {
	t.Helper()
	res, err := hc.PostForm(base+"/login", url.Values{"token": {token}, "next": {"/"}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther || len(res.Cookies()) != 1 {
		t.Fatalf("login: %d with cookies %v, want 303 and the session cookie", res.StatusCode, res.Cookies())
	}
	return res.Cookies()[0]
}

// TestServerTLS: rune server --tls-cert --tls-key serves the API and the
// console over HTTPS (plain HTTP is refused) and the console's cookie is
// Secure; --public-url https://… makes it Secure behind a TLS proxy.
func TestServerTLS(t *testing.T) {
	t.Parallel()
	const token = "tls-test-token"
	c := &cli{t: t, vars: map[string]string{"RUNE_API_TOKEN": token}}
	certFile, keyFile, roots, err := catcher.CertificateFiles(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	noRedirect := func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}, CheckRedirect: noRedirect, Timeout: 30 * time.Second}
	addr := freeAddr(t)
	serve(t, c, hc, "https://"+addr, "--addr", addr, "--data", t.TempDir(), "--tls-cert", certFile, "--tls-key", keyFile)

	req, _ := http.NewRequest("GET", "https://"+addr+"/v1/workflows", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK || res.TLS == nil {
		t.Fatalf("GET /v1/workflows over HTTPS: %d (TLS %v), want 200", res.StatusCode, res.TLS != nil)
	}
	if res, err := http.Get("http://" + addr + "/healthz"); err == nil {
		res.Body.Close()
		if res.StatusCode == http.StatusOK {
			t.Error("plain HTTP to the TLS server answered 200")
		}
	}
	if ck := loginCookie(t, hc, "https://"+addr, token); !ck.Secure || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode {
		t.Errorf("the console's cookie over HTTPS: %+v, want Secure, HttpOnly, SameSite=Strict", ck)
	}

	// Behind a proxy that terminates TLS: plain HTTP here, https for users.
	plain := &http.Client{CheckRedirect: noRedirect, Timeout: 30 * time.Second}
	addr2 := freeAddr(t)
	serve(t, c, plain, "http://"+addr2, "--addr", addr2, "--data", t.TempDir(), "--public-url", "https://rune.example.com")
	if ck := loginCookie(t, plain, "http://"+addr2, token); !ck.Secure {
		t.Errorf("the console's cookie with an https --public-url: %+v, want Secure", ck)
	}
}

// TestServerWebFlags: bad TLS, public URL, session and stream flags are
// refused at the door, naming the flag.
func TestServerWebFlags(t *testing.T) {
	t.Parallel()
	c := &cli{t: t, vars: map[string]string{}}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--tls-cert", "cert.pem"}, "--tls-key"},
		{[]string{"--tls-cert", "/nonexistent/cert.pem", "--tls-key", "/nonexistent/key.pem"}, "--tls-cert /nonexistent/cert.pem"},
		{[]string{"--public-url", "rune.example.com"}, "--public-url"},
		{[]string{"--public-url", "ftp://rune.example.com"}, "--public-url"},
		{[]string{"--session-ttl", "0s"}, "--session-ttl"},
		{[]string{"--max-streams", "0"}, "--max-streams"},
	} {
		args := append([]string{"server", "--addr", "127.0.0.1:0", "--data", t.TempDir()}, tc.args...)
		if code, _, stderr := c.run(args...); code != exitInvalid || !strings.Contains(stderr, tc.want) {
			t.Errorf("rune server %v: exit %d, stderr %q; want %d naming %s", tc.args, code, stderr, exitInvalid, tc.want)
		}
	}
}
