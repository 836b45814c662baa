package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// readBody reads the whole body (within limit bytes: 413 above).
func readBody(r *http.Request, limit int64) ([]byte, error) {
	if r.Body == nil {
		return nil, nil
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(body)) > limit {
		return nil, errorf(http.StatusRequestEntityTooLarge, CodeTooLarge, "request body is over the limit of %d bytes", limit)
	}
	return body, nil
}

// decodeJSON decodes body into v strictly: one JSON value, no unknown
// fields. Errors say where the JSON is wrong.
func decodeJSON(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return errorf(http.StatusBadRequest, CodeInvalidJSON, "request body is empty; want a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	return trailing(body, dec.InputOffset())
}

// trailing rejects anything but white space after the JSON value that ends
// at offset (Decoder.More does not see a stray "}" or "]").
func trailing(body []byte, offset int64) error {
	if len(bytes.TrimSpace(body[offset:])) > 0 {
		return errorf(http.StatusBadRequest, CodeInvalidJSON, "request body has data after its JSON value (at byte %d)", offset)
	}
	return nil
}

// jsonError describes a decoding error for a client.
func jsonError(err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return errorf(http.StatusBadRequest, CodeInvalidJSON, "malformed JSON at byte %d: %v", se.Offset, se)
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			field = "(body)"
		}
		return errorf(http.StatusBadRequest, CodeInvalidJSON, "field %s: want %s, got JSON %s", field, te.Type, te.Value)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return errorf(http.StatusBadRequest, CodeInvalidJSON, "malformed JSON: unexpected end of the body")
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return err
	}
	return errorf(http.StatusBadRequest, CodeInvalidJSON, "malformed JSON: %v", err)
}

// validJSON checks that body is one JSON value (a trigger payload).
func validJSON(body []byte) error {
	var v any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return jsonError(err)
	}
	return trailing(body, dec.InputOffset())
}

// queryInt reads an integer query parameter (0 when absent).
func queryInt(r *http.Request, name string, min, max int) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < min || n > max {
		return 0, badRequest("query parameter %s: want an integer from %d to %d, got %q", name, min, max, v)
	}
	return n, nil
}

// queryTime reads an RFC 3339 query parameter (zero when absent).
func queryTime(r *http.Request, name string) (time.Time, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, badRequest("query parameter %s: want an RFC 3339 time such as 2026-01-02T15:04:05Z, got %q", name, v)
	}
	return t, nil
}

func limitText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return fmt.Sprintf("%s… (%d bytes)", s[:n], len(s))
}
