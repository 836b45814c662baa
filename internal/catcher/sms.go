package catcher

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"
)

// SMS is one text message the SMS server accepted.
type SMS struct {
	Provider       string `json:"provider"` // "twilio" or "webhook"
	ID             string `json:"id"`
	To             string `json:"to"`
	From           string `json:"from"`
	Body           string `json:"body"`
	IdempotencyKey string `json:"idempotency_key"`
	// StatusCallback is the Twilio form's StatusCallback URL, if any.
	StatusCallback string `json:"status_callback,omitempty"`
	// Header holds the request's headers other than Authorization.
	Header http.Header `json:"-"`
}

// SMSConfig configures an SMS server. The zero value accepts everything.
type SMSConfig struct {
	// Addr to listen on. Default "127.0.0.1:0".
	Addr string
	// Accounts, when set, are the Twilio-style account SIDs and their auth
	// tokens (basic auth); other credentials get 401.
	Accounts map[string]string
	// Dedupe makes a request whose Idempotency-Key was seen before return
	// the first message again without keeping a new one, as providers that
	// honour the header do.
	Dedupe bool
	// Reply, when set, is asked before each request is handled (n counts
	// requests from 1) and may answer instead: a status other than 0, and a
	// Retry-After value ("" for none).
	Reply func(n int) (status int, retryAfter string)
	// OnSMS, when set, is called with each kept message.
	OnSMS func(SMS)
	// Callbacks, when set, are the statuses ("sent", "delivered") posted,
	// in order, to the StatusCallback URL of each Twilio-form message
	// kept, as Twilio does: a form with MessageSid and MessageStatus,
	// signed with X-Twilio-Signature under the account's auth token.
	Callbacks []string
	// Delay, when set, is how long request n (from 1) waits before it is
	// handled: a provider too slow to answer (failover tests).
	Delay func(n int) time.Duration
}

// SMSServer is a running SMS provider stand-in. It serves
//
//	POST /2010-04-01/Accounts/{sid}/Messages.json  form To, From, Body → 201 {"sid": ...}
//	POST /webhook                                  JSON {"to","from","body"} → 200 {"message_id": ...}
//	GET  /messages                                 the messages kept, as JSON
type SMSServer struct {
	cfg SMSConfig
	srv *http.Server
	ln  net.Listener

	mu       sync.Mutex
	posted   []Callback
	requests int
	messages []SMS
	byKey    map[string]string
}

// StartSMS starts a server; Close stops it.
func StartSMS(cfg SMSConfig) (*SMSServer, error) {
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, err
	}
	s := &SMSServer{cfg: cfg, ln: ln, byKey: map[string]string{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /2010-04-01/Accounts/{sid}/Messages.json", s.twilio)
	mux.HandleFunc("POST /webhook", s.webhook)
	mux.HandleFunc("GET /messages", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(s.Messages())
	})
	s.srv = &http.Server{Handler: mux}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// URL is the server's base URL.
func (s *SMSServer) URL() string { return "http://" + s.ln.Addr().String() }

// Messages returns the messages kept so far.
func (s *SMSServer) Messages() []SMS {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]SMS(nil), s.messages...)
}

// Requests counts the send requests received, refused ones included.
func (s *SMSServer) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

// Close stops the server.
func (s *SMSServer) Close() error { return s.srv.Close() }

func (s *SMSServer) intercept(w http.ResponseWriter) bool {
	s.mu.Lock()
	s.requests++
	n := s.requests
	s.mu.Unlock()
	if s.cfg.Delay != nil {
		time.Sleep(s.cfg.Delay(n))
	}
	if s.cfg.Reply == nil {
		return false
	}
	status, retryAfter := s.cfg.Reply(n)
	if status == 0 {
		return false
	}
	if retryAfter != "" {
		w.Header().Set("Retry-After", retryAfter)
	}
	writeJSON(w, status, map[string]any{"message": fmt.Sprintf("refused with %d by the test server", status)})
	return true
}

func (s *SMSServer) twilio(w http.ResponseWriter, r *http.Request) {
	if s.intercept(w) {
		return
	}
	sid := r.PathValue("sid")
	if s.cfg.Accounts != nil {
		user, pass, ok := r.BasicAuth()
		if want, known := s.cfg.Accounts[sid]; !ok || !known || user != sid || pass != want {
			writeJSON(w, http.StatusUnauthorized, map[string]any{"code": 20003, "message": "Authenticate"})
			return
		}
	}
	if err := r.ParseForm(); err != nil || r.PostForm.Get("To") == "" || r.PostForm.Get("Body") == "" {
		writeJSON(w, http.StatusBadRequest, map[string]any{"code": 21604, "message": "A 'To' and a 'Body' are required"})
		return
	}
	m := s.keep(SMS{Provider: "twilio", To: r.PostForm.Get("To"), From: r.PostForm.Get("From"), Body: r.PostForm.Get("Body"),
		IdempotencyKey: r.Header.Get("Idempotency-Key"), Header: headers(r), StatusCallback: r.PostForm.Get("StatusCallback")})
	if m.StatusCallback != "" && len(s.cfg.Callbacks) > 0 {
		go s.callBack(m, s.cfg.Accounts[sid])
	}
	writeJSON(w, http.StatusCreated, map[string]any{"sid": m.ID, "status": "queued", "to": m.To, "body": m.Body})
}

func (s *SMSServer) webhook(w http.ResponseWriter, r *http.Request) {
	if s.intercept(w) {
		return
	}
	var in struct{ To, From, Body string }
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.To == "" {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": "want a JSON object with to and body"})
		return
	}
	m := s.keep(SMS{Provider: "webhook", To: in.To, From: in.From, Body: in.Body,
		IdempotencyKey: r.Header.Get("Idempotency-Key"), Header: headers(r)})
	writeJSON(w, http.StatusOK, map[string]any{"message_id": m.ID})
}

// keep stores m under a new id, or returns the first message of its key.
func (s *SMSServer) keep(m SMS) SMS {
	s.mu.Lock()
	if id, seen := s.byKey[m.IdempotencyKey]; s.cfg.Dedupe && m.IdempotencyKey != "" && seen {
		s.mu.Unlock()
		m.ID = id
		return m
	}
	m.ID = fmt.Sprintf("SM%032d", len(s.messages)+1)
	s.messages = append(s.messages, m)
	if m.IdempotencyKey != "" {
		s.byKey[m.IdempotencyKey] = m.ID
	}
	s.mu.Unlock()
	if s.cfg.OnSMS != nil {
		s.cfg.OnSMS(m)
	}
	return m
}

func headers(r *http.Request) http.Header {
	h := r.Header.Clone()
	h.Del("Authorization")
	return h
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// Callback is one status callback the server posted and the answer it got.
type Callback struct {
	MessageID, Status string
	// Code is the HTTP status of the answer, 0 when the post failed.
	Code int
}

// Callbacks returns the status callbacks posted so far.
func (s *SMSServer) Callbacks() []Callback {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Callback(nil), s.posted...)
}

// callBack posts cfg.Callbacks for m, in order.
func (s *SMSServer) callBack(m SMS, token string) {
	for _, status := range s.cfg.Callbacks {
		form := url.Values{"MessageSid": {m.ID}, "SmsSid": {m.ID}, "MessageStatus": {status}, "To": {m.To}, "From": {m.From}}
		req, err := http.NewRequest(http.MethodPost, m.StatusCallback, strings.NewReader(form.Encode()))
		code := 0
		if err == nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("X-Twilio-Signature", TwilioSignature(token, m.StatusCallback, form))
			if resp, err := http.DefaultClient.Do(req); err == nil {
				code = resp.StatusCode
				resp.Body.Close()
			}
		}
		s.mu.Lock()
		s.posted = append(s.posted, Callback{MessageID: m.ID, Status: status, Code: code})
		s.mu.Unlock()
	}
}

// TwilioSignature is Twilio's X-Twilio-Signature of form posted to u:
// base64 of the HMAC-SHA1, under the auth token, of u followed by each
// parameter's name and value, names sorted.
func TwilioSignature(token, u string, form url.Values) string {
	var b strings.Builder
	b.WriteString(u)
	keys := make([]string, 0, len(form))
	for k := range form {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		for _, v := range form[k] {
			b.WriteString(k + v)
		}
	}
	mac := hmac.New(sha1.New, []byte(token))
	mac.Write([]byte(b.String()))
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}
