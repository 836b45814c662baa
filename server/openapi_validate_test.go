package server_test

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	vErrors "github.com/pb33f/libopenapi-validator/errors"

	"github.com/rune-org/rune/server"
)

// specValidator checks the API suite's requests and responses against the
// served OpenAPI document (libopenapi-validator), so the document cannot
// drift from what the server does.
var specValidator struct {
	once sync.Once
	mu   sync.Mutex // the validator's caches are not documented as safe for concurrent use
	v    validator.Validator
	err  error
}

// checkExchange fails t when the request or its response does not match
// the OpenAPI document. Bodies are given separately: both were read.
func checkExchange(t testing.TB, req *http.Request, reqBody []byte, status int, header http.Header, respBody []byte) {
	t.Helper()
	specValidator.once.Do(func() {
		doc, err := libopenapi.NewDocument(server.OpenAPI())
		if err != nil {
			specValidator.err = err
			return
		}
		v, errs := validator.NewValidator(doc)
		if len(errs) > 0 {
			specValidator.err = errs[0]
			return
		}
		if ok, verrs := v.ValidateDocument(); !ok && len(verrs) > 0 {
			specValidator.err = verrs[0]
			return
		}
		specValidator.v = v
	})
	if specValidator.err != nil {
		t.Fatalf("openapi.json: %v", specValidator.err)
	}
	r := req.Clone(req.Context())
	r.Body = io.NopCloser(bytes.NewReader(reqBody))
	resp := &http.Response{StatusCode: status, Header: header, Body: io.NopCloser(bytes.NewReader(respBody)), Request: r}
	// A request the server refused (4xx) is invalid by design (the suite's
	// negative cases): only its answer is checked, and an answer to a
	// path or method the API lacks has nothing to match.
	specValidator.mu.Lock()
	var ok bool
	var verrs []*vErrors.ValidationError
	if status < 400 {
		ok, verrs = specValidator.v.ValidateHttpRequestResponse(r, resp)
	} else {
		ok, verrs = specValidator.v.ValidateHttpResponse(r, resp)
	}
	specValidator.mu.Unlock()
	if !ok && status >= 400 && len(verrs) == 1 && (verrs[0].IsPathMissingError() || verrs[0].IsOperationMissingError()) &&
		(status == http.StatusNotFound || status == http.StatusMethodNotAllowed) {
		return
	}
	if ok {
		return
	}
	var b strings.Builder
	for _, e := range verrs {
		b.WriteString("\n  " + e.Message + ": " + e.Reason)
		for _, se := range e.SchemaValidationErrors {
			b.WriteString("\n    " + se.FieldPath + " (" + se.KeywordLocation + "): " + se.Reason)
		}
	}
	t.Errorf("%s %s → %d does not match openapi.json:%s\nresponse: %.300s", req.Method, req.URL.Path, status, b.String(), respBody)
}
