package nodes

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/rune-org/rune/expr"
	"github.com/rune-org/rune/node"
	"github.com/rune-org/rune/templates"
	"github.com/rune-org/rune/workflow"
)

// SMS is one text message to send.
type SMS struct {
	To, From, Body string
	// IdempotencyKey is the same for every attempt of the same send; the
	// provider receives it as the Idempotency-Key header.
	IdempotencyKey string
}

// SMSProvider sends text messages. Send returns the provider's message id.
// A failure is a *node.Error whose Retryable says whether trying again may
// help (429 and 5xx: yes; other 4xx: no). Errors never hold the provider's
// credentials.
type SMSProvider interface {
	Name() string
	Send(ctx context.Context, m SMS) (messageID string, err error)
}

// smsProvider builds the provider an SMS credential describes
// (dsl.md "Credentials": type twilio or webhook).
func smsProvider(ref string, f map[string]string, client *http.Client, bodies *bodyCache) (SMSProvider, error) {
	bad := func(format string, args ...any) error {
		return &node.Error{Code: CodeCredentials, Message: fmt.Sprintf("credential %q: ", ref) + fmt.Sprintf(format, args...)}
	}
	httpURL := func(field string) (string, error) {
		u, err := url.Parse(f[field])
		if f[field] == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return "", bad("field %q must be an http(s) URL", field)
		}
		return strings.TrimRight(f[field], "/"), nil
	}
	switch f["type"] {
	case "twilio":
		base, err := httpURL("base_url")
		if err != nil {
			return nil, err
		}
		if f["account_sid"] == "" || f["auth_token"] == "" {
			return nil, bad("fields \"account_sid\" and \"auth_token\" are required")
		}
		// status_callback: where the provider posts delivery statuses
		// (rune server's POST /v1/providers/{credential}/status).
		return &twilioProvider{client: client, base: base, sid: f["account_sid"], token: f["auth_token"], from: f["from"], callback: f["status_callback"]}, nil
	default: // "webhook": credentialFields checked the type
		u, err := httpURL("url")
		if err != nil {
			return nil, err
		}
		w := &webhookProvider{client: client, url: u, from: f["from"], headers: http.Header{}}
		if src := f["body"]; src != "" {
			if w.body, err = bodies.get(src); err != nil {
				return nil, bad("field \"body\": %v", err)
			}
		}
		if h := f["headers"]; h != "" {
			var m map[string]string
			if err := json.Unmarshal([]byte(h), &m); err != nil {
				return nil, bad("field \"headers\" must be a JSON object of header name to value")
			}
			for k, v := range m {
				if !validHeaderName(k) || strings.ContainsAny(v, "\r\n") {
					return nil, bad("field \"headers\": %q is not a valid header", k)
				}
				w.headers.Set(k, v)
			}
		}
		return w, nil
	}
}

// twilioProvider posts the Twilio Messages form: any compatible service, or
// a local test server, at base_url.
type twilioProvider struct {
	client                 *http.Client
	base, sid, token, from string
	callback               string
}

func (*twilioProvider) Name() string { return "twilio" }

func (p *twilioProvider) Send(ctx context.Context, m SMS) (string, error) {
	if m.From == "" {
		m.From = p.from
	}
	form := url.Values{"To": {m.To}, "Body": {m.Body}}
	if m.From != "" {
		form.Set("From", m.From)
	}
	if p.callback != "" {
		form.Set("StatusCallback", p.callback)
	}
	endpoint := p.base + "/2010-04-01/Accounts/" + url.PathEscape(p.sid) + "/Messages.json"
	body, err := postSMS(ctx, p.client, endpoint, "application/x-www-form-urlencoded", []byte(form.Encode()), m.IdempotencyKey, func(r *http.Request) {
		r.SetBasicAuth(p.sid, p.token)
	})
	if err != nil {
		return "", err
	}
	var reply struct {
		SID string `json:"sid"`
	}
	if json.Unmarshal(body, &reply) != nil || reply.SID == "" {
		return "", &node.Error{Code: CodeSMS, Message: "twilio: the reply holds no \"sid\""}
	}
	return reply.SID, nil
}

// webhookProvider posts {"to", "from", "body", "idempotency_key"} as JSON to
// a URL, or the credential's body template rendered with $to, $from, $body
// and $idempotency_key, and reads the message id from "message_id", "id" or
// "sid".
type webhookProvider struct {
	client    *http.Client
	url, from string
	headers   http.Header
	body      expr.Value // nil: the default body
}

// bodyCache holds compiled webhook body templates, one per sms node type:
// a credential is resolved for every send, its template compiled once.
type bodyCache struct {
	c *expr.Compiler
	m sync.Map // template → expr.Value
}

func (b *bodyCache) get(src string) (expr.Value, error) {
	if v, ok := b.m.Load(src); ok {
		return v.(expr.Value), nil
	}
	v, err := b.c.Liquid(src)
	if err != nil {
		return nil, err
	}
	b.m.Store(src, v)
	return v, nil
}

func (*webhookProvider) Name() string { return "webhook" }

func (p *webhookProvider) Send(ctx context.Context, m SMS) (string, error) {
	if m.From == "" {
		m.From = p.from
	}
	payload, _ := json.Marshal(map[string]string{"to": m.To, "from": m.From, "body": m.Body, "idempotency_key": m.IdempotencyKey})
	if p.body != nil {
		out, err := p.body.Eval(map[string]any{"$to": m.To, "$from": m.From, "$body": m.Body, "$idempotency_key": m.IdempotencyKey})
		if err != nil {
			return "", &node.Error{Code: CodeCredentials, Message: "webhook body template: " + err.Error()}
		}
		s, _ := out.(string)
		if !json.Valid([]byte(s)) {
			return "", &node.Error{Code: CodeCredentials, Message: "webhook body template: the result is not JSON (use | json for strings)"}
		}
		payload = []byte(s)
	}
	body, err := postSMS(ctx, p.client, p.url, "application/json", payload, m.IdempotencyKey, func(r *http.Request) {
		for k, v := range p.headers {
			r.Header[k] = v
		}
	})
	if err != nil {
		return "", err
	}
	var reply map[string]any
	_ = json.Unmarshal(body, &reply)
	for _, k := range []string{"message_id", "id", "sid"} {
		switch v := reply[k].(type) {
		case string:
			if v != "" {
				return v, nil
			}
		case float64:
			return strconv.FormatFloat(v, 'f', -1, 64), nil
		}
	}
	return "", nil // a webhook need not name the message
}

// maxRetryAfterWait is the longest Retry-After an sms node waits out itself
// (twice at most) before leaving the retry to the node's retry policy.
const maxRetryAfterWait = 5 * time.Second

// postSMS posts body and returns the 2xx reply's body. A 429 whose
// Retry-After is short is waited out and tried again here, since the
// engine's retry policy cannot honour the provider's hint.
func postSMS(ctx context.Context, client *http.Client, endpoint, ctype string, body []byte, key string, auth func(*http.Request)) ([]byte, error) {
	// Messages name the endpoint without user info or query: a webhook URL
	// may carry a token there.
	shown := endpoint
	if u, err := url.Parse(endpoint); err == nil {
		shown = redacted(u)
	}
	for try := 0; ; try++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
		if err != nil {
			return nil, &node.Error{Code: CodeSMS, Message: "POST " + shown + ": invalid request"}
		}
		req.Header.Set("Content-Type", ctype)
		req.Header.Set("Accept", "application/json")
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		auth(req)
		resp, err := client.Do(req)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if ne, ok := egressError("POST "+shown, err); ok {
				return nil, ne
			}
			// url.Error names the URL, which holds no secret (basic auth
			// travels in a header).
			return nil, &node.Error{Code: CodeSMSConnection, Message: "POST " + shown + ": " + cause(err), Retryable: true}
		}
		reply, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		if resp.StatusCode >= 200 && resp.StatusCode < 300 {
			return reply, nil
		}
		wait, hasWait := retryAfter(resp.Header.Get("Retry-After"))
		if resp.StatusCode == http.StatusTooManyRequests && hasWait && wait <= maxRetryAfterWait && try < 2 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, ctx.Err()
			case <-t.C:
			}
			continue
		}
		details := map[string]any{"status": resp.StatusCode}
		if hasWait {
			details["retry_after_s"] = wait.Seconds()
		}
		return nil, &node.Error{
			Code:      CodeSMS,
			Message:   fmt.Sprintf("POST %s: %s: %s", shown, resp.Status, providerMessage(reply)),
			Details:   details,
			Retryable: resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500,
		}
	}
}

// cause is err without the url.Error's "Post URL:" prefix (which would show
// the URL's query).
func cause(err error) string {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err.Error()
	}
	return err.Error()
}

// retryAfter parses a Retry-After header in seconds or as an HTTP date.
func retryAfter(h string) (time.Duration, bool) {
	if h == "" {
		return 0, false
	}
	if n, err := strconv.Atoi(strings.TrimSpace(h)); err == nil && n >= 0 {
		return time.Duration(n) * time.Second, true
	}
	if t, err := http.ParseTime(h); err == nil {
		return max(time.Until(t), 0), true
	}
	return 0, false
}

// providerMessage is the provider's own explanation, when its reply has one.
func providerMessage(body []byte) string {
	var r struct {
		Message string `json:"message"`
		Error   string `json:"error"`
	}
	_ = json.Unmarshal(body, &r)
	msg := r.Message
	if msg == "" {
		msg = r.Error
	}
	if len(msg) > 200 {
		msg = msg[:200]
	}
	return msg
}

var e164 = regexp.MustCompile(`^\+[1-9][0-9]{1,14}$`)

// smsSegments is how many parts a carrier splits body into: 160 GSM-7
// characters in one part, 153 per part beyond; 70 and 67 for UCS-2.
func smsSegments(body string) int {
	n, gsm := 0, true
	for _, r := range body {
		if !strings.ContainsRune(gsm7, r) {
			if strings.ContainsRune(gsm7ext, r) {
				n++ // an escape plus the character
			} else {
				gsm = false
			}
		}
		n++
	}
	if !gsm {
		n = utf8.RuneCountInString(body)
		for _, r := range body {
			if r > 0xFFFF {
				n++ // a surrogate pair
			}
		}
		if n <= 70 {
			return 1
		}
		return (n + 66) / 67
	}
	if n <= 160 {
		return 1
	}
	return (n + 152) / 153
}

const (
	gsm7    = "@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ !\"#¤%&'()*+,-./0123456789:;<=>?¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà"
	gsm7ext = "^{}\\[~]|€\f"
)

// smsType sends a text message through a provider (dsl.md "sms").
type smsType struct {
	opts   *Options
	bodies *bodyCache
}

func (*smsType) Check(c *workflow.NodeCheck) {
	p := node.CheckParams(c, "from", "to", "body", "subscriber", "category", "critical", "template")
	checkAudience(p)
	hasTemplate := checkTemplate(c)
	// With a subscriber, "to" defaults to the subscriber's phone.
	_, hasSubscriber := c.Node.Parameters["subscriber"]
	for _, name := range []string{"from", "to", "body"} {
		if s, ok := p.String(name, (name == "body" && !hasTemplate) || (name == "to" && !hasSubscriber)); ok {
			checkLiquid(p, "parameters."+name, s)
		}
	}
	if credRef(c.Node) == "" {
		c.Report("credentials.ref", "required: the SMS provider's credential")
	}
}

func (t *smsType) Compile(n *workflow.Node, c *expr.Compiler) (node.Runner, error) {
	r := &smsRunner{opts: t.opts, bodies: t.bodies, refs: credRefs(n), varsRunner: varsRunner{name: "sms_" + n.ID}, template: templateName(n)}
	var err error
	if r.aud, err = compileAudience(n, c); err != nil {
		return nil, err
	}
	for name, dst := range map[string]**liquidField{"from": &r.from, "to": &r.to, "body": &r.body} {
		if *dst, err = liquidParam(n, c, name); err != nil {
			return nil, err
		}
	}
	return r, nil
}

type smsRunner struct {
	varsRunner
	opts           *Options
	bodies         *bodyCache
	refs           []string // the credential, then its failover ones
	from, to, body *liquidField
	aud            audience
	template       string // a template's name (issue 36), "" for none
}

func (r *smsRunner) Run(ctx context.Context, in *node.Input) (node.Result, error) {
	rc, err := r.aud.resolve(ctx, r.opts, in, "sms")
	if err != nil {
		return node.Result{}, err
	}
	if rc.optedOut {
		// Through the send's record: a redelivery of a run that did send
		// reports that send, not a later opt-out.
		out, err := sendOnce(ctx, r.opts, in, func(*sendRecord) (map[string]any, error) { return optedOutOutput(), nil })
		if err != nil {
			return node.Result{}, err
		}
		return node.Result{Output: out}, nil
	}
	var m SMS
	for _, f := range []struct {
		dst *string
		src *liquidField
	}{{&m.To, r.to}, {&m.From, r.from}, {&m.Body, r.body}} {
		if *f.dst, err = f.src.render(rc.env); err != nil {
			return node.Result{}, err
		}
	}
	if r.to == nil && rc.sub != nil {
		if rc.sub.Phone == "" {
			return node.Result{}, &node.Error{Code: CodeInvalidAddress, Message: fmt.Sprintf("parameters.to: subscriber %q has no phone, and the node sets no to", rc.sub.ID),
				Details: map[string]any{"parameter": "parameters.to", "subscriber": rc.sub.ID}}
		}
		m.To = strings.NewReplacer(" ", "", "(", "", ")", "", "-", "", ".", "").Replace(rc.sub.Phone)
	}
	var tpl *templates.Rendered
	if r.template != "" {
		if tpl, err = r.fromTemplate(ctx, in, rc.env, &m); err != nil {
			return node.Result{}, err
		}
	}
	m.To = strings.TrimSpace(m.To)
	if !e164.MatchString(m.To) {
		return node.Result{}, &node.Error{
			Code:    CodeInvalidAddress,
			Message: fmt.Sprintf("parameters.to: %q is not an E.164 phone number (+ then up to 15 digits, e.g. +14155550100)", m.To),
			Details: map[string]any{"parameter": "parameters.to", "address": m.To},
		}
	}
	if m.Body == "" {
		return node.Result{}, node.InvalidParam("body", "rendered to an empty message")
	}
	if len(r.refs) == 0 {
		return node.Result{}, &node.Error{Code: CodeCredentials, Message: "credentials.ref: required"}
	}
	m.IdempotencyKey = in.IdempotencyKey
	out, err := sendOnceGated(ctx, r.opts, in, func() error { return r.aud.quietGate(rc, in) }, func(*sendRecord) (map[string]any, error) {
		// Each provider gets the same key: one that honours it keeps one
		// message however many tries reach it.
		return failover(ctx, r.opts.ProviderTimeout, r.refs, nil, func(ctx context.Context, ref string, _ []any) (map[string]any, error) {
			fields, err := credentialFields(ctx, in, ref, "twilio", "webhook")
			if err != nil {
				return nil, err
			}
			prov, err := smsProvider(ref, fields, r.opts.HTTPClient, r.bodies)
			if err != nil {
				return nil, err
			}
			id, err := prov.Send(ctx, m)
			if err != nil {
				return nil, err
			}
			return rc.marked(map[string]any{"message_id": id, "provider": prov.Name(), "segments": smsSegments(m.Body), "attempts": in.Attempt}), nil
		})
	})
	if err != nil {
		return node.Result{}, err
	}
	templateOutput(out, tpl)
	return node.Result{Output: out}, nil
}
