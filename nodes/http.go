package nodes

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/rune-org/rune/expr"
	"github.com/rune-org/rune/node"
	"github.com/rune-org/rune/tracing"
	"github.com/rune-org/rune/workflow"
)

// Error codes of http nodes.
const (
	CodeHTTPStatus           = "HTTP_STATUS"
	CodeHTTPTimeout          = "HTTP_TIMEOUT"
	CodeHTTPConnection       = "HTTP_CONNECTION"
	CodeHTTPResponseTooLarge = "HTTP_RESPONSE_TOO_LARGE"
	CodeCredentials          = "CREDENTIALS"
)

// snippetBytes is how much of an error response's body goes into Details.
const snippetBytes = 512

var httpMethods = []string{
	http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
	http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace,
}

// httpType sends one HTTP request.
type httpType struct {
	opts Options
}

func (*httpType) Check(c *workflow.NodeCheck) {
	p := node.CheckParams(c, "method", "url", "headers", "query", "body", "timeout", "idempotency_key")
	checkIdempotencyKey(c)
	checkSingleCredential(c) // failover lists are for email and sms
	if m, ok := p.String("method", false); ok && !slices.Contains(httpMethods, strings.ToUpper(m)) {
		c.Report("parameters.method", "unknown method %q (known: %s)", m, strings.Join(httpMethods, ", "))
	}
	if u, ok := p.String("url", true); ok {
		if strings.Contains(u, "{{") {
			p.Template("parameters.url", u)
		} else if _, err := parseURL(u); err != nil {
			c.Report("parameters.url", "%v", err)
		}
	}
	for _, name := range []string{"headers", "query"} {
		raw, present := p.Values[name]
		if !present || raw == nil {
			continue
		}
		obj, ok := raw.(map[string]any)
		if !ok {
			c.Report("parameters."+name, "must be an object of name → value, not %s", expr.TypeName(raw))
			continue
		}
		for _, k := range slices.Sorted(maps.Keys(obj)) {
			field := "parameters." + name + fieldPath(k)
			if name == "headers" && !validHeaderName(k) {
				c.Report(field, "invalid header name %q", k)
			}
			switch v := obj[k].(type) {
			case map[string]any:
				c.Report(field, "must be a string, number or boolean, not an object")
			case []any:
				if name == "headers" {
					c.Report(field, "must be a string, number or boolean, not an array")
				} else {
					p.Template(field, v)
				}
			default:
				p.Template(field, v)
			}
		}
	}
	if body, present := p.Values["body"]; present {
		p.Template("parameters.body", body)
	}
	if t, ok := p.String("timeout", false); ok {
		if d, err := workflow.ParseDuration(t); err != nil {
			c.Report("parameters.timeout", "%v", err)
		} else if d <= 0 {
			c.Report("parameters.timeout", "must be more than zero")
		}
	}
}

func validHeaderName(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		ch := k[i]
		if ch <= ' ' || ch >= 0x7f || strings.IndexByte(`()<>@,;:\"/[]?={}`, ch) >= 0 {
			return false
		}
	}
	return true
}

type namedValue struct {
	name string
	v    expr.Value
}

func (t *httpType) Compile(n *workflow.Node, c *expr.Compiler) (node.Runner, error) {
	r := &httpRunner{opts: t.opts, nodeID: n.ID, method: http.MethodGet, timeout: t.opts.HTTPTimeout}
	r.once, _ = n.Parameters["idempotency_key"].(bool)
	if m, ok := n.Parameters["method"].(string); ok && m != "" {
		r.method = strings.ToUpper(m)
	}
	var err error
	u, _ := n.Parameters["url"].(string)
	if r.url, err = c.Value(u); err != nil {
		return nil, node.CompileError(n, "url", err)
	}
	compileObject := func(name string) ([]namedValue, error) {
		obj, _ := n.Parameters[name].(map[string]any)
		var out []namedValue
		for _, k := range slices.Sorted(maps.Keys(obj)) {
			v, err := c.Value(obj[k])
			if err != nil {
				return nil, node.CompileError(n, name+fieldPath(k), err)
			}
			out = append(out, namedValue{name: k, v: v})
		}
		return out, nil
	}
	if r.headers, err = compileObject("headers"); err != nil {
		return nil, err
	}
	if r.query, err = compileObject("query"); err != nil {
		return nil, err
	}
	if body, ok := n.Parameters["body"]; ok && body != nil {
		if r.body, err = c.Value(body); err != nil {
			return nil, node.CompileError(n, "body", err)
		}
	}
	if ts, ok := n.Parameters["timeout"].(string); ok && ts != "" {
		d, err := workflow.ParseDuration(ts)
		if err != nil || d <= 0 {
			return nil, node.CompileError(n, "timeout", fmt.Errorf("invalid timeout %q", ts))
		}
		r.timeout = d
	}
	if n.Credentials != nil {
		r.credRef = n.Credentials.Ref
	}
	return r, nil
}

type httpRunner struct {
	opts    Options
	nodeID  string
	method  string
	url     expr.Value
	headers []namedValue
	query   []namedValue
	body    expr.Value // nil: no body
	timeout time.Duration
	credRef string
	once    bool // idempotency_key: true (http_once.go)
}

func (r *httpRunner) call(ctx context.Context, in *node.Input) (node.Result, error) {
	req, credHeaders, err := r.request(ctx, in)
	if err != nil {
		return node.Result{}, err
	}
	rctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	req = req.WithContext(rctx)
	target := redacted(req.URL)

	client := r.opts.HTTPClient
	if r.credRef != "" {
		client = credentialClient(client, append(credHeaders, alwaysCredential...))
	}
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return node.Result{}, r.transportError(ctx, target, err)
	}
	defer resp.Body.Close()
	body, err := r.readBody(resp)
	if err != nil {
		var ne *node.Error
		if errors.As(err, &ne) {
			return node.Result{}, ne
		}
		return node.Result{}, r.transportError(ctx, target, err)
	}
	elapsed := time.Since(start)

	if resp.StatusCode >= 400 {
		retryable := resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500
		details := map[string]any{"status": resp.StatusCode, "body": snippet(body)}
		if ra := resp.Header.Get("Retry-After"); ra != "" {
			details["retry_after"] = ra
		}
		return node.Result{}, &node.Error{
			Code:      CodeHTTPStatus,
			Message:   fmt.Sprintf("%s %s: %s", r.method, target, resp.Status),
			Details:   details,
			Retryable: retryable,
		}
	}

	headers := make(map[string]any, len(resp.Header))
	for k, vs := range resp.Header {
		if len(vs) > 0 {
			headers[strings.ToLower(k)] = vs[0]
		}
	}
	return node.Result{Output: map[string]any{
		"status":      resp.StatusCode,
		"headers":     headers,
		"body":        decodeBody(resp.Header.Get("Content-Type"), body),
		"duration_ms": elapsed.Milliseconds(),
	}}, nil
}

// request renders the parameters into a request, and names the headers
// that carry its credentials. Its errors are node errors.
func (r *httpRunner) request(ctx context.Context, in *node.Input) (_ *http.Request, credHeaders []string, err error) {
	rawURL, err := r.url.Eval(in.Env)
	if err != nil {
		return nil, nil, node.ExprError("url", err)
	}
	us, ok := rawURL.(string)
	if !ok {
		return nil, nil, node.InvalidParam("url", "must render to a string, not %s", expr.TypeName(rawURL))
	}
	u, err := parseURL(us)
	if err != nil {
		return nil, nil, node.InvalidParam("url", "%v", err)
	}
	if len(r.query) > 0 {
		q := u.Query()
		for _, nv := range r.query {
			v, err := nv.v.Eval(in.Env)
			if err != nil {
				return nil, nil, node.ExprError("query"+fieldPath(nv.name), err)
			}
			vals, err := queryValues(v)
			if err != nil {
				return nil, nil, node.InvalidParam("query"+fieldPath(nv.name), "%v", err)
			}
			for _, s := range vals {
				q.Add(nv.name, s)
			}
		}
		u.RawQuery = q.Encode()
	}

	var body io.Reader
	contentType := ""
	if r.body != nil {
		v, err := r.body.Eval(in.Env)
		if err != nil {
			return nil, nil, node.ExprError("body", err)
		}
		switch v := v.(type) {
		case nil:
		case string:
			body, contentType = strings.NewReader(v), "text/plain; charset=utf-8"
		default:
			b, err := json.Marshal(v)
			if err != nil {
				return nil, nil, node.InvalidParam("body", "cannot encode as JSON: %v", err)
			}
			body, contentType = bytes.NewReader(b), "application/json"
		}
	}
	req, err := http.NewRequestWithContext(ctx, r.method, u.String(), body)
	if err != nil {
		return nil, nil, node.InvalidParam("url", "%v", err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for _, nv := range r.headers {
		v, err := nv.v.Eval(in.Env)
		if err != nil {
			return nil, nil, node.ExprError("headers"+fieldPath(nv.name), err)
		}
		s, err := scalarText(v)
		if err != nil {
			return nil, nil, node.InvalidParam("headers"+fieldPath(nv.name), "%v", err)
		}
		if strings.ContainsAny(s, "\r\n") {
			return nil, nil, node.InvalidParam("headers"+fieldPath(nv.name), "must not contain line breaks")
		}
		req.Header.Set(nv.name, s)
	}
	if in.IdempotencyKey != "" && req.Header.Get("Idempotency-Key") == "" {
		req.Header.Set("Idempotency-Key", in.IdempotencyKey)
	}
	tracing.InjectHTTP(ctx, req.Header)
	if r.credRef != "" {
		if credHeaders, err = r.authorize(ctx, in, req); err != nil {
			return nil, nil, err
		}
	}
	return req, credHeaders, nil
}

// authorize adds the node's credentials to req. Secret values go into
// request headers only, which are never echoed in outputs or errors.
func (r *httpRunner) authorize(ctx context.Context, in *node.Input, req *http.Request) (headers []string, err error) {
	if in.Secrets == nil {
		// Sending the request without the credentials it names would fail
		// in a less obvious way, or worse, succeed anonymously.
		return nil, &node.Error{Code: CodeCredentials, Message: fmt.Sprintf("credential %q: no secret store is configured", r.credRef)}
	}
	fields, err := in.Secrets.Resolve(ctx, r.credRef)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		// Secret stores name the reference in their errors already.
		return nil, &node.Error{Code: CodeCredentials, Message: err.Error()}
	}
	if err := allowedHost(r.credRef, fields[AllowedHostsField], req.URL); err != nil {
		return nil, err
	}
	if tok := fields["token"]; tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if user, pass := fields["username"], fields["password"]; user != "" || pass != "" {
		req.SetBasicAuth(user, pass)
	}
	for k, v := range fields {
		if name, ok := strings.CutPrefix(k, "header:"); ok {
			if !validHeaderName(name) || strings.ContainsAny(v, "\r\n") {
				return nil, &node.Error{Code: CodeCredentials, Message: fmt.Sprintf("credential %q: field %q is not a valid header", r.credRef, k)}
			}
			req.Header.Set(name, v)
			headers = append(headers, name)
		}
	}
	return headers, nil
}

func (r *httpRunner) readBody(resp *http.Response) ([]byte, error) {
	max := r.opts.MaxResponseBytes
	tooLarge := func() error {
		return &node.Error{
			Code:    CodeHTTPResponseTooLarge,
			Message: fmt.Sprintf("%s %s: response body over the limit of %d bytes", r.method, redacted(resp.Request.URL), max),
			Details: map[string]any{"status": resp.StatusCode, "limit": max},
		}
	}
	if resp.ContentLength > max {
		return nil, tooLarge()
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(body)) > max {
		return nil, tooLarge()
	}
	return body, nil
}

// transportError classifies a failed exchange. ctx is the caller's context:
// when it is done the engine is shutting down or gave up, which is not a
// failure of the node, so its error is returned as it is.
func (r *httpRunner) transportError(ctx context.Context, target string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if ne, ok := egressError(r.method+" "+target, err); ok {
		return ne
	}
	var netErr interface{ Timeout() bool }
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &netErr) && netErr.Timeout()) {
		return &node.Error{
			Code:      CodeHTTPTimeout,
			Message:   fmt.Sprintf("%s %s: no complete response within %s", r.method, target, r.timeout),
			Details:   map[string]any{"timeout_ms": r.timeout.Milliseconds()},
			Retryable: true,
		}
	}
	// A certificate that does not verify will not verify on the next try.
	var certErr *tls.CertificateVerificationError
	var unknownAuth x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	retryable := !(errors.As(err, &certErr) || errors.As(err, &unknownAuth) || errors.As(err, &hostErr))
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // its text repeats the URL, possibly with its query
	}
	return &node.Error{
		Code:      CodeHTTPConnection,
		Message:   fmt.Sprintf("%s %s: %v", r.method, target, err),
		Retryable: retryable,
	}
}

// parseURL accepts absolute http and https URLs.
func parseURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("invalid URL %q: %v", truncate(s, 200), errors.Unwrap(err))
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("URL %q: scheme must be http or https", truncate(s, 200))
	}
	if u.Host == "" {
		return nil, fmt.Errorf("URL %q has no host", truncate(s, 200))
	}
	return u, nil
}

// redacted is u for messages: without user info or query, either of which
// may carry tokens.
func redacted(u *url.URL) string {
	c := *u
	c.User = nil
	c.RawQuery = ""
	c.ForceQuery = false
	c.Fragment = ""
	return c.String()
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// queryValues turns a rendered query parameter into its values: arrays give
// one value per element, null none.
func queryValues(v any) ([]string, error) {
	if arr, ok := v.([]any); ok {
		out := make([]string, 0, len(arr))
		for _, e := range arr {
			s, err := scalarText(e)
			if err != nil {
				return nil, err
			}
			out = append(out, s)
		}
		return out, nil
	}
	if v == nil {
		return nil, nil
	}
	s, err := scalarText(v)
	if err != nil {
		return nil, err
	}
	return []string{s}, nil
}

func scalarText(v any) (string, error) {
	switch v := v.(type) {
	case string:
		return v, nil
	case bool:
		return strconv.FormatBool(v), nil
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64), nil
	case int:
		return strconv.Itoa(v), nil
	case int64:
		return strconv.FormatInt(v, 10), nil
	case nil:
		return "", nil
	}
	return "", fmt.Errorf("must render to a string, number or boolean, not %s", expr.TypeName(v))
}

// decodeBody returns a JSON response's value, any other as a string.
func decodeBody(contentType string, body []byte) any {
	mt, _, _ := mime.ParseMediaType(contentType)
	if mt == "application/json" || strings.HasSuffix(mt, "+json") {
		if len(bytes.TrimSpace(body)) == 0 {
			return nil
		}
		var v any
		if json.Unmarshal(body, &v) == nil {
			return v
		}
	}
	return string(body)
}

// snippet is the start of an error response's body, for Details.
func snippet(body []byte) string {
	s := string(body)
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	return truncate(s, snippetBytes)
}
