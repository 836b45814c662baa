package redact

import (
	"encoding/base64"
	"net/url"
	"strings"
	"testing"
)

// Issue 36, item 9: a credential's host, port, type, from address and
// account show; its secrets, their encodings and Basic pairs with the
// account do not.
func TestAddCredentialRedactsOnlySecretFields(t *testing.T) {
	var s Set
	s.AddCredential(map[string]string{
		"type": "twilio", "host": "smtp.example.com", "port": "2525", "from": "hello@example.com",
		"username": "app-user", "account_sid": "AC123456", "base_url": "https://user:urlpass99@api.example.com/?key=q-key-77",
		"auth_token": "tok-secret", "password": "pw-secret", "header:X-Api-Key": "hdr-secret", "api_key": "key-secret",
		"headers": `{"X-Token": "json-hdr-secret"}`,
	})
	for _, public := range []string{"twilio", "smtp.example.com:2525", "hello@example.com", "app-user", "AC123456", "api.example.com"} {
		if got := s.String("x " + public + " y"); got != "x "+public+" y" {
			t.Errorf("public value %q was redacted: %q", public, got)
		}
	}
	for _, secret := range []string{
		"tok-secret", "pw-secret", "hdr-secret", "key-secret", "json-hdr-secret", "urlpass99", "q-key-77",
		base64.StdEncoding.EncodeToString([]byte("pw-secret")), url.QueryEscape("json-hdr-secret"),
		base64.StdEncoding.EncodeToString([]byte("AC123456:tok-secret")),
		base64.StdEncoding.EncodeToString([]byte("app-user:pw-secret")),
	} {
		if got := s.String("x " + secret + " y"); got != "x [redacted] y" {
			t.Errorf("secret form %q: %q", secret, got)
		}
	}
	// Two public values together are no secret either.
	basic := base64.StdEncoding.EncodeToString([]byte("app-user:AC123456"))
	if got := s.String(basic); strings.Contains(got, Mask) {
		t.Errorf("the Basic form of two public values was redacted: %q", got)
	}
}
