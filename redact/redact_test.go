package redact

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"net/url"
	"strings"
	"testing"
)

const secret = "s3cr3t/t0ken+=?&"

func TestStringRedactsEveryForm(t *testing.T) {
	var s Set
	s.Add(secret, "ann")
	for _, form := range []string{
		secret,
		base64.StdEncoding.EncodeToString([]byte(secret)),
		base64.RawURLEncoding.EncodeToString([]byte(secret)),
		url.QueryEscape(secret),
		url.PathEscape(secret),
		base64.StdEncoding.EncodeToString([]byte("ann:" + secret)), // HTTP Basic
	} {
		got := s.String("before " + form + " after")
		if got != "before [redacted] after" {
			t.Errorf("String(%q) = %q", form, got)
		}
	}
	if got := s.String("ann is no secret of 4 bytes"); got != "ann is no secret of 4 bytes" {
		t.Errorf("a value under MinLen was redacted: %q", got)
	}
}

// A secret that begins with another, shorter one is masked whole: the
// longest form is matched first, whatever order the secrets were added in.
func TestStringRedactsLongestFirst(t *testing.T) {
	var s Set
	s.Add("abcd1234")
	s.Add("abcd1234efgh5678")
	for _, text := range []string{"abcd1234efgh5678", "key=abcd1234efgh5678;"} {
		want := strings.ReplaceAll(text, "abcd1234efgh5678", Mask)
		if got := s.String(text); got != want {
			t.Errorf("String(%q) = %q, want %q", text, got, want)
		}
	}
	if got := s.String("abcd1234 alone"); got != Mask+" alone" {
		t.Errorf("the shorter secret alone: %q", got)
	}
}

// MinLen is inclusive: a secret of exactly MinLen bytes is redacted, and
// so is HTTP Basic's base64 of two shorter fields that make MinLen together.
func TestMinLenIsInclusive(t *testing.T) {
	var s Set
	s.Add("k3y!")
	s.Add("ab", "cd")
	basic := base64.StdEncoding.EncodeToString([]byte("ab:cd"))
	if got := s.String("x k3y! " + basic + " ab cd"); got != "x [redacted] [redacted] ab cd" {
		t.Errorf("String = %q: want the 4-byte secret and the Basic form of ab:cd redacted, ab and cd alone not", got)
	}
}

func TestValueRedactsWithoutModifying(t *testing.T) {
	var s Set
	s.Add(secret)
	in := map[string]any{
		"body":  map[string]any{"headers": []any{"Authorization: Bearer " + secret, 1.0}},
		secret:  "as a key",
		"clean": []any{"x"},
	}
	out := s.Value(in).(map[string]any)
	if strings.Contains(jsonish(out), "t0ken") {
		t.Errorf("Value left the secret: %v", out)
	}
	if out["body"].(map[string]any)["headers"].([]any)[0] != "Authorization: Bearer [redacted]" || out[Mask] != "as a key" {
		t.Errorf("Value = %v", out)
	}
	if !strings.Contains(jsonish(in), secret) {
		t.Error("Value modified its input")
	}
	var empty Set
	if got := empty.Value(in); got.(map[string]any)["clean"] == nil {
		t.Error("an empty set changed the value")
	}
}

func jsonish(v any) string {
	var b strings.Builder
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				b.WriteString(k + "=")
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		case string:
			b.WriteString(x + " ")
		}
	}
	walk(v)
	return b.String()
}

func TestHandlerRedactsLogLines(t *testing.T) {
	var s Set
	var buf bytes.Buffer
	log := slog.New(s.Handler(slog.NewTextHandler(&buf, nil))).With("early", "x")
	s.Add(secret) // added after the logger was made: still redacted
	log.Info("calling with "+secret, "err", errors.New("401 for "+url.QueryEscape(secret)),
		slog.Group("req", "auth", "Bearer "+secret), "body", map[string]any{"echo": secret})
	if out := buf.String(); strings.Contains(out, "t0ken") || strings.Count(out, Mask) != 4 {
		t.Errorf("log line: %s", out)
	}
}

// A secret holding '"' or '\' echoed in a JSON body appears escaped: an
// API's error body, once; that body carried as a JSON string (an error
// snippet inside a status), twice; with <, > and & escaped or not.
func TestStringRedactsJSONEscapedForms(t *testing.T) {
	const tricky = `pa"ss\w<rd>&`
	var s Set
	s.Add(tricky)
	body, _ := json.Marshal(map[string]string{"error": "bad token " + tricky})
	twice, _ := json.Marshal(map[string]string{"snippet": string(body)})
	var raw bytes.Buffer
	enc := json.NewEncoder(&raw)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(map[string]string{"error": tricky})
	for _, text := range []string{string(body), string(twice), raw.String()} {
		got := s.String(text)
		if strings.Contains(got, `ss\\w`) || strings.Contains(got, `ss\\\\w`) || strings.Contains(got, "ss\\w") || !strings.Contains(got, Mask) {
			t.Errorf("%s → %s: the escaped secret is still there", text, got)
		}
	}
}
