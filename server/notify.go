package server

import (
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/secrets"
	"github.com/rune-org/rune/store"
)

// The notification platform's routes (issue 36; docs/notifications.md).

// maxStatusBody bounds a provider's status callback.
const maxStatusBody = 64 << 10

// StatusSignatureHeader carries the generic JSON callback's signature:
// "sha256=" and the hex HMAC-SHA256 of the body under the credential's
// status_secret.
const StatusSignatureHeader = "X-Rune-Signature"

// sendOf is the send a success status of an email or sms node reports
// (its output holds the provider's message id and the credential that
// sent it), or false.
func sendOf(ev store.HistoryEvent) (store.Send, bool) {
	st := ev.Status
	if st == nil || st.Status != message.StatusSuccess || st.Var == "" {
		return store.Send{}, false
	}
	out, _ := st.Output.(map[string]any)
	id, _ := out["message_id"].(string)
	cred, _ := out["credential"].(string)
	channel, _, _ := strings.Cut(st.Var, "_")
	if id == "" || cred == "" || (channel != "email" && channel != "sms") {
		return store.Send{}, false
	}
	status := store.SendSent
	if channel == "sms" {
		status = store.SendQueued // a provider takes a text into its queue
	}
	at := st.ExecutedAt
	if at.IsZero() {
		at = ev.ReceivedAt
	}
	return store.Send{Credential: cred, MessageID: id, ExecutionID: st.ExecutionID, WorkflowID: st.WorkflowID, NodeID: st.NodeID,
		Branch: store.BranchKey(st.LineageStack), Channel: channel, Status: status, SentAt: at}, true
}

// recordSends indexes the sends a committed batch reports by provider
// message id, so that status callbacks find their execution. A failure is
// logged: the history is committed, and a callback for a send not indexed
// is still kept (and its event written once the send is indexed).
func (s *historyConsumer) recordSends(ctx context.Context, evs []store.HistoryEvent) {
	var sends []store.Send
	for _, ev := range evs {
		if x, ok := sendOf(ev); ok {
			sends = append(sends, x)
		}
	}
	if len(sends) == 0 {
		return
	}
	if err := s.store.RecordSends(ctx, sends); err != nil && ctx.Err() == nil {
		s.log.Warn("notifications: recording sends failed; their status callbacks will not reach the event stream", "sends", len(sends), "err", err)
	}
}

// twilioStatus maps Twilio's MessageStatus to a delivery status.
var twilioStatus = map[string]string{
	"accepted": store.SendQueued, "scheduled": store.SendQueued, "queued": store.SendQueued, "sending": store.SendQueued,
	"sent": store.SendSent, "delivered": store.SendDelivered, "read": store.SendDelivered,
	"undelivered": store.SendUndelivered, "failed": store.SendFailed, "canceled": store.SendFailed,
}

// genericStatus maps the generic form's status (ours, or a provider's
// common words) to a delivery status.
var genericStatus = map[string]string{
	"queued": store.SendQueued, "accepted": store.SendQueued, "processed": store.SendQueued, "sending": store.SendQueued,
	"sent": store.SendSent, "delivered": store.SendDelivered, "delivery": store.SendDelivered, "opened": store.SendDelivered, "read": store.SendDelivered,
	"undelivered": store.SendUndelivered, "deferred": store.SendUndelivered,
	"failed": store.SendFailed, "rejected": store.SendFailed, "dropped": store.SendFailed, "error": store.SendFailed,
	"bounced": store.SendBounced, "bounce": store.SendBounced, "hard_bounce": store.SendBounced, "soft_bounce": store.SendBounced, "complaint": store.SendBounced,
}

// providerStatus receives a provider's delivery status callback:
// POST /v1/providers/{credential}/status. The Twilio form
// (application/x-www-form-urlencoded, MessageSid and MessageStatus) is
// verified with X-Twilio-Signature and the credential's auth_token; the
// generic JSON form ({"message_id", "status"}) with X-Rune-Signature and
// its status_secret. No bearer token: the signature is the authentication.
func (s *Server) providerStatus(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("credential")
	if s.cfg.Keys == nil {
		return errorf(http.StatusServiceUnavailable, CodeUnavailable, "this server has no secret key: credentials, and so status callbacks, are unavailable")
	}
	fields, err := (secrets.Store{Store: s.store, Keys: s.cfg.Keys}).Resolve(r.Context(), name)
	if errors.Is(err, secrets.ErrNotFound) {
		return notFound("credential %q does not exist", name)
	}
	if err != nil {
		return err
	}
	body, err := readBody(r, maxStatusBody)
	if err != nil {
		return err
	}
	var messageID string
	var st store.SendStatus
	ctype := r.Header.Get("Content-Type")
	if strings.HasPrefix(ctype, "application/x-www-form-urlencoded") {
		form, err := url.ParseQuery(string(body))
		if err != nil {
			return badRequest("the body is not a form: %v", err)
		}
		if fields["auth_token"] == "" {
			return badRequest("credential %q has no auth_token to verify a Twilio callback with", name)
		}
		if !twilioSignatureOK(fields["auth_token"], s.callbackURL(r), form, r.Header.Get("X-Twilio-Signature")) {
			return unauthorized("X-Twilio-Signature does not match the callback URL, its form and credential %q's auth_token (rune server --public-url must be the URL the provider calls)", name)
		}
		messageID = form.Get("MessageSid")
		if messageID == "" {
			messageID = form.Get("SmsSid")
		}
		st.ProviderStatus = form.Get("MessageStatus")
		if st.ProviderStatus == "" {
			st.ProviderStatus = form.Get("SmsStatus")
		}
		st.Status = twilioStatus[strings.ToLower(st.ProviderStatus)]
	} else {
		secret := fields["status_secret"]
		if secret == "" {
			return badRequest("credential %q has no status_secret to verify a JSON callback with", name)
		}
		if !hmacSHA256OK(secret, body, r.Header.Get(StatusSignatureHeader)) {
			return unauthorized("%s does not match the body under credential %q's status_secret", StatusSignatureHeader, name)
		}
		var in struct {
			MessageID      string    `json:"message_id"`
			Status         string    `json:"status"`
			ProviderStatus string    `json:"provider_status"`
			At             time.Time `json:"at"`
		}
		if err := json.Unmarshal(body, &in); err != nil {
			return errorf(http.StatusBadRequest, CodeInvalidJSON, "want {\"message_id\", \"status\"}: %v", err)
		}
		messageID, st.At = in.MessageID, in.At
		st.ProviderStatus = in.ProviderStatus
		if st.ProviderStatus == "" {
			st.ProviderStatus = in.Status
		}
		st.Status = genericStatus[strings.ToLower(in.Status)]
	}
	if messageID == "" || len(messageID) > 512 {
		return badRequest("the callback names no message id (MessageSid, or message_id), or one over 512 bytes")
	}
	if st.Status == "" {
		return badRequest("status %q is not one Rune knows (queued, sent, delivered, undelivered, failed, bounced)", st.ProviderStatus)
	}
	if len(st.ProviderStatus) > 64 {
		st.ProviderStatus = st.ProviderStatus[:64]
	}
	if st.At.IsZero() {
		st.At = s.cfg.Now()
	}
	send, err := s.store.AddSendStatus(r.Context(), name, messageID, st)
	if err != nil {
		return err
	}
	if send != nil {
		s.commits.notify() // the send.status event: wake the live streams
	}
	writeJSON(w, http.StatusOK, map[string]any{"message_id": messageID, "status": st.Status, "matched": send != nil})
	return nil
}

// callbackURL is the URL the provider called, as it signed it: the
// server's public URL (rune server --public-url) and the request's path
// and query, or the request's own host without one.
func (s *Server) callbackURL(r *http.Request) string {
	base := strings.TrimRight(s.cfg.PublicURL, "/")
	if base == "" {
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		base = scheme + "://" + r.Host
	}
	return base + r.URL.RequestURI()
}

// twilioSignatureOK checks Twilio's request signature: base64 of the
// HMAC-SHA1, under the auth token, of the URL followed by each form
// parameter's name and value, names sorted.
func twilioSignatureOK(token, u string, form url.Values, got string) bool {
	want, err := base64.StdEncoding.DecodeString(got)
	if err != nil || got == "" {
		return false
	}
	return hmac.Equal(want, twilioSignature(token, u, form))
}

// twilioSignature is the X-Twilio-Signature of a form posted to u, decoded
// (internal/catcher signs its callbacks on its own, as Twilio does).
func twilioSignature(token, u string, form url.Values) []byte {
	var b strings.Builder
	b.WriteString(u)
	keys := make([]string, 0, len(form))
	for k := range form {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		vs := slices.Clone(form[k])
		sort.Strings(vs)
		for _, v := range vs {
			b.WriteString(k)
			b.WriteString(v)
		}
	}
	m := hmac.New(sha1.New, []byte(token))
	m.Write([]byte(b.String()))
	return m.Sum(nil)
}

func hmacSHA256OK(secret string, body []byte, header string) bool {
	hexSig, ok := strings.CutPrefix(header, "sha256=")
	got, err := hex.DecodeString(hexSig)
	if !ok || err != nil {
		return false
	}
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return hmac.Equal(got, m.Sum(nil))
}

// sendView is one send of GET /v1/executions/{id}/sends.
type sendView struct {
	NodeID     string             `json:"node_id"`
	Branch     string             `json:"branch,omitempty"`
	Channel    string             `json:"channel"`
	Credential string             `json:"credential"`
	MessageID  string             `json:"message_id"`
	Status     string             `json:"status"`
	SentAt     time.Time          `json:"sent_at"`
	History    []store.SendStatus `json:"history"`
}

// listSends answers GET /v1/executions/{id}/sends: every send of the
// execution with its delivery status history.
func (s *Server) listSends(w http.ResponseWriter, r *http.Request) error {
	x, err := s.execution(r)
	if err != nil {
		return err
	}
	sends, err := s.store.ListSends(r.Context(), x.ID)
	if err != nil {
		return err
	}
	out := make([]sendView, 0, len(sends))
	for _, sd := range sends {
		out = append(out, sendView{NodeID: sd.NodeID, Branch: sd.Branch, Channel: sd.Channel, Credential: sd.Credential,
			MessageID: sd.MessageID, Status: sd.Status, SentAt: sd.SentAt, History: sd.History})
	}
	writeJSON(w, http.StatusOK, map[string]any{"sends": out})
	return nil
}

// publicURLOK says whether u can be Config.PublicURL.
func publicURLOK(u string) bool {
	p, err := url.Parse(strings.TrimRight(u, "/"))
	return err == nil && (p.Scheme == "http" || p.Scheme == "https") && p.Host != "" && p.RawQuery == "" && p.User == nil
}
