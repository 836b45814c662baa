package nodes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rune-org/rune/node"
	"github.com/rune-org/rune/workflow"
)

func httpNode(params map[string]any) workflow.Node {
	return workflow.Node{ID: "call", Type: "http", Parameters: params}
}

func runHTTP(t *testing.T, opts Options, n workflow.Node, in *node.Input) (node.Result, error) {
	t.Helper()
	r := compileNode(t, NewRegistry(opts), n)
	if in.Env == nil {
		in.Env = map[string]any{"$trigger": map[string]any{"id": 42.0, "name": "ann b"}}
	}
	return r.Run(context.Background(), in)
}

func TestHTTPCheck(t *testing.T) {
	wantProblems(t, checkNode(t, httpNode(map[string]any{})), map[string]string{"nodes[1].parameters.url": "required"})
	wantProblems(t, checkNode(t, httpNode(map[string]any{
		"method":  "FETCH",
		"url":     "ftp://example.com/x",
		"headers": map[string]any{"Bad Name": "x", "X-Obj": map[string]any{}, "X-Ok": "{{ $trigger.id }}", "X-Broken": "{{ $trigger. }}"},
		"query":   []any{"a"},
		"body":    map[string]any{"a": []any{"{{ 1 + }}"}},
		"timeout": "soon",
		"retries": 3.0,
	})), map[string]string{
		"nodes[1].parameters.method":              `unknown method "FETCH"`,
		"nodes[1].parameters.url":                 "scheme must be http or https",
		`nodes[1].parameters.headers["Bad Name"]`: "invalid header name",
		`nodes[1].parameters.headers["X-Obj"]`:    "not an object",
		`nodes[1].parameters.headers["X-Broken"]`: "column",
		"nodes[1].parameters.query":               "must be an object",
		"nodes[1].parameters.body":                ".a: [0]: ",
		"nodes[1].parameters.timeout":             "invalid duration",
		"nodes[1].parameters.retries":             "unknown parameter",
	})
	wantProblems(t, checkNode(t, httpNode(map[string]any{"url": "https://x/{{ $trigger.id", "timeout": "PT0S"})), map[string]string{
		"nodes[1].parameters.url":     "unclosed {{",
		"nodes[1].parameters.timeout": "more than zero",
	})
	wantProblems(t, checkNode(t, httpNode(map[string]any{"url": "http://x/{{ $trigger.id }}", "method": "post", "timeout": "PT2S"})), nil)
}

func TestHTTPSuccess(t *testing.T) {
	type seen struct {
		method, path, query, ctype, idem, custom string
		body                                     map[string]any
	}
	got := make(chan seen, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := seen{method: r.Method, path: r.URL.Path, query: r.URL.RawQuery, ctype: r.Header.Get("Content-Type"),
			idem: r.Header.Get("Idempotency-Key"), custom: r.Header.Get("X-Trace")}
		_ = json.NewDecoder(r.Body).Decode(&s.body)
		got <- s
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.Header().Add("X-Multi", "first")
		w.Header().Add("X-Multi", "second")
		fmt.Fprint(w, `{"ok": true, "items": [{"sku": "A1"}]}`)
	}))
	defer srv.Close()

	res, err := runHTTP(t, Options{}, httpNode(map[string]any{
		"method":  "POST",
		"url":     srv.URL + "/users/{{ $trigger.id }}",
		"headers": map[string]any{"X-Trace": "t-{{ $trigger.id }}"},
		"query":   map[string]any{"name": "{{ $trigger.name }}", "n": 2.0, "tag": []any{"a", "b"}},
		"body":    map[string]any{"user": "{{ $trigger.id }}", "tags": []any{"x"}},
	}), &node.Input{IdempotencyKey: "ex1/call/0"})
	if err != nil {
		t.Fatal(err)
	}
	s := <-got
	if s.method != "POST" || s.path != "/users/42" || s.query != "n=2&name=ann+b&tag=a&tag=b" || s.ctype != "application/json" ||
		s.idem != "ex1/call/0" || s.custom != "t-42" {
		t.Errorf("server saw %+v", s)
	}
	if s.body["user"] != 42.0 || fmt.Sprint(s.body["tags"]) != "[x]" {
		t.Errorf("server got body %v", s.body)
	}
	out := res.Output.(map[string]any)
	if out["status"] != 200 {
		t.Errorf("status %v", out["status"])
	}
	headers := out["headers"].(map[string]any)
	if headers["x-multi"] != "first" || headers["content-type"] != "application/json; charset=utf-8" {
		t.Errorf("headers %v", headers)
	}
	body, ok := out["body"].(map[string]any)
	if !ok || body["ok"] != true || body["items"].([]any)[0].(map[string]any)["sku"] != "A1" {
		t.Errorf("body %#v", out["body"])
	}
	if _, ok := out["duration_ms"].(int64); !ok {
		t.Errorf("duration_ms %#v", out["duration_ms"])
	}
}

func TestHTTPTextBodyAndNoIdempotencyKey(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := r.Header["Idempotency-Key"]; ok {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintf(w, "got %s as %s", b, r.Header.Get("Content-Type"))
	}))
	defer srv.Close()
	res, err := runHTTP(t, Options{}, httpNode(map[string]any{"method": "PUT", "url": srv.URL, "body": "hi {{ $trigger.name }}"}), &node.Input{})
	if err != nil {
		t.Fatal(err)
	}
	if b := res.Output.(map[string]any)["body"]; b != "got hi ann b as text/plain; charset=utf-8" {
		t.Errorf("body %#v", b)
	}
}

func TestHTTPStatusErrors(t *testing.T) {
	long := strings.Repeat("e", 5000)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var code int
		fmt.Sscan(strings.TrimPrefix(r.URL.Path, "/"), &code)
		if code == 429 {
			w.Header().Set("Retry-After", "7")
		}
		w.WriteHeader(code)
		fmt.Fprint(w, "failure: "+long)
	}))
	defer srv.Close()
	for _, tt := range []struct {
		code      int
		retryable bool
	}{{400, false}, {404, false}, {409, false}, {429, true}, {500, true}, {503, true}} {
		_, err := runHTTP(t, Options{}, httpNode(map[string]any{"url": fmt.Sprintf("%s/%d", srv.URL, tt.code)}), &node.Input{})
		ne := nodeError(t, err, CodeHTTPStatus, tt.retryable)
		if ne.Details["status"] != tt.code {
			t.Errorf("%d: details %v", tt.code, ne.Details["status"])
		}
		snip, _ := ne.Details["body"].(string)
		if !strings.HasPrefix(snip, "failure: eee") || len(snip) > snippetBytes+len("…") {
			t.Errorf("%d: body snippet of %d bytes: %.40q", tt.code, len(snip), snip)
		}
		if tt.code == 429 && ne.Details["retry_after"] != "7" {
			t.Errorf("429: retry_after %v", ne.Details["retry_after"])
		}
		if !strings.Contains(ne.Message, fmt.Sprint(tt.code)) {
			t.Errorf("%d: message %q", tt.code, ne.Message)
		}
	}
}

// blockingServer answers nothing until the client gives up; arrived is
// signalled when a request comes in.
func blockingServer(t *testing.T) (srv *httptest.Server, arrived chan struct{}) {
	arrived = make(chan struct{}, 1)
	release := make(chan struct{})
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case arrived <- struct{}{}:
		default:
		}
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(func() { close(release); srv.Close() })
	return srv, arrived
}

func TestHTTPTimeout(t *testing.T) {
	srv, _ := blockingServer(t)
	_, err := runHTTP(t, Options{}, httpNode(map[string]any{"url": srv.URL, "timeout": "50ms"}), &node.Input{})
	ne := nodeError(t, err, CodeHTTPTimeout, true)
	if !strings.Contains(ne.Message, "50ms") {
		t.Errorf("message %q", ne.Message)
	}
	// The Options default applies when the node sets no timeout.
	_, err = runHTTP(t, Options{HTTPTimeout: 30 * 1e6}, httpNode(map[string]any{"url": srv.URL}), &node.Input{})
	nodeError(t, err, CodeHTTPTimeout, true)
}

func TestHTTPCancelled(t *testing.T) {
	srv, arrived := blockingServer(t)
	r := compileNode(t, NewRegistry(Options{}), httpNode(map[string]any{"url": srv.URL}))
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-arrived
		cancel()
	}()
	_, err := r.Run(ctx, &node.Input{Env: map[string]any{}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v (%T), want context.Canceled", err, err)
	}
	var ne *node.Error
	if errors.As(err, &ne) {
		t.Errorf("a cancelled run returned a node error %v", ne)
	}
}

func TestHTTPConnectionRefused(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	_, err = runHTTP(t, Options{}, httpNode(map[string]any{"url": "http://" + addr + "/x?token=s3cret"}), &node.Input{})
	ne := nodeError(t, err, CodeHTTPConnection, true)
	if strings.Contains(ne.Message, "s3cret") {
		t.Errorf("message %q shows the query", ne.Message)
	}
}

func TestHTTPResponseTooLarge(t *testing.T) {
	chunk := strings.Repeat("x", 1000)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/sized" {
			w.Header().Set("Content-Length", "5000")
		}
		for i := 0; i < 5; i++ {
			fmt.Fprint(w, chunk)
			if f, ok := w.(http.Flusher); ok {
				f.Flush() // without a Content-Length: chunked
			}
		}
	}))
	defer srv.Close()
	for _, path := range []string{"/sized", "/chunked"} {
		_, err := runHTTP(t, Options{MaxResponseBytes: 4096}, httpNode(map[string]any{"url": srv.URL + path}), &node.Input{})
		nodeError(t, err, CodeHTTPResponseTooLarge, false)
	}
	res, err := runHTTP(t, Options{MaxResponseBytes: 5000}, httpNode(map[string]any{"url": srv.URL + "/chunked"}), &node.Input{})
	if err != nil || len(res.Output.(map[string]any)["body"].(string)) != 5000 {
		t.Errorf("body at the limit: %v", err)
	}
}

func TestHTTPInvalidParameters(t *testing.T) {
	env := map[string]any{"$trigger": map[string]any{"url": "ftp://x/y", "obj": map[string]any{"a": 1.0}, "n": 3.0}}
	for _, tt := range []struct {
		params map[string]any
		code   string
		text   string
	}{
		{map[string]any{"url": "{{ $trigger.url }}"}, CodeInvalidParameter, "parameters.url: URL \"ftp://x/y\": scheme must be http or https"},
		{map[string]any{"url": "{{ $trigger.n }}"}, CodeInvalidParameter, "parameters.url: must render to a string, not a number"},
		{map[string]any{"url": "http://x/", "query": map[string]any{"q": "{{ $trigger.obj }}"}}, CodeInvalidParameter, "parameters.query.q: must render to a string, number or boolean, not an object"},
		{map[string]any{"url": "http://x/", "headers": map[string]any{"X-A": "a\r\nInjected: 1"}}, CodeInvalidParameter, `parameters.headers["X-A"]: must not contain line breaks`},
		{map[string]any{"url": "http://x/{{ $trigger.missing }}"}, CodeExpression, `parameters.url: $trigger.missing: no such key "missing"`},
		{map[string]any{"url": "http://x/", "body": map[string]any{"a": "{{ $nope }}"}}, CodeExpression, "parameters.body: .a: $nope: not defined"},
	} {
		_, err := runHTTP(t, Options{}, httpNode(tt.params), &node.Input{Env: env})
		ne := nodeError(t, err, tt.code, false)
		if ne.Message != tt.text {
			t.Errorf("message %q, want %q", ne.Message, tt.text)
		}
	}
}

type fakeSecrets map[string]map[string]string

func (f fakeSecrets) Resolve(_ context.Context, ref string) (map[string]string, error) {
	if s, ok := f[ref]; ok {
		return s, nil
	}
	return nil, fmt.Errorf("no credential %q", ref)
}

func TestHTTPCredentials(t *testing.T) {
	const secret = "tok-SECRET-123"
	seen := make(chan http.Header, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Clone()
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/deny" {
			w.WriteHeader(http.StatusUnauthorized)
		}
		fmt.Fprint(w, `{"hello": "world"}`)
	}))
	defer srv.Close()
	secrets := fakeSecrets{
		"bearer": {"token": secret},
		"basic":  {"username": "u", "password": secret},
		"apikey": {"header:X-Api-Key": secret},
	}
	for ref, check := range map[string]func(http.Header) bool{
		"bearer": func(h http.Header) bool { return h.Get("Authorization") == "Bearer "+secret },
		"basic":  func(h http.Header) bool { return strings.HasPrefix(h.Get("Authorization"), "Basic ") },
		"apikey": func(h http.Header) bool { return h.Get("X-Api-Key") == secret },
	} {
		for _, path := range []string{"/ok", "/deny"} {
			n := httpNode(map[string]any{"url": srv.URL + path})
			n.Credentials = &workflow.CredentialRef{Ref: ref}
			res, err := runHTTP(t, Options{}, n, &node.Input{Secrets: secrets})
			if h := <-seen; !check(h) {
				t.Errorf("%s: server saw headers %v", ref, h)
			}
			// Nothing the node returns may carry the secret.
			text := fmt.Sprint(res.Output)
			if err != nil {
				var ne *node.Error
				errors.As(err, &ne)
				d, _ := json.Marshal(ne.Details)
				text += err.Error() + string(d)
			}
			if strings.Contains(text, secret) || strings.Contains(text, "dTp0b2st") {
				t.Errorf("%s %s: secret leaked: %s", ref, path, text)
			}
			if path == "/deny" {
				nodeError(t, err, CodeHTTPStatus, false)
			}
		}
	}

	n := httpNode(map[string]any{"url": srv.URL})
	n.Credentials = &workflow.CredentialRef{Ref: "unknown"}
	_, err := runHTTP(t, Options{}, n, &node.Input{Secrets: secrets})
	nodeError(t, err, CodeCredentials, false)
	_, err = runHTTP(t, Options{}, n, &node.Input{})
	nodeError(t, err, CodeCredentials, false)
}
