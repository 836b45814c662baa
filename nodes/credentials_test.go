package nodes

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rune-org/rune/node"
	"github.com/rune-org/rune/workflow"
)

// headerRecorder is a server that records the headers of every request.
func headerRecorder(t *testing.T, tls bool) (*httptest.Server, chan http.Header) {
	t.Helper()
	seen := make(chan http.Header, 10)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Clone()
		w.WriteHeader(http.StatusNoContent)
	})
	var srv *httptest.Server
	if tls {
		srv = httptest.NewTLSServer(h)
	} else {
		srv = httptest.NewServer(h)
	}
	t.Cleanup(srv.Close)
	return srv, seen
}

func redirector(t *testing.T, tls bool, to string) *httptest.Server {
	t.Helper()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Api-Key") == "" && r.Header.Get("Authorization") == "" {
			t.Errorf("the first request carried no credential: %v", r.Header)
		}
		http.Redirect(w, r, to, http.StatusFound)
	})
	var srv *httptest.Server
	if tls {
		srv = httptest.NewTLSServer(h)
	} else {
		srv = httptest.NewServer(h)
	}
	t.Cleanup(srv.Close)
	return srv
}

// Credentials never follow a redirect to another host, nor from https to
// plain http (issue 12: a 302 sent X-Api-Key to the other host).
func TestHTTPCredentialsStayOnTheirHost(t *testing.T) {
	t.Parallel()
	const secret = "key-SECRET-9876"
	secrets := fakeSecrets{
		"apikey": {"header:X-Api-Key": secret},
		"bearer": {"token": secret},
		"basic":  {"username": "ann", "password": secret},
	}
	other, seen := headerRecorder(t, false)
	// The same server under another host name.
	otherHost := strings.Replace(other.URL, "127.0.0.1", "localhost", 1)
	tlsFront := redirector(t, true, other.URL) // https → http
	for _, tc := range []struct {
		name, from string
		client     *http.Client
	}{
		{"to another host", redirector(t, false, otherHost+"/landing").URL, nil},
		{"to another port", redirector(t, false, other.URL+"/landing").URL, nil},
		{"from https to http", tlsFront.URL, tlsFront.Client()},
	} {
		for ref := range secrets {
			n := httpNode(map[string]any{"url": tc.from + "/start"})
			n.Credentials = &workflow.CredentialRef{Ref: ref}
			if _, err := runHTTP(t, Options{HTTPClient: tc.client}, n, &node.Input{Secrets: secrets}); err != nil {
				t.Fatalf("%s, %s: %v", tc.name, ref, err)
			}
			h := <-seen
			for name, vs := range h {
				if strings.Contains(strings.Join(vs, " "), secret) || name == "Authorization" || name == "X-Api-Key" {
					t.Errorf("%s, credential %s: the redirect target got %s: %v", tc.name, ref, name, vs)
				}
			}
		}
	}

	// The same origin keeps them.
	same, seenSame := headerRecorder(t, false)
	mux := http.NewServeMux()
	mux.HandleFunc("/start", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/next", http.StatusFound) })
	mux.HandleFunc("/next", func(w http.ResponseWriter, r *http.Request) { same.Config.Handler.ServeHTTP(w, r) })
	front := httptest.NewServer(mux)
	defer front.Close()
	n := httpNode(map[string]any{"url": front.URL + "/start"})
	n.Credentials = &workflow.CredentialRef{Ref: "apikey"}
	if _, err := runHTTP(t, Options{}, n, &node.Input{Secrets: secrets}); err != nil {
		t.Fatal(err)
	}
	if h := <-seenSame; h.Get("X-Api-Key") != secret {
		t.Errorf("a redirect on the same origin lost the credential: %v", h)
	}
}

// A credential that lists its hosts is never sent elsewhere.
func TestHTTPCredentialAllowedHosts(t *testing.T) {
	t.Parallel()
	srv, seen := headerRecorder(t, false)
	secrets := fakeSecrets{
		"elsewhere": {"token": "tok-SECRET-1", AllowedHostsField: "api.example.com, *.example.org"},
		"here":      {"token": "tok-SECRET-2", AllowedHostsField: "api.example.com,127.0.0.1"},
		"wildcard":  {"token": "tok-SECRET-3", AllowedHostsField: "*.0.0.1"},
	}
	n := httpNode(map[string]any{"url": srv.URL})
	n.Credentials = &workflow.CredentialRef{Ref: "elsewhere"}
	_, err := runHTTP(t, Options{}, n, &node.Input{Secrets: secrets})
	nodeError(t, err, CodeCredentials, false)
	if err != nil && !strings.Contains(err.Error(), `host "127.0.0.1"`) {
		t.Errorf("error %q does not name the host", err)
	}
	select {
	case h := <-seen:
		t.Errorf("a request was sent with a credential not allowed for the host: %v", h)
	default:
	}
	for _, ref := range []string{"here", "wildcard"} {
		n.Credentials = &workflow.CredentialRef{Ref: ref}
		if _, err := runHTTP(t, Options{}, n, &node.Input{Secrets: secrets}); err != nil {
			t.Fatalf("%s: %v", ref, err)
		}
		if h := <-seen; !strings.HasPrefix(h.Get("Authorization"), "Bearer tok-SECRET") {
			t.Errorf("%s: server saw %v", ref, h)
		}
	}
}
