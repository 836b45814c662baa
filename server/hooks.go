package server

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rune-org/rune/engine"
	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/store"
)

// Defaults of a hook's settings.
const (
	HookSecretPrefix         = "rh_"
	DeliveryHeaderDefault    = "X-Request-Id"
	SignatureHeaderDefault   = "X-Rune-Signature"
	TimestampHeaderDefault   = "X-Rune-Timestamp"
	SignatureToleranceDefult = 5 * time.Minute
	// SignatureToleranceMax bounds a hook's tolerance: a signed delivery is
	// replayable (as a duplicate) for that long, and its signature is kept
	// as long to tell.
	SignatureToleranceMax = time.Hour
	// SignatureMemory is how long a signature without a timestamp (GitHub's
	// mode) is remembered: a replay within it is a duplicate.
	SignatureMemory     = 24 * time.Hour
	ReplyTimeoutDefault = 10 * time.Second
	ReplyTimeoutMax     = 30 * time.Second
	// replyPoll is how often a waiting hook request reads its execution.
	replyPoll = 25 * time.Millisecond
)

// hookSettings is a hook's configuration, as the API takes it and as
// store.Hook.Settings keeps it.
type hookSettings struct {
	// Signature, when set, verifies every request: an HMAC-SHA256 with the
	// hook's signing secret. Default: not verified (the URL is the secret).
	Signature *signatureSettings `json:"signature,omitempty"`
	// Headers lists the request headers copied into the payload
	// (case-insensitive). Default: none.
	Headers []string `json:"headers,omitempty"`
	// DeliveryHeader names the header whose value is the delivery id: a
	// repeated id starts no second execution. Default DeliveryHeaderDefault.
	DeliveryHeader string `json:"delivery_header,omitempty"`
	// MaxBody bounds the body in bytes (413 above). Default and maximum:
	// the server's trigger limit.
	MaxBody int64 `json:"max_body,omitempty"`
	// RateLimit bounds requests per server replica (429 above). Default: none.
	RateLimit *rateSettings `json:"rate_limit,omitempty"`
	// Reply, when set, makes a request wait for its execution's end.
	Reply *replySettings `json:"reply,omitempty"`
	// Event, when set, turns each delivery into an event for waiting
	// wait_for_event nodes instead of an execution (issue 34,
	// hooks_event.go).
	Event *hookEventSettings `json:"event,omitempty"`
	// Priority of its executions, 1…10 (flow.go). Default: the
	// workflow's settings.priority, else 5.
	Priority int `json:"priority,omitempty"`
}

type signatureSettings struct {
	// Header carries "sha256=<hex>" (or the bare hex). Default SignatureHeaderDefault.
	Header string `json:"header,omitempty"`
	// TimestampHeader carries the Unix time of signing; the signature is
	// then over "<timestamp>.<body>" and an older or newer timestamp than
	// Tolerance is refused. "-": no timestamp, the signature is over the
	// body alone (GitHub's X-Hub-Signature-256). Default TimestampHeaderDefault.
	TimestampHeader string `json:"timestamp_header,omitempty"`
	// Tolerance is a duration such as "5m", at most SignatureToleranceMax.
	// Default 5m.
	Tolerance string `json:"tolerance,omitempty"`
}

type rateSettings struct {
	// PerSecond is the sustained rate; Burst the requests allowed at once
	// (default: PerSecond rounded up, at least 1).
	PerSecond float64 `json:"per_second"`
	Burst     int     `json:"burst,omitempty"`
}

type replySettings struct {
	// Timeout bounds the wait (default 10s, at most 30s); after it the
	// answer is 202 with the execution id.
	Timeout string `json:"timeout,omitempty"`
	// Select is a dotted path into the final context ("respond.body");
	// default the whole final context.
	Select string `json:"select,omitempty"`
}

// hookInput is the body of a hook's create or update.
type hookInput struct {
	Name string `json:"name"`
	hookSettings
	Disabled bool `json:"disabled,omitempty"`
	// SigningSecret sets the signing secret (create, or update with
	// signature); default: one is generated and shown once.
	SigningSecret string `json:"signing_secret,omitempty"`
}

// hookView is a hook as the API shows it. URL, Secret and SigningSecret
// are shown once: when created or rotated.
type hookView struct {
	ID         string `json:"id"`
	WorkflowID string `json:"workflow_id"`
	Name       string `json:"name"`
	hookSettings
	Disabled      bool      `json:"disabled"`
	Signed        bool      `json:"signed"`
	CreatedAt     time.Time `json:"created_at"`
	UpdatedAt     time.Time `json:"updated_at"`
	URL           string    `json:"url,omitempty"`
	Secret        string    `json:"secret,omitempty"`
	SigningSecret string    `json:"signing_secret,omitempty"`
}

func viewHook(h *store.Hook) hookView {
	v := hookView{ID: h.ID, WorkflowID: h.WorkflowID, Name: h.Name, Disabled: h.Disabled, Signed: len(h.SigningSecret) > 0,
		CreatedAt: h.CreatedAt, UpdatedAt: h.UpdatedAt}
	_ = json.Unmarshal(h.Settings, &v.hookSettings)
	return v
}

// unprocessable is a well-formed hook setting the server will not take.
func unprocessable(format string, args ...any) *apiError {
	return errorf(http.StatusUnprocessableEntity, CodeInvalidRequest, format, args...)
}

// credentialHeader reports whether a request header carries credentials
// (the bearer token of an API, a session cookie, an API key): a hook never
// copies one into its payload, where any token holder could read it.
func credentialHeader(name string) bool {
	n := strings.ToLower(name)
	switch n {
	case "authorization", "proxy-authorization", "cookie":
		return true
	case "idempotency-key": // an id, not a secret
		return false
	}
	for _, part := range []string{"token", "secret", "passw", "session", "credential", "auth", "key"} {
		if strings.Contains(n, part) {
			return true
		}
	}
	return false
}

// checkHookSettings validates and defaults cfg; errors name the field. With
// strict (a create or update) the limits added by issue 31 are errors
// (422); a hook stored before them has its tolerance capped and its
// credential headers left out instead, so that it keeps working.
func (s *Server) checkHookSettings(cfg *hookSettings, strict bool) error {
	if err := s.checkHookEvent(cfg); err != nil { // issue 34
		return err
	}
	if err := checkPriority(cfg.Priority); err != nil { // flow control (flow.go)
		return unprocessable("field %v", err)
	}
	if sig := cfg.Signature; sig != nil {
		sig.Header = defaultString(sig.Header, SignatureHeaderDefault)
		sig.TimestampHeader = defaultString(sig.TimestampHeader, TimestampHeaderDefault)
		sig.Tolerance = defaultString(sig.Tolerance, SignatureToleranceDefult.String())
		d, err := time.ParseDuration(sig.Tolerance)
		if err != nil || d <= 0 {
			return badRequest("field signature.tolerance: %q is not a positive duration such as 5m", limitText(sig.Tolerance, 32))
		}
		if d > SignatureToleranceMax {
			if strict {
				return unprocessable("field signature.tolerance: %s is over the maximum of %s (a captured delivery is replayable for that long)", d, SignatureToleranceMax)
			}
			sig.Tolerance = SignatureToleranceMax.String()
		}
		if !validHeaderName(sig.Header) || sig.TimestampHeader != "-" && !validHeaderName(sig.TimestampHeader) {
			return badRequest("field signature.header / signature.timestamp_header: not a header name")
		}
	}
	cfg.DeliveryHeader = defaultString(cfg.DeliveryHeader, DeliveryHeaderDefault)
	if !validHeaderName(cfg.DeliveryHeader) {
		return badRequest("field delivery_header: %q is not a header name", limitText(cfg.DeliveryHeader, 64))
	}
	kept := cfg.Headers[:0:0]
	for i, h := range cfg.Headers {
		if !validHeaderName(h) {
			return badRequest("field headers[%d]: %q is not a header name", i, limitText(h, 64))
		}
		if credentialHeader(h) {
			if strict {
				return unprocessable("field headers[%d]: %s carries credentials and may not be copied into the payload", i, h)
			}
			continue
		}
		kept = append(kept, h)
	}
	if !strict {
		cfg.Headers = kept
	}
	switch {
	case cfg.MaxBody == 0:
		cfg.MaxBody = s.cfg.MaxTrigger
	case cfg.MaxBody < 0 || cfg.MaxBody > s.cfg.MaxTrigger:
		return badRequest("field max_body: want 1 to %d bytes (the server's trigger limit), got %d", s.cfg.MaxTrigger, cfg.MaxBody)
	}
	if rl := cfg.RateLimit; rl != nil {
		if rl.PerSecond <= 0 || rl.PerSecond > 1e6 || rl.Burst < 0 {
			return badRequest("field rate_limit: want per_second > 0 (at most 1e6) and burst ≥ 0")
		}
		if rl.Burst == 0 {
			rl.Burst = max(1, int(math.Ceil(rl.PerSecond)))
		}
	}
	if rp := cfg.Reply; rp != nil {
		rp.Timeout = defaultString(rp.Timeout, ReplyTimeoutDefault.String())
		if d, err := time.ParseDuration(rp.Timeout); err != nil || d <= 0 || d > ReplyTimeoutMax {
			return badRequest("field reply.timeout: want a duration from 1ms to %s, got %q", ReplyTimeoutMax, limitText(rp.Timeout, 32))
		}
	}
	return nil
}

func defaultString(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func validHeaderName(h string) bool {
	if h == "" || len(h) > 128 {
		return false
	}
	for _, c := range h {
		if !(c == '-' || c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}

// newHookSecret returns a URL secret and its hash.
func newHookSecret() (string, []byte) {
	var b [32]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	secret := HookSecretPrefix + base64.RawURLEncoding.EncodeToString(b[:])
	h := sha256.Sum256([]byte(secret))
	return secret, h[:]
}

// sealSigning seals the hook's signing secret (generated when given is "").
func (s *Server) sealSigning(h *store.Hook, given string) (string, error) {
	if err := s.requireKeys(); err != nil {
		return "", err
	}
	secret := given
	if secret == "" {
		var b [32]byte
		_, _ = rand.Read(b[:])
		secret = "whsec_" + base64.RawURLEncoding.EncodeToString(b[:])
	} else if len(secret) < 16 || len(secret) > 256 {
		return "", badRequest("field signing_secret: want 16 to 256 characters")
	}
	keyID, sealed, err := s.cfg.Keys.Seal("hook:"+h.ID, []byte(secret))
	if err != nil {
		return "", err
	}
	h.SigningKeyID, h.SigningSecret = keyID, sealed
	return secret, nil
}

func (s *Server) readHook(r *http.Request) (*hookInput, error) {
	body, err := readBody(r, 64<<10)
	if err != nil {
		return nil, err
	}
	var in hookInput
	if err := decodeJSON(body, &in); err != nil {
		var ae *apiError
		if errors.As(err, &ae) && strings.Contains(string(body), "signing_secret") {
			ae.Message = "malformed hook body (see docs/triggers.md)" // never quote a secret
		}
		return nil, err
	}
	if len(in.Name) > 128 {
		return nil, badRequest("field name: longer than 128 bytes")
	}
	if in.SigningSecret != "" && in.Signature == nil {
		return nil, badRequest("field signing_secret: given without field signature")
	}
	return &in, s.checkHookSettings(&in.hookSettings, true)
}

func (s *Server) createHook(w http.ResponseWriter, r *http.Request) error {
	wfID, err := s.workflowExists(r)
	if err != nil {
		return err
	}
	in, err := s.readHook(r)
	if err != nil {
		return err
	}
	now := s.cfg.Now()
	secret, hash := newHookSecret()
	settings, _ := json.Marshal(in.hookSettings)
	h := &store.Hook{ID: store.NewID("hk_"), WorkflowID: wfID, Name: in.Name, SecretHash: hash, Settings: settings,
		Disabled: in.Disabled, CreatedAt: now, UpdatedAt: now}
	var signing string
	if in.Signature != nil {
		if signing, err = s.sealSigning(h, in.SigningSecret); err != nil {
			return err
		}
	}
	if err := s.store.CreateHook(r.Context(), h); err != nil {
		return err
	}
	v := viewHook(h)
	v.URL, v.Secret, v.SigningSecret = "/v1/hooks/"+secret, secret, signing
	writeCreated(w, "/v1/workflows/"+url.PathEscape(h.WorkflowID)+"/hooks/"+url.PathEscape(h.ID), v)
	return nil
}

// hook returns the path's hook of the path's workflow.
func (s *Server) hook(r *http.Request) (*store.Hook, error) {
	wfID, id := r.PathValue("id"), r.PathValue("hook")
	h, err := s.store.GetHook(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) || err == nil && h.WorkflowID != wfID {
		return nil, notFound("workflow %q has no hook %q", wfID, id)
	}
	return h, err
}

func (s *Server) listHooks(w http.ResponseWriter, r *http.Request) error {
	wfID, err := s.workflowExists(r)
	if err != nil {
		return err
	}
	hs, err := s.store.ListHooks(r.Context(), wfID)
	if err != nil {
		return err
	}
	writeList(w, hs, "", viewHook)
	return nil
}

func (s *Server) getHook(w http.ResponseWriter, r *http.Request) error {
	h, err := s.hook(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewHook(h))
	return nil
}

// updateHook replaces a hook's settings, name and disabled flag; its URL
// stays. A signing secret is kept unless a new one is given; removing the
// signature removes it.
func (s *Server) updateHook(w http.ResponseWriter, r *http.Request) error {
	h, err := s.hook(r)
	if err != nil {
		return err
	}
	in, err := s.readHook(r)
	if err != nil {
		return err
	}
	h.Name, h.Disabled, h.UpdatedAt = in.Name, in.Disabled, s.cfg.Now()
	h.Settings, _ = json.Marshal(in.hookSettings)
	var signing string
	switch {
	case in.Signature == nil:
		h.SigningKeyID, h.SigningSecret = "", nil
	case in.SigningSecret != "" || len(h.SigningSecret) == 0:
		if signing, err = s.sealSigning(h, in.SigningSecret); err != nil {
			return err
		}
	}
	if err := s.store.UpdateHook(r.Context(), h); err != nil {
		return err
	}
	s.hookLimits.forget(h.ID)
	v := viewHook(h)
	v.SigningSecret = signing
	writeJSON(w, http.StatusOK, v)
	return nil
}

func (s *Server) deleteHook(w http.ResponseWriter, r *http.Request) error {
	h, err := s.hook(r)
	if err != nil {
		return err
	}
	if err := s.store.DeleteHook(r.Context(), h.ID); err != nil {
		return err
	}
	s.hookLimits.forget(h.ID)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// rotateHook replaces the hook's URL secret (?signing_secret=true: its
// signing secret too); the old ones stop working at once.
func (s *Server) rotateHook(w http.ResponseWriter, r *http.Request) error {
	h, err := s.hook(r)
	if err != nil {
		return err
	}
	rotateSigning := r.URL.Query().Get("signing_secret") == "true"
	if rotateSigning && len(h.SigningSecret) == 0 {
		return badRequest("query parameter signing_secret: the hook verifies no signature")
	}
	secret, hash := newHookSecret()
	h.SecretHash, h.UpdatedAt = hash, s.cfg.Now()
	var signing string
	if rotateSigning {
		if signing, err = s.sealSigning(h, ""); err != nil {
			return err
		}
	}
	if err := s.store.UpdateHook(r.Context(), h); err != nil {
		return err
	}
	v := viewHook(h)
	v.URL, v.Secret, v.SigningSecret = "/v1/hooks/"+secret, secret, signing
	writeJSON(w, http.StatusOK, v)
	return nil
}

// hookAnswer is what POST /v1/hooks/{secret} answers.
type hookAnswer struct {
	ExecutionID string `json:"execution_id"`
	Status      string `json:"status"`
	// Duplicate is set when the delivery id or the signature was seen: no
	// execution started.
	Duplicate bool `json:"duplicate,omitempty"`
	// Result is the selected part of the final context (reply hooks).
	Result json.RawMessage `json:"result,omitempty"`
	// Debounced: the request collapsed into this enqueued execution
	// (settings.debounce, flow.go).
	Debounced bool `json:"debounced,omitempty"`
}

// hookPayload is the trigger payload of a hook's execution.
type hookPayload struct {
	HookID     string              `json:"hook_id"`
	DeliveryID string              `json:"delivery_id,omitempty"`
	Body       json.RawMessage     `json:"body"`
	Headers    map[string]string   `json:"headers"`
	Query      map[string][]string `json:"query"`
	ReceivedAt time.Time           `json:"received_at"`
}

// loggedPath is r's path for logs: a hook's URL secret is left out.
func loggedPath(r *http.Request) string {
	if strings.HasPrefix(r.URL.Path, "/v1/hooks/") {
		return "/v1/hooks/{secret}"
	}
	return r.URL.Path
}

var errNoHook = notFound("no such hook (or it is disabled)")

// receiveDelivery answers POST /v1/hooks/{secret}: no bearer token; the secret in
// the URL finds the hook. Unknown and disabled hooks are the same 404.
// d (hook_deliveries.go) learns the hook once it is found.
func (s *Server) receiveDelivery(w http.ResponseWriter, r *http.Request, d *store.HookDelivery) error {
	secret := r.PathValue("secret")
	if !strings.HasPrefix(secret, HookSecretPrefix) || len(secret) > 128 {
		return errNoHook
	}
	hash := sha256.Sum256([]byte(secret))
	h, err := s.store.HookBySecret(r.Context(), hash[:])
	if err == nil {
		d.HookID = h.ID // issue 38: a refusal of a known hook is recorded too
	}
	if errors.Is(err, store.ErrNotFound) || err == nil && h.Disabled {
		return errNoHook
	}
	if err != nil {
		return err
	}
	var cfg hookSettings
	if err := json.Unmarshal(h.Settings, &cfg); err != nil {
		return err
	}
	if err := s.checkHookSettings(&cfg, false); err != nil {
		return err
	}
	now := s.cfg.Now()
	if cfg.RateLimit != nil {
		if wait, ok := s.hookLimits.take(h.ID, *cfg.RateLimit, now); !ok {
			w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
			return errorf(http.StatusTooManyRequests, CodeRateLimited, "hook %s: over its rate limit of %g requests per second", h.ID, cfg.RateLimit.PerSecond)
		}
	}
	body, err := readBody(r, cfg.MaxBody)
	if err != nil {
		return err
	}
	xid := engine.NewExecutionID(now)
	var sig []byte // the accepted signature's hash: a replay of it is a duplicate
	if cfg.Signature != nil {
		var until time.Time
		if sig, until, err = s.verifySignature(h, cfg.Signature, r.Header, body, now); err != nil {
			return err
		}
		owner, err := s.store.ClaimSignature(r.Context(), h.ID, sig, xid, until, now)
		if err != nil {
			return err
		}
		if owner != xid {
			return s.duplicateDelivery(w, r, owner)
		}
	}
	delivery := r.Header.Get(cfg.DeliveryHeader)
	if len(delivery) > 200 {
		return badRequest("header %s is %d bytes, over the limit of 200", cfg.DeliveryHeader, len(delivery))
	}
	payload := hookPayload{HookID: h.ID, DeliveryID: delivery, Body: bodyValue(body), Headers: map[string]string{},
		Query: r.URL.Query(), ReceivedAt: now}
	for _, name := range cfg.Headers {
		if v := r.Header.Get(name); v != "" {
			payload.Headers[strings.ToLower(name)] = v
		}
	}
	input, err := json.Marshal(payload)
	if err != nil {
		return err
	}
	if err := checkInput(input); err != nil {
		return err
	}
	if cfg.Event != nil { // issue 34: an event, not an execution
		return s.hookEvent(w, r, h, cfg.Event, input, delivery, xid)
	}
	in := store.ExecutionInput{ID: xid, WorkflowID: h.WorkflowID, Input: input,
		Trigger: "hook:" + h.ID, At: now}
	if delivery != "" {
		in.IdempotencyKey = "hook:" + h.ID + ":" + delivery
	}
	c, err := s.createExecution(r.Context(), in, cfg.Priority) // flow control (flow.go)
	x, created := c.x, c.created
	if sig != nil && (err != nil || x.ID != xid) {
		// No execution of ours: the signature belongs to the one the
		// delivery id found, or to none (the sender may try again).
		to := ""
		if err == nil {
			to = x.ID
		}
		if merr := s.store.MoveSignature(context.WithoutCancel(r.Context()), h.ID, sig, xid, to); merr != nil && err == nil {
			err = merr
		}
	}
	if errors.Is(err, store.ErrNotFound) {
		return errNoHook // its workflow was deleted
	}
	if err != nil {
		return err
	}
	if c.debounced {
		writeJSON(w, http.StatusOK, hookAnswer{ExecutionID: x.ID, Status: x.Status, Debounced: true})
		return nil
	}
	if !created {
		writeJSON(w, http.StatusOK, hookAnswer{ExecutionID: x.ID, Status: x.Status, Duplicate: true})
		return nil
	}
	s.wakeDispatcher()
	if cfg.Reply != nil {
		return s.replyWhenDone(w, r, x, cfg.Reply)
	}
	writeJSON(w, http.StatusAccepted, hookAnswer{ExecutionID: x.ID, Status: x.Status})
	return nil
}

// bodyValue is the body as JSON when it is JSON, else as a JSON string.
func bodyValue(body []byte) json.RawMessage {
	if len(body) == 0 {
		return json.RawMessage("null")
	}
	if json.Valid(body) {
		return body
	}
	b, _ := json.Marshal(string(body))
	return b
}

// verifySignature checks the request's HMAC-SHA256 in constant time and
// returns the signature's hash with how long a replay of it must be told
// apart: until the timestamp leaves the tolerance, or SignatureMemory
// without one. Every failure is the same 401 but for its reason (never a
// secret or the expected signature).
func (s *Server) verifySignature(h *store.Hook, sig *signatureSettings, header http.Header, body []byte, now time.Time) (hash []byte, until time.Time, err error) {
	unauthorized := func(reason string) error {
		return errorf(http.StatusUnauthorized, CodeUnauthorized, "hook signature: %s", reason)
	}
	if err := s.requireKeys(); err != nil {
		return nil, until, err
	}
	key, err := s.cfg.Keys.Open("hook:"+h.ID, h.SigningKeyID, h.SigningSecret)
	if err != nil {
		return nil, until, err
	}
	mac := hmac.New(sha256.New, key)
	until = now.Add(SignatureMemory)
	if sig.TimestampHeader != "-" {
		ts := header.Get(sig.TimestampHeader)
		sec, err := strconv.ParseInt(ts, 10, 64)
		if err != nil {
			return nil, until, unauthorized("header " + sig.TimestampHeader + " is missing or not a Unix time in seconds")
		}
		tolerance, _ := time.ParseDuration(sig.Tolerance)
		signed := time.Unix(sec, 0)
		if d := now.Sub(signed); d > tolerance || d < -tolerance {
			return nil, until, unauthorized("the timestamp is outside the tolerance of " + tolerance.String() + " (a replay, or a clock off)")
		}
		until = signed.Add(tolerance + time.Second) // the timestamp has whole seconds
		mac.Write([]byte(ts + "."))
	}
	mac.Write(body)
	got, err := hex.DecodeString(strings.TrimPrefix(header.Get(sig.Header), "sha256="))
	if err != nil || !hmac.Equal(got, mac.Sum(nil)) {
		return nil, until, unauthorized("header " + sig.Header + " is missing or does not match the body")
	}
	sum := sha256.Sum256(got)
	return sum[:], until, nil
}

// duplicateDelivery answers a replayed signature: 200, duplicate, with the
// execution its first delivery started.
func (s *Server) duplicateDelivery(w http.ResponseWriter, r *http.Request, xid string) error {
	a := hookAnswer{ExecutionID: xid, Duplicate: true}
	x, err := s.store.GetExecution(r.Context(), xid)
	switch {
	case err == nil:
		a.Status = x.Status
	case !errors.Is(err, store.ErrNotFound):
		return err
	}
	writeJSON(w, http.StatusOK, a)
	return nil
}

// replyWhenDone waits (bounded) for x to end and answers its selected
// result; on timeout 202 with the execution id.
func (s *Server) replyWhenDone(w http.ResponseWriter, r *http.Request, x *store.Execution, rp *replySettings) error {
	timeout, _ := time.ParseDuration(rp.Timeout)
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	tick := time.NewTicker(replyPoll)
	defer tick.Stop()
	for !store.Final(x.Status) {
		select {
		case <-ctx.Done():
			writeJSON(w, http.StatusAccepted, hookAnswer{ExecutionID: x.ID, Status: x.Status})
			return nil
		case <-tick.C:
		}
		nx, err := s.store.GetExecution(ctx, x.ID)
		if err != nil && ctx.Err() == nil {
			return err
		}
		if err == nil {
			x = nx
		}
	}
	var c message.Completion
	_ = json.Unmarshal(x.Completion, &c)
	result, _ := json.Marshal(selectPath(c.FinalContext, rp.Select))
	writeJSON(w, http.StatusOK, hookAnswer{ExecutionID: x.ID, Status: x.Status, Result: result})
	return nil
}

// selectPath returns the value at a dotted path of v (nil when absent).
func selectPath(v any, path string) any {
	if path == "" {
		return v
	}
	for _, k := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// rateLimits are the hooks' token buckets on this replica.
type rateLimits struct {
	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	at     time.Time
}

// take takes a token of hook id's bucket at now, or says how long until
// one is there.
func (l *rateLimits) take(id string, rs rateSettings, now time.Time) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.buckets == nil {
		l.buckets = map[string]*bucket{}
	}
	b, ok := l.buckets[id]
	if !ok {
		b = &bucket{tokens: float64(rs.Burst), at: now}
		l.buckets[id] = b
	}
	b.tokens = min(float64(rs.Burst), b.tokens+now.Sub(b.at).Seconds()*rs.PerSecond)
	b.at = now
	if b.tokens >= 1 {
		b.tokens--
		return 0, true
	}
	return time.Duration((1 - b.tokens) / rs.PerSecond * float64(time.Second)), false
}

func (l *rateLimits) forget(id string) {
	l.mu.Lock()
	delete(l.buckets, id)
	l.mu.Unlock()
}
