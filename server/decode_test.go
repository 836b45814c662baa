package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
)

// FuzzDecode feeds arbitrary bodies to the request decoders: they never
// panic, and every rejection is an *apiError a client gets as JSON (400 or
// 413), never an internal error.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{`{}`, `{"name":"a","type":"b","value":{"k":"v"}}`, `{"name":`, `[1,2]`, `"x"`, `{"value":{"k":1}}`,
		`{"a":1}{"b":2}`, "\x00\xff", `{"name":"a","extra":true}`, `1e999`, `{"name":"\ud800"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var in credentialInput
		if err := decodeJSON(body, &in); err != nil {
			var ae *apiError
			if !errors.As(err, &ae) || (ae.Status != http.StatusBadRequest && ae.Status != http.StatusRequestEntityTooLarge) {
				t.Fatalf("decodeJSON(%q): %v, want a 400/413 apiError", body, err)
			}
		}
		if err := validJSON(body); err != nil {
			var ae *apiError
			if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest {
				t.Fatalf("validJSON(%q): %v, want a 400 apiError", body, err)
			}
		} else if !json.Valid(bytes.TrimSpace(body)) && len(bytes.TrimSpace(body)) > 0 {
			t.Fatalf("validJSON accepted %q, which is not JSON", body)
		}
		// The error writer always produces the API's problem details.
		rec := httptest.NewRecorder()
		s := &Server{log: discardLogger()}
		s.writeError(rec, httptest.NewRequest("POST", "/v1/credentials", nil), decodeJSON(body, &in))
		if rec.Code >= 400 {
			var e problemBody
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Code == "" || e.Status != rec.Code || e.Detail == "" {
				t.Fatalf("error response %q is not the API's problem details", rec.Body.Bytes())
			}
		}
	})
}
