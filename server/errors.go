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

// Error codes of the API's error body {"error": {"code", "message", "problems"?}}.
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
	CodeRateLimited      = "rate_limited"
	CodeUnavailable      = "unavailable"
	CodeInternal         = "internal"
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

// errorBody is the JSON every error response carries.
type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code     string             `json:"code"`
	Message  string             `json:"message"`
	Problems []workflow.Problem `json:"problems,omitempty"`
}

// writeError writes err as the API's error body. Errors that are not an
// *apiError are internal: logged with the request, never shown to the client.
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
	writeJSON(w, ae.Status, errorBody{Error: errorDetail{Code: ae.Code, Message: ae.Message, Problems: ae.Problems}})
}

// writeJSON writes v as the response body with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // "<token>" reads better than "\u003ctoken\u003e"
	err := enc.Encode(v)
	body := buf.Bytes()
	if err != nil {
		// Only a bug gets here (every response type marshals).
		status = http.StatusInternalServerError
		body = []byte(`{"error":{"code":"internal","message":"internal error; the server logged it"}}` + "\n")
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(body)
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
