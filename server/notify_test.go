package server_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/rune-org/rune/internal/catcher"
	"github.com/rune-org/rune/server"
	"github.com/rune-org/rune/store"
)

// sendsView is GET /v1/executions/{id}/sends.
type sendsView struct {
	Sends []struct {
		NodeID     string `json:"node_id"`
		Channel    string `json:"channel"`
		Credential string `json:"credential"`
		MessageID  string `json:"message_id"`
		Status     string `json:"status"`
		History    []struct {
			Status         string `json:"status"`
			ProviderStatus string `json:"provider_status"`
		} `json:"history"`
	} `json:"sends"`
}

// testDeliveryStatus (issue 36, item 7): an sms node sends through the
// catcher's Twilio-compatible provider, which posts "sent" then
// "delivered" to the credential's status_callback, signed with
// X-Twilio-Signature; the server ties them to the send by message id:
// GET /v1/executions/{id}/sends shows the history, and the execution's
// event stream carries send.status. Forged or unknown callbacks are
// refused; the generic JSON form is verified with its HMAC.
func testDeliveryStatus(t *testing.T, a *api, id string) {
	texts, err := catcher.StartSMS(catcher.SMSConfig{Accounts: map[string]string{"ACst": "tok-status"}, Callbacks: []string{"sent", "delivered"}})
	if err != nil {
		t.Fatal(err)
	}
	defer texts.Close()
	cred := "sms_" + id
	callback := a.tg.url + "/v1/providers/" + cred + "/status"
	value, _ := json.Marshal(map[string]string{"type": "twilio", "base_url": texts.URL(), "account_sid": "ACst", "auth_token": "tok-status",
		"from": "+15550001111", "status_callback": callback})
	a.want(http.StatusCreated, "POST", "/v1/credentials", []byte(`{"name":"`+cred+`","type":"twilio","value":`+string(value)+`}`), nil)
	a.pushWorkflow(wfDef(id, `{"id":"remind","type":"sms","credentials":{"ref":"`+cred+`"},"parameters":{"to":"{{ $trigger.phone }}","body":"hi"}}`,
		`{"id":"e1","src":"start","dst":"remind"}`))
	x := a.trigger(id, `{"phone": "+14155550100"}`)
	a.waitStatus(x.ID, "completed")

	var v sendsView
	deadline := time.Now().Add(60 * time.Second)
	for {
		a.want(http.StatusOK, "GET", "/v1/executions/"+x.ID+"/sends", nil, &v)
		if len(v.Sends) == 1 && v.Sends[0].Status == "delivered" && len(v.Sends[0].History) == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sends %+v, callbacks %+v: want one send, delivered, within 60 s", v, texts.Callbacks())
		}
		time.Sleep(20 * time.Millisecond)
	}
	msgs := texts.Messages()
	s := v.Sends[0]
	if len(msgs) != 1 || s.MessageID != msgs[0].ID || s.NodeID != "remind" || s.Channel != "sms" || s.Credential != cred ||
		s.History[0].Status != "queued" || s.History[1].Status != "sent" || s.History[2].ProviderStatus != "delivered" {
		t.Fatalf("send %+v, message %+v", s, msgs)
	}
	for _, c := range texts.Callbacks() {
		if c.Code != http.StatusOK {
			t.Fatalf("callback %+v, want 200", c)
		}
	}
	ch, _, cancel := a.stream("/v1/executions/"+x.ID+"/events", "")
	defer cancel()
	var statuses []string
	for _, ev := range a.collect(ch, -1) {
		if ev.Event == "send.status" {
			var b store.SendStatusEvent
			if err := json.Unmarshal([]byte(ev.Data), &b); err != nil || b.MessageID != s.MessageID || b.NodeID != "remind" {
				t.Fatalf("send.status %s: %v", ev.Data, err)
			}
			statuses = append(statuses, b.Status)
		}
	}
	// The catcher calls back at once: "sent" may come before the worker's
	// status reached the server; its event is then written when the send
	// is indexed.
	if strings.Join(statuses, ",") != "sent,delivered" {
		t.Fatalf("send.status events %v, want sent, delivered", statuses)
	}

	// A forged Twilio callback: 401, and nothing recorded.
	form := url.Values{"MessageSid": {s.MessageID}, "MessageStatus": {"failed"}}
	a.wantError(http.StatusUnauthorized, server.CodeUnauthorized, "POST", "/v1/providers/"+cred+"/status", []byte(form.Encode()),
		"Content-Type", "application/x-www-form-urlencoded", "X-Twilio-Signature", catcher.TwilioSignature("not-the-token", callback, form))
	a.wantError(http.StatusNotFound, server.CodeNotFound, "POST", "/v1/providers/nobody_"+id+"/status", []byte(`{}`))

	// The generic JSON form, signed with the credential's status_secret.
	generic := "mail_" + id
	a.want(http.StatusCreated, "POST", "/v1/credentials", []byte(`{"name":"`+generic+`","type":"smtp","value":{"type":"smtp","host":"127.0.0.1","status_secret":"sek-`+id+`"}}`), nil)
	sign := func(body, secret string) string {
		m := hmac.New(sha256.New, []byte(secret))
		m.Write([]byte(body))
		return "sha256=" + hex.EncodeToString(m.Sum(nil))
	}
	body := `{"message_id": "<unknown@rune.test>", "status": "hard_bounce"}`
	var got map[string]any
	a.want(http.StatusOK, "POST", "/v1/providers/"+generic+"/status", []byte(body), &got, server.StatusSignatureHeader, sign(body, "sek-"+id))
	if got["status"] != "bounced" || got["matched"] != false {
		t.Fatalf("generic callback answered %v", got)
	}
	a.wantError(http.StatusUnauthorized, server.CodeUnauthorized, "POST", "/v1/providers/"+generic+"/status", []byte(body), server.StatusSignatureHeader, sign(body, "wrong"))
	odd := `{"message_id": "m1", "status": "teleported"}`
	a.wantError(http.StatusBadRequest, server.CodeInvalidRequest, "POST", "/v1/providers/"+generic+"/status", []byte(odd), server.StatusSignatureHeader, sign(odd, "sek-"+id))
	a.wantError(http.StatusNotFound, server.CodeNotFound, "GET", "/v1/executions/nope_"+id+"/sends", nil)
}
