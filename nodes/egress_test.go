package nodes

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rune-org/rune/egress"
	"github.com/rune-org/rune/egress/egresstest"
	"github.com/rune-org/rune/internal/catcher"
	"github.com/rune-org/rune/node"
	"github.com/rune-org/rune/workflow"
)

// testNames are the names tests resolve: nothing is looked up, and nothing
// but loopback is ever dialled (egresstest.Dialer).
var testNames = egresstest.Resolver{
	"metadata.test": {"169.254.169.254"},
	"smtp.test":     {"127.0.0.1"},
	"sms.test":      {"127.0.0.1"},
	"local.test":    {"127.0.0.1"},
}

func policy(t *testing.T, d *egresstest.Dialer, allow string) *egress.Policy {
	t.Helper()
	p, err := egress.New(egress.Config{Allow: allow, Resolver: testNames, Dial: d.Dial})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// counting is a server counting its requests.
func counting(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int64) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		if h != nil {
			h(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func deniedError(t *testing.T, err error, host, addr, rule string) {
	t.Helper()
	ne := nodeError(t, err, CodeEgressDenied, false)
	for _, s := range []string{host, addr, rule} {
		if !strings.Contains(ne.Message, s) {
			t.Errorf("message %q does not name %q", ne.Message, s)
		}
	}
	if ne.Details["host"] != host || ne.Details["address"] != addr || ne.Details["rule"] != rule {
		t.Errorf("details %v, want host %s, address %s, rule %s", ne.Details, host, addr, rule)
	}
}

// An http node refused by the egress policy fails with EGRESS_DENIED, not
// retried, naming host, address and rule, before anything is dialled: a
// cloud metadata name, a loopback server, a redirect to either.
func TestHTTPEgressDenied(t *testing.T) {
	t.Parallel()
	srv, hits := counting(t, func(w http.ResponseWriter, r *http.Request) {
		if to := r.URL.Query().Get("to"); to != "" {
			http.Redirect(w, r, to, http.StatusFound)
		}
	})
	u, _ := url.Parse(srv.URL)
	d := &egresstest.Dialer{T: t}
	opts := Options{Egress: policy(t, d, "")}

	_, err := runHTTP(t, opts, httpNode(map[string]any{"url": "http://metadata.test/latest/meta-data/?token=q-SECRET"}), &node.Input{})
	deniedError(t, err, "metadata.test", "169.254.169.254:80", "link-local")
	if strings.Contains(err.Error(), "q-SECRET") {
		t.Errorf("the error shows the query: %v", err)
	}
	_, err = runHTTP(t, opts, httpNode(map[string]any{"url": srv.URL}), &node.Input{})
	deniedError(t, err, u.Hostname(), u.Host, "loopback")
	if got := d.Dialled(); len(got) != 0 || hits.Load() != 0 {
		t.Fatalf("dialled %v, server hit %d times: want nothing", got, hits.Load())
	}

	// Loopback allowed: the server answers, its redirect to metadata is
	// refused before a connection.
	opts = Options{Egress: policy(t, d, "127.0.0.0/8")}
	if _, err := runHTTP(t, opts, httpNode(map[string]any{"url": srv.URL}), &node.Input{}); err != nil {
		t.Fatalf("loopback allowed: %v", err)
	}
	for _, to := range []string{"http://metadata.test/x", "http://169.254.169.254/x"} {
		n := httpNode(map[string]any{"url": srv.URL + "/?to=" + url.QueryEscape(to)})
		_, err = runHTTP(t, opts, n, &node.Input{})
		deniedError(t, err, strings.TrimPrefix(strings.TrimSuffix(to, "/x"), "http://"), "169.254.169.254:80", "link-local")
	}
	for _, a := range d.Dialled() {
		if a != u.Host {
			t.Fatalf("dialled %s, want only the test server %s", a, u.Host)
		}
	}
}

// The SMS providers' endpoints and the email node's SMTP server come from
// credentials, which any token may write: the policy applies to them too.
func TestNotifyEgressDenied(t *testing.T) {
	t.Parallel()
	sms, hits := counting(t, func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(`{"id": "m1"}`)) })
	smsURL, _ := url.Parse(sms.URL)
	d := &egresstest.Dialer{T: t}
	cred := map[string]string{"type": "webhook", "url": "http://sms.test:" + smsURL.Port() + "/send"}
	_, err := runSMS(t, Options{Egress: policy(t, d, "")}, cred, smsParams, "k1")
	deniedError(t, err, "sms.test", smsURL.Host, "loopback")
	if _, err := runSMS(t, Options{Egress: policy(t, d, "sms.test")}, cred, smsParams, "k2"); err != nil {
		t.Fatalf("sms.test allowed: %v", err)
	}
	if hits.Load() != 1 {
		t.Fatalf("provider hit %d times, want once (the allowed send)", hits.Load())
	}

	serverTLS, roots, err := catcher.Certificate()
	if err != nil {
		t.Fatal(err)
	}
	s := startSMTP(t, catcher.SMTPConfig{TLS: "tls", TLSConfig: serverTLS})
	params := map[string]any{"from": "a@rune.test", "to": "ada@example.com", "subject": "x", "text": "y"}
	mail := map[string]string{"type": "smtp", "host": "smtp.test", "port": strconv.Itoa(s.Port()), "tls": "tls"}
	_, err = runEmail(t, Options{Egress: policy(t, d, "")}, mail, params, welcomeEnv, "k3")
	deniedError(t, err, "smtp.test", s.Addr(), "loopback")
	if n := len(d.Dialled()); n != 1 {
		t.Fatalf("dialled %v, want only the allowed SMS send", d.Dialled())
	}
	// Allowed, implicit TLS is set up over the policy's connection.
	mail["host"] = "127.0.0.1"
	opts := Options{Egress: policy(t, d, "127.0.0.1"), TLSConfig: &tls.Config{RootCAs: roots}}
	if _, err := runEmail(t, opts, mail, params, welcomeEnv, "k4"); err != nil {
		t.Fatalf("127.0.0.1 allowed: %v", err)
	}
	if m := s.Mails(); len(m) != 1 || !m[0].TLS {
		t.Fatalf("mails %+v, want the allowed one, over TLS", m)
	}
}

// A redirect to another host does not carry Referer (net/http sends the
// previous URL, its query included); on the same origin it does.
func TestHTTPRefererDroppedAcrossHosts(t *testing.T) {
	t.Parallel()
	referers := make(chan string, 4)
	other, _ := counting(t, func(w http.ResponseWriter, r *http.Request) { referers <- r.Header.Get("Referer") })
	front, _ := counting(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/away":
			http.Redirect(w, r, other.URL+"/landing", http.StatusFound)
		case "/here":
			http.Redirect(w, r, "/landing", http.StatusFound)
		default:
			referers <- r.Header.Get("Referer")
		}
	})
	for _, tc := range []struct {
		path string
		want bool
	}{{"/away", false}, {"/here", true}} {
		n := httpNode(map[string]any{"url": front.URL + tc.path + "?session=s-SECRET"})
		if _, err := runHTTP(t, Options{}, n, &node.Input{}); err != nil {
			t.Fatal(err)
		}
		got := <-referers
		if tc.want != (got != "") {
			t.Errorf("%s: Referer %q, want present %v", tc.path, got, tc.want)
		}
	}
	// With credentials too (their client wraps the redirect policy).
	n := httpNode(map[string]any{"url": front.URL + "/away?session=s-SECRET"})
	n.Credentials = &workflow.CredentialRef{Ref: "apikey"}
	if _, err := runHTTP(t, Options{}, n, &node.Input{Secrets: fakeSecrets{"apikey": {"header:X-Api-Key": "k"}}}); err != nil {
		t.Fatal(err)
	}
	if got := <-referers; got != "" {
		t.Errorf("with credentials: Referer %q across hosts", got)
	}
}
