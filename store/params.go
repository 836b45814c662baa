package store

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// What the stores and their callers share: the bounds of lists, new ids,
// the format of page cursors and of token scopes. The drivers' own
// helpers (argument checks, pagination) are in store/internal/sqlstore.

// List limits.
const (
	// ListLimitDefault and ListLimitMax bound workflow and execution pages.
	ListLimitDefault = 50
	ListLimitMax     = 500
	// EventLimitDefault and EventLimitMax bound Events.
	EventLimitDefault = 500
	EventLimitMax     = 5000
)

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// NewID returns prefix followed by 20 random hex digits.
func NewID(prefix string) string {
	var b [10]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return prefix + hex.EncodeToString(b[:])
}

// SameJSON says whether a and b hold the same JSON value, whatever their
// key order and spacing (PostgreSQL's jsonb keeps neither).
func SameJSON(a, b json.RawMessage) bool {
	var va, vb any
	da, db := json.NewDecoder(bytes.NewReader(a)), json.NewDecoder(bytes.NewReader(b))
	da.UseNumber()
	db.UseNumber()
	return da.Decode(&va) == nil && db.Decode(&vb) == nil && reflect.DeepEqual(va, vb)
}

// PageCursor is the position after the last item of a page, newest first:
// its creation time and id.
type PageCursor struct {
	At time.Time
	ID string
}

// Encode returns c as an opaque string.
func (c PageCursor) Encode() string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(c.At.UnixMicro(), 10) + "|" + c.ID))
}

// DecodeCursor reads a cursor made by Encode; "" is the first page.
func DecodeCursor(s string) (PageCursor, error) {
	if s == "" {
		return PageCursor{}, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		at, id, ok := strings.Cut(string(b), "|")
		if n, perr := strconv.ParseInt(at, 10, 64); ok && perr == nil && id != "" {
			return PageCursor{At: time.UnixMicro(n).UTC(), ID: id}, nil
		}
	}
	return PageCursor{}, invalid("cursor: %q is not a cursor this store returned", s)
}

// DecodeWorkflowCursor reads a workflow list's cursor (the last id).
func DecodeWorkflowCursor(s string) (string, error) {
	if s == "" {
		return "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) == 0 {
		return "", invalid("cursor: %q is not a cursor this store returned", s)
	}
	return string(b), nil
}

// EncodeWorkflowCursor returns the cursor after workflow id.
func EncodeWorkflowCursor(id string) string { return base64.RawURLEncoding.EncodeToString([]byte(id)) }

// WorkflowCursor is the cursor of the workflow list after w.
func WorkflowCursor(w *Workflow) string { return EncodeWorkflowCursor(w.ID) }

// ExecutionCursor is the cursor of the execution list after x.
func ExecutionCursor(x *Execution) string { return PageCursor{At: x.CreatedAt, ID: x.ID}.Encode() }

// CheckScope checks one workflow scope pattern of a token: letters, digits,
// '.', '_', '-' and the wildcards '*' and '?', 1 to 128 characters, so the
// pattern means the same to every store and to the server.
func CheckScope(g string) error {
	if g == "" || len(g) > 128 {
		return fmt.Errorf("pattern %q: want 1 to 128 characters", g)
	}
	for _, c := range g {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("._-*?", c)) {
			return fmt.Errorf("pattern %q: %q is not allowed (letters, digits, '.', '_', '-', '*' and '?')", g, c)
		}
	}
	return nil
}
