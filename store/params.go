package store

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Argument checks and defaults both implementations share, so they reject
// the same input with the same words.

// List limits.
const (
	// ListLimitDefault and ListLimitMax bound workflow and execution pages.
	ListLimitDefault = 50
	ListLimitMax     = 500
	// EventLimitDefault and EventLimitMax bound Events.
	EventLimitDefault = 500
	EventLimitMax     = 5000
)

// ListLimit returns l defaulted and capped for a page.
func ListLimit(l int) int {
	if l <= 0 {
		return ListLimitDefault
	}
	return min(l, ListLimitMax)
}

// EventLimit returns l defaulted and capped for Events.
func EventLimit(l int) int {
	if l <= 0 {
		return EventLimitDefault
	}
	return min(l, EventLimitMax)
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// NewID returns prefix followed by 20 random hex digits.
func NewID(prefix string) string {
	var b [10]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return prefix + hex.EncodeToString(b[:])
}

// CheckWorkflow validates in (update: the ID is required) and fills in its
// defaults: a generated ID on create, At = now.
func CheckWorkflow(in *WorkflowInput, update bool) error {
	if in.ID == "" {
		if update {
			return invalid("workflow id: missing")
		}
		in.ID = NewID("wf_")
	}
	if len(in.ID) > 128 {
		return invalid("workflow id: longer than 128 bytes")
	}
	if len(in.Definition) == 0 || !json.Valid(in.Definition) {
		return invalid("workflow %s: definition: not valid JSON", in.ID)
	}
	if in.At.IsZero() {
		in.At = time.Now()
	}
	in.At = Micro(in.At)
	return nil
}

// UpdateCheck applies an update's conditions (IfVersion, IfChanged) to the
// workflow's latest version number, read in the update's transaction, with
// get reading that version in the same transaction. A non-nil workflow is
// the answer when nothing is to be stored (the definition is unchanged).
func UpdateCheck(in *WorkflowInput, latest int, get func() (*Workflow, error)) (*Workflow, error) {
	if in.IfVersion > 0 && in.IfVersion != latest {
		return nil, fmt.Errorf("workflow %s: %w: the latest version is %d, not %d", in.ID, ErrPrecondition, latest, in.IfVersion)
	}
	if !in.IfChanged {
		return nil, nil
	}
	cur, err := get()
	if err != nil {
		return nil, err
	}
	if !SameJSON(cur.Definition, in.Definition) {
		return nil, nil
	}
	cur.Unchanged = true
	return cur, nil
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

// NewExecution validates in and returns the execution it enqueues.
func NewExecution(in ExecutionInput) (*Execution, error) {
	switch {
	case in.ID == "":
		return nil, invalid("execution id: missing")
	case len(in.ID) > 128:
		return nil, invalid("execution id: longer than 128 bytes")
	case in.WorkflowID == "":
		return nil, invalid("execution %s: workflow id: missing", in.ID)
	case in.Version < 0:
		return nil, invalid("execution %s: version: %d is negative", in.ID, in.Version)
	case len(in.Input) > 0 && !json.Valid(in.Input):
		return nil, invalid("execution %s: input: not valid JSON", in.ID)
	case len(in.IdempotencyKey) > 255:
		return nil, invalid("execution %s: idempotency key: longer than 255 bytes", in.ID)
	}
	if in.At.IsZero() {
		in.At = time.Now()
	}
	if in.AvailableAt.IsZero() {
		in.AvailableAt = in.At
	}
	if len(in.Input) == 0 {
		in.Input = json.RawMessage("{}")
	}
	return &Execution{ID: in.ID, WorkflowID: in.WorkflowID, Version: in.Version, Status: StatusEnqueued,
		Input: in.Input, IdempotencyKey: in.IdempotencyKey, Trigger: in.Trigger, AvailableAt: Micro(in.AvailableAt),
		Attempts: 1, CreatedAt: Micro(in.At), UpdatedAt: Micro(in.At)}, nil
}

// CheckClaim validates c and fills in its defaults (Now: now).
func CheckClaim(c *Claim) error {
	switch {
	case c.Owner == "":
		return invalid("claim owner: missing")
	case c.Lease <= 0:
		return invalid("claim lease: %v is not positive", c.Lease)
	case c.Limit <= 0:
		return invalid("claim limit: %d is not positive", c.Limit)
	}
	if c.Now.IsZero() {
		c.Now = time.Now()
	}
	c.Now = Micro(c.Now)
	return nil
}

// CheckCredential validates c.
func CheckCredential(c *Credential) error {
	switch {
	case c.Name == "":
		return invalid("credential name: missing")
	case len(c.Ciphertext) == 0:
		return invalid("credential %s: ciphertext: missing", c.Name)
	case c.KeyID == "":
		return invalid("credential %s: key id: missing", c.Name)
	}
	stamp(&c.CreatedAt, &c.UpdatedAt)
	return nil
}

// CheckToken validates t and fills in its defaults (ID, CreatedAt).
func CheckToken(t *Token) error {
	switch {
	case t.Name == "":
		return invalid("token name: missing")
	case len(t.Hash) == 0:
		return invalid("token %s: hash: missing", t.Name)
	}
	if t.Role == "" {
		t.Role = RoleAdmin
	}
	if !slices.Contains(Roles, t.Role) {
		return invalid("token %s: role %q: want one of %s", t.Name, t.Role, strings.Join(Roles, ", "))
	}
	for _, g := range t.Workflows {
		if err := CheckScope(g); err != nil {
			return invalid("token %s: workflows: %v", t.Name, err)
		}
	}
	if t.ExpiresAt != nil {
		e := Micro(*t.ExpiresAt)
		t.ExpiresAt = &e
	}
	if t.ID == "" {
		t.ID = NewID("tok_")
	}
	t.CreatedAt = Micro(orNow(t.CreatedAt))
	return nil
}

// CheckSession validates a session to store and truncates its times to
// the stores' precision.
func CheckSession(s *Session) error {
	switch {
	case len(s.Hash) == 0:
		return invalid("session: hash: missing")
	case s.TokenID == "":
		return invalid("session: token id: missing")
	}
	s.CreatedAt = Micro(orNow(s.CreatedAt))
	s.ExpiresAt = Micro(s.ExpiresAt)
	if !s.ExpiresAt.After(s.CreatedAt) {
		return invalid("session: expires at %s, not after its creation at %s", s.ExpiresAt.Format(time.RFC3339), s.CreatedAt.Format(time.RFC3339))
	}
	return nil
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

// Cancel applies a cancel at at to x: an enqueued execution is cancelled at
// once; a processing or waiting one is marked CancelRequested (its
// completion, halted, then makes it cancelled). It returns the change to
// record ("" when a cancel was already requested) and false when x has ended.
func Cancel(x *Execution, at time.Time) (change string, ok bool) {
	switch {
	case Final(x.Status):
		return "", false
	case x.CancelRequested:
		return "", true
	case x.Status == StatusEnqueued:
		x.Status = StatusCancelled
		x.CancelRequested = true
		x.FinishedAt = timePtr(at)
		x.UpdatedAt = Micro(at)
		return ChangeCancelled, true
	}
	x.CancelRequested = true
	x.UpdatedAt = Micro(at)
	return ChangeCancelRequested, true
}

// CheckExecutionFilter validates f's status, so that a misspelt one is an
// error rather than an empty list.
func CheckExecutionFilter(f ExecutionFilter) error {
	switch f.Status {
	case "", StatusEnqueued, StatusProcessing, StatusWaiting, StatusCompleted, StatusFailed, StatusHalted, StatusCancelled:
		return nil
	}
	return invalid("status: %q is not an execution status (enqueued, processing, waiting, completed, failed, halted, cancelled)", f.Status)
}

// PageOf makes a page of items read with limit+1 rows: the extra row says
// there is a next page, whose cursor is next of the page's last item.
func PageOf[T any](items []T, limit int, next func(last T) string) Page[T] {
	if len(items) <= limit {
		return Page[T]{Items: items}
	}
	items = items[:limit]
	return Page[T]{Items: items, Next: next(items[limit-1])}
}

// WorkflowCursor is the cursor of the workflow list after w.
func WorkflowCursor(w *Workflow) string { return EncodeWorkflowCursor(w.ID) }

// ExecutionCursor is the cursor of the execution list after x.
func ExecutionCursor(x *Execution) string { return PageCursor{At: x.CreatedAt, ID: x.ID}.Encode() }

// NotMarked returns the ids of want missing from got, in want's order
// (MarkDispatchedAll's answer from the ids a write returned).
func NotMarked(want, got []string) []string {
	seen := make(map[string]bool, len(got))
	for _, id := range got {
		seen[id] = true
	}
	var missing []string
	for _, id := range want {
		if !seen[id] {
			missing = append(missing, id)
		}
	}
	return missing
}

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

// SplitScope reads a token's stored scope (patterns joined by commas).
func SplitScope(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// CheckAudit validates an audit entry before it is stored.
func CheckAudit(e *AuditEntry) error {
	switch {
	case e.Method == "" || e.Route == "":
		return invalid("audit entry: method and route: missing")
	case e.Status < 100 || e.Status > 599:
		return invalid("audit entry: status %d: want an HTTP status", e.Status)
	}
	e.At = Micro(orNow(e.At))
	return nil
}

// AuditCursor reads an audit page's cursor: the id of the last entry shown
// (0 for the first page).
func AuditCursor(c string) (int64, error) {
	if c == "" {
		return 1<<63 - 1, nil
	}
	id, err := strconv.ParseInt(c, 10, 64)
	if err != nil || id <= 0 {
		return 0, invalid("cursor %q: want the next_cursor of the previous page", c)
	}
	return id, nil
}

// AuditPage makes a page of entries read with limit+1 rows: the extra row
// only says there is a next page.
func AuditPage(es []*AuditEntry, limit int) Page[*AuditEntry] {
	p := Page[*AuditEntry]{Items: es}
	if len(es) > limit {
		p.Items = es[:limit]
		p.Next = strconv.FormatInt(es[limit-1].ID, 10)
	}
	if p.Items == nil {
		p.Items = []*AuditEntry{}
	}
	return p
}

// VersionCursor is the cursor of a version list after w.
func VersionCursor(w *Workflow) string { return strconv.Itoa(w.Version) }

// ParseVersionCursor reads a version list's cursor: the versions listed
// next are below it.
func ParseVersionCursor(c string) (int, error) {
	if c == "" {
		return 1<<31 - 1, nil
	}
	v, err := strconv.Atoi(c)
	if err != nil || v < 1 {
		return 0, invalid("cursor %q: want the next_cursor of the previous page", c)
	}
	return v, nil
}

// VersionsPage makes a page of versions read with limit+1 rows, with their
// definitions dropped, or ErrNotFound when the first page is empty.
func VersionsPage(id, cursor string, ws []*Workflow, limit int) (Page[*Workflow], error) {
	if len(ws) == 0 && cursor == "" {
		return Page[*Workflow]{}, fmt.Errorf("workflow %s: %w", id, ErrNotFound)
	}
	for _, w := range ws {
		w.Definition = nil
	}
	p := PageOf(ws, limit, VersionCursor)
	if p.Items == nil {
		p.Items = []*Workflow{}
	}
	return p, nil
}
