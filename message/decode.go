package message

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
)

// Message size limits (RFC 001 §11.1).
const (
	// MaxSize is the largest message accepted: RabbitMQ's default maximum.
	MaxSize = 10 << 20
	// WarnSize is the recommended ceiling; larger messages should keep big
	// payloads in object storage and pass references instead.
	WarnSize = 1 << 20
)

// ErrTooLarge is wrapped by the decode errors of messages over MaxSize, so a
// consumer can dead-letter them without retrying.
var ErrTooLarge = errors.New("message too large")

// SizeWarning reports whether a message of n bytes is over the recommended
// size, for callers that log a warning.
func SizeWarning(n int) bool { return n > WarnSize }

// DecodeExecution decodes and validates a NodeExecution.
func DecodeExecution(data []byte) (*NodeExecution, error) {
	return decode[NodeExecution](data, "NodeExecution", "execution_started_at")
}

// DecodeStatus decodes and validates a NodeStatus.
func DecodeStatus(data []byte) (*NodeStatus, error) {
	return decode[NodeStatus](data, "NodeStatus", "executed_at", "next_attempt_at", "resume_at")
}

// DecodeCompletion decodes and validates a Completion.
func DecodeCompletion(data []byte) (*Completion, error) {
	return decode[Completion](data, "Completion", "completed_at")
}

// DecodeTimeout decodes and validates a Timeout.
func DecodeTimeout(data []byte) (*Timeout, error) {
	return decode[Timeout](data, "Timeout", "deadline")
}

func decode[T any, P interface {
	*T
	Validate() error
}](data []byte, kind string, timeFields ...string) (*T, error) {
	if len(data) > MaxSize {
		return nil, fmt.Errorf("%w: %s message is %d bytes, over the limit of %d bytes (RFC 001 §11.1)", ErrTooLarge, kind, len(data), MaxSize)
	}
	if err := checkRaw(kind, data, messageDepth); err != nil {
		return nil, fmt.Errorf("invalid %s message: %w", kind, err)
	}
	var m T
	if fastUnmarshal(data, &m) != nil {
		m = *new(T) // the fast decode may have filled part of it
		if err := unmarshalStrict(data, &m); err != nil {
			return nil, fmt.Errorf("malformed %s message: %s", kind, describe(data, err, timeFields))
		}
	}
	if err := P(&m).Validate(); err != nil {
		return nil, err
	}
	return &m, nil
}

// fastOptions make fastUnmarshal refuse unknown fields, as unmarshalStrict
// does.
var fastOptions = jsonv2.RejectUnknownMembers(true)

// fastUnmarshal decodes data into v with the JSON v2 prototype, in one pass
// over data where encoding/json makes two: decoding was the largest share of
// a worker's and a follower's CPU. It is stricter than unmarshalStrict (names
// match exactly, a name appears once); where it fails, decode falls back on
// unmarshalStrict, which accepts what it accepted before this fast path or
// says what is wrong in encoding/json's words. So a message is accepted
// exactly when unmarshalStrict accepts it, with the same value
// (FuzzFastDecode checks it). A panic of the prototype is a failure too.
func fastUnmarshal(data []byte, v any) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("json v2 panicked: %v", p)
		}
	}()
	return jsonv2.Unmarshal(data, v, fastOptions)
}

// unmarshalStrict decodes one JSON value into v, refusing fields v does not
// have: a field this version does not know (a newer or forged message's
// "schema_version", say) is a message it cannot handle faithfully, to be
// dead-lettered rather than half-understood.
func unmarshalStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			var x any
			return json.Unmarshal(data, &x) // the syntax error, with its offset
		}
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("data after the message's JSON value")
	}
	return nil
}

// describe rewords encoding/json errors to say where the problem is.
func describe(data []byte, err error, timeFields []string) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("invalid JSON at byte %d: %v", se.Offset, err)
	case errors.As(err, &te) && te.Field != "":
		return fmt.Sprintf("field %s: want %s, got %s", te.Field, typeName(te.Type), te.Value)
	case errors.As(err, &te):
		return fmt.Sprintf("want a JSON object, got %s", te.Value)
	}
	// time.Time's errors do not name the field; find it.
	var fields map[string]json.RawMessage
	if json.Unmarshal(data, &fields) == nil {
		for _, f := range timeFields {
			var t *time.Time
			if raw, ok := fields[f]; ok && json.Unmarshal(raw, &t) != nil {
				return fmt.Sprintf("field %s: want an RFC 3339 time string such as \"2025-10-09T12:34:56Z\", got %s", f, short(string(raw)))
			}
		}
	}
	return err.Error()
}

func typeName(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == reflect.TypeFor[time.Time]():
		return "an RFC 3339 time string"
	case t.Kind() == reflect.String:
		return "a string"
	case t.Kind() == reflect.Bool:
		return "true or false"
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Uint64:
		return "a whole number within range"
	case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
		return "a number"
	case t.Kind() == reflect.Map || t.Kind() == reflect.Struct:
		return "an object"
	case t.Kind() == reflect.Slice:
		return "an array"
	}
	return t.String()
}
