package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/workflow"
)

// Error codes: the code member of the API's problem details (RFC 9457
// application/problem+json: type, title, status, detail, code, problems?).
const (
	CodeUnauthorized     = "unauthorized"
	CodeForbidden        = "forbidden"
	CodeNotFound         = "not_found"
	CodeMethodNotAllowed = "method_not_allowed"
	CodeInvalidJSON      = "invalid_json"
	CodeInvalidRequest   = "invalid_request"
	CodeInvalidWorkflow  = "invalid_workflow"
	CodeInvalidInput     = "invalid_input"
	CodeTooLarge         = "too_large"
	CodeConflict         = "conflict"
	// CodeIdempotencyKeyReused: an Idempotency-Key came back with another
	// request (body or version) than the one it first started.
	CodeIdempotencyKeyReused = "idempotency_key_reused"
	// CodePreconditionFailed: If-Match names a version that is no longer the latest.
	CodePreconditionFailed = "precondition_failed"
	CodeRateLimited        = "rate_limited"
	CodeUnavailable        = "unavailable"
	CodeInternal           = "internal"
)

// apiError is an error a client sees: its status, code and message, and for
// an invalid workflow every problem with its JSON path.
type apiError struct {
	Status   int
	Code     string
	Message  string
	Problems []workflow.Problem
}

func (e *apiError) Error() string { return e.Code + ": " + e.Message }

func errorf(status int, code, format string, args ...any) *apiError {
	return &apiError{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

func notFound(format string, args ...any) *apiError {
	return errorf(http.StatusNotFound, CodeNotFound, format, args...)
}

func badRequest(format string, args ...any) *apiError {
	return errorf(http.StatusBadRequest, CodeInvalidRequest, format, args...)
}

// checkInput applies the engine's input policy (message.CheckJSON: size,
// depth, UTF-8) to a trigger payload, the whole $trigger as the engine will
// see it, so that what the engine would refuse is refused where it enters:
// 422 invalid_input naming the path ("input.a.b…: nested deeper than 64
// levels"), never enqueued.
func checkInput(input []byte) error {
	err := message.CheckJSON("input", input)
	var pe *message.PolicyError
	if errors.As(err, &pe) {
		return &apiError{Status: http.StatusUnprocessableEntity, Code: CodeInvalidInput,
			Message:  "the trigger payload breaks the input policy: " + pe.Error(),
			Problems: []workflow.Problem{{Path: pe.Path, Message: pe.Problem}}}
	}
	return err
}

// ProblemTypeBase prefixes a problem's code to make its type URI
// ("urn:rune:problem:not_found"): a stable name, not a page to fetch.
const ProblemTypeBase = "urn:rune:problem:"

// problemBody is the body of every error response: RFC 9457 problem details
// with the API's code and, for an invalid workflow or input, every problem
// with its JSON path as extension members.
type problemBody struct {
	Type     string             `json:"type"`
	Title    string             `json:"title"`
	Status   int                `json:"status"`
	Detail   string             `json:"detail"`
	Code     string             `json:"code"`
	Problems []workflow.Problem `json:"problems,omitempty"`
}

// writeError writes err as the API's problem details. Errors that are not
// an *apiError are internal: logged with the request, never shown to the
// client.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var ae *apiError
	if !errors.As(err, &ae) {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			ae = errorf(http.StatusRequestEntityTooLarge, CodeTooLarge, "request body is over the limit of %d bytes", mbe.Limit)
		} else {
			s.log.Error("request failed", "method", r.Method, "path", loggedPath(r), "err", err)
			ae = errorf(http.StatusInternalServerError, CodeInternal, "internal error; the server logged it")
		}
	}
	if ae.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="rune"`)
	}
	writeBody(w, ae.Status, "application/problem+json", problemBody{Type: ProblemTypeBase + ae.Code,
		Title: http.StatusText(ae.Status), Status: ae.Status, Detail: ae.Message, Code: ae.Code, Problems: ae.Problems})
}

// writeJSON writes v as the response body with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	writeBody(w, status, "application/json", v)
}

// writeCreated answers 201 with v and the Location of what was created.
func writeCreated(w http.ResponseWriter, location string, v any) {
	w.Header().Set("Location", location)
	writeJSON(w, http.StatusCreated, v)
}

func writeBody(w http.ResponseWriter, status int, contentType string, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // "<token>" reads better than "\u003ctoken\u003e"
	err := enc.Encode(v)
	body := buf.Bytes()
	if err != nil {
		// Only a bug gets here (every response type marshals).
		status, contentType = http.StatusInternalServerError, "application/problem+json"
		body = []byte(`{"type":"` + ProblemTypeBase + `internal","title":"Internal Server Error","status":500,"detail":"internal error; the server logged it","code":"internal"}` + "\n")
	}
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(body)
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
