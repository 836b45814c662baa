// Package sqlstore holds what the SQL stores (store/sqlite,
// store/postgres) share beyond the store.Store contract: the checks and
// defaults of their arguments, so that both reject the same input with the
// same words, the pagination of their lists, and the steps of their
// operations that do not depend on the database.
package sqlstore

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rune-org/rune/store"
)

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", store.ErrInvalid, fmt.Sprintf(format, args...))
}

func timePtr(t time.Time) *time.Time {
	t = store.Micro(t)
	return &t
}

// ListLimit returns l defaulted and capped for a page.
func ListLimit(l int) int {
	if l <= 0 {
		return store.ListLimitDefault
	}
	return min(l, store.ListLimitMax)
}

// EventLimit returns l defaulted and capped for Events.
func EventLimit(l int) int {
	if l <= 0 {
		return store.EventLimitDefault
	}
	return min(l, store.EventLimitMax)
}

// UpdateCheck applies an update's conditions (IfVersion, IfChanged) to the
// workflow's latest version number, read in the update's transaction, with
// get reading that version in the same transaction. A non-nil workflow is
// the answer when nothing is to be stored (the definition is unchanged).
func UpdateCheck(in *store.WorkflowInput, latest int, get func() (*store.Workflow, error)) (*store.Workflow, error) {
	if in.IfVersion > 0 && in.IfVersion != latest {
		return nil, fmt.Errorf("workflow %s: %w: the latest version is %d, not %d", in.ID, store.ErrPrecondition, latest, in.IfVersion)
	}
	if !in.IfChanged {
		return nil, nil
	}
	cur, err := get()
	if err != nil {
		return nil, err
	}
	if !store.SameJSON(cur.Definition, in.Definition) {
		return nil, nil
	}
	cur.Unchanged = true
	return cur, nil
}

// CheckWorkflow validates in (update: the ID is required) and fills in its
// defaults: a generated ID on create, At = now.
func CheckWorkflow(in *store.WorkflowInput, update bool) error {
	if in.ID == "" {
		if update {
			return invalid("workflow id: missing")
		}
		in.ID = store.NewID("wf_")
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
	in.At = store.Micro(in.At)
	return nil
}

// NewExecution validates in and returns the execution it enqueues.
func NewExecution(in store.ExecutionInput) (*store.Execution, error) {
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
	return &store.Execution{ID: in.ID, WorkflowID: in.WorkflowID, Version: in.Version, Status: store.StatusEnqueued,
		Input: in.Input, IdempotencyKey: in.IdempotencyKey, Trigger: in.Trigger, AvailableAt: store.Micro(in.AvailableAt),
		Attempts: 1, CreatedAt: store.Micro(in.At), UpdatedAt: store.Micro(in.At)}, nil
}

// CheckClaim validates c and fills in its defaults (Now: now).
func CheckClaim(c *store.Claim) error {
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
	c.Now = store.Micro(c.Now)
	return nil
}

// CheckCredential validates c.
func CheckCredential(c *store.Credential) error {
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
func CheckToken(t *store.Token) error {
	switch {
	case t.Name == "":
		return invalid("token name: missing")
	case len(t.Hash) == 0:
		return invalid("token %s: hash: missing", t.Name)
	}
	if t.Role == "" {
		t.Role = store.RoleAdmin
	}
	if !slices.Contains(store.Roles, t.Role) {
		return invalid("token %s: role %q: want one of %s", t.Name, t.Role, strings.Join(store.Roles, ", "))
	}
	for _, g := range t.Workflows {
		if err := store.CheckScope(g); err != nil {
			return invalid("token %s: workflows: %v", t.Name, err)
		}
	}
	if t.ExpiresAt != nil {
		e := store.Micro(*t.ExpiresAt)
		t.ExpiresAt = &e
	}
	if t.ID == "" {
		t.ID = store.NewID("tok_")
	}
	t.CreatedAt = store.Micro(orNow(t.CreatedAt))
	return nil
}

// CheckSession validates a session to store and truncates its times to
// the stores' precision.
func CheckSession(s *store.Session) error {
	switch {
	case len(s.Hash) == 0:
		return invalid("session: hash: missing")
	case s.TokenID == "":
		return invalid("session: token id: missing")
	}
	s.CreatedAt = store.Micro(orNow(s.CreatedAt))
	s.ExpiresAt = store.Micro(s.ExpiresAt)
	if !s.ExpiresAt.After(s.CreatedAt) {
		return invalid("session: expires at %s, not after its creation at %s", s.ExpiresAt.Format(time.RFC3339), s.CreatedAt.Format(time.RFC3339))
	}
	return nil
}

// Cancel applies a cancel at at to x: an enqueued execution is cancelled at
// once; a processing or waiting one is marked CancelRequested (its
// completion, halted, then makes it cancelled). It returns the change to
// record ("" when a cancel was already requested) and false when x has ended.
func Cancel(x *store.Execution, at time.Time) (change string, ok bool) {
	switch {
	case store.Final(x.Status):
		return "", false
	case x.CancelRequested:
		return "", true
	case x.Status == store.StatusEnqueued:
		x.Status = store.StatusCancelled
		x.CancelRequested = true
		x.FinishedAt = timePtr(at)
		x.UpdatedAt = store.Micro(at)
		return store.ChangeCancelled, true
	}
	x.CancelRequested = true
	x.UpdatedAt = store.Micro(at)
	return store.ChangeCancelRequested, true
}

// CheckExecutionFilter validates f's status, so that a misspelt one is an
// error rather than an empty list.
func CheckExecutionFilter(f store.ExecutionFilter) error {
	switch f.Status {
	case "", store.StatusEnqueued, store.StatusProcessing, store.StatusWaiting, store.StatusCompleted, store.StatusFailed, store.StatusHalted, store.StatusCancelled:
		return nil
	}
	return invalid("status: %q is not an execution status (enqueued, processing, waiting, completed, failed, halted, cancelled)", f.Status)
}

// PageOf makes a page of items read with limit+1 rows: the extra row says
// there is a next page, whose cursor is next of the page's last item.
func PageOf[T any](items []T, limit int, next func(last T) string) store.Page[T] {
	if len(items) <= limit {
		return store.Page[T]{Items: items}
	}
	items = items[:limit]
	return store.Page[T]{Items: items, Next: next(items[limit-1])}
}

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

// SplitScope reads a token's stored scope (patterns joined by commas).
func SplitScope(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// CheckAudit validates an audit entry before it is stored.
func CheckAudit(e *store.AuditEntry) error {
	switch {
	case e.Method == "" || e.Route == "":
		return invalid("audit entry: method and route: missing")
	case e.Status < 100 || e.Status > 599:
		return invalid("audit entry: status %d: want an HTTP status", e.Status)
	}
	e.At = store.Micro(orNow(e.At))
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
func AuditPage(es []*store.AuditEntry, limit int) store.Page[*store.AuditEntry] {
	p := store.Page[*store.AuditEntry]{Items: es}
	if len(es) > limit {
		p.Items = es[:limit]
		p.Next = strconv.FormatInt(es[limit-1].ID, 10)
	}
	if p.Items == nil {
		p.Items = []*store.AuditEntry{}
	}
	return p
}

// VersionCursor is the cursor of a version list after w.
func VersionCursor(w *store.Workflow) string { return strconv.Itoa(w.Version) }

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
func VersionsPage(id, cursor string, ws []*store.Workflow, limit int) (store.Page[*store.Workflow], error) {
	if len(ws) == 0 && cursor == "" {
		return store.Page[*store.Workflow]{}, fmt.Errorf("workflow %s: %w", id, store.ErrNotFound)
	}
	for _, w := range ws {
		w.Definition = nil
	}
	p := PageOf(ws, limit, VersionCursor)
	if p.Items == nil {
		p.Items = []*store.Workflow{}
	}
	return p, nil
}

// CheckHook validates h and fills in its times.
func CheckHook(h *store.Hook) error {
	switch {
	case h.ID == "":
		return invalid("hook id: missing")
	case h.WorkflowID == "":
		return invalid("hook %s: workflow id: missing", h.ID)
	case len(h.SecretHash) == 0:
		return invalid("hook %s: secret hash: missing", h.ID)
	case len(h.Settings) > 0 && !json.Valid(h.Settings):
		return invalid("hook %s: settings: not valid JSON", h.ID)
	}
	stamp(&h.CreatedAt, &h.UpdatedAt)
	return nil
}

// CheckSchedule validates sc and fills in its times.
func CheckSchedule(sc *store.Schedule) error {
	switch {
	case sc.ID == "":
		return invalid("schedule id: missing")
	case sc.WorkflowID == "":
		return invalid("schedule %s: workflow id: missing", sc.ID)
	case len(sc.Settings) > 0 && !json.Valid(sc.Settings):
		return invalid("schedule %s: settings: not valid JSON", sc.ID)
	}
	stamp(&sc.CreatedAt, &sc.UpdatedAt)
	sc.NextAt, sc.LastSlot = microPtr(sc.NextAt), microPtr(sc.LastSlot)
	return nil
}

// CheckFire validates f and returns the executions it enqueues.
func CheckFire(f *store.Fire) ([]*store.Execution, error) {
	if f.ScheduleID == "" {
		return nil, invalid("fire: schedule id: missing")
	}
	f.At = store.Micro(orNow(f.At))
	f.From, f.LastSlot, f.Next = store.Micro(f.From), store.Micro(f.LastSlot), microPtr(f.Next)
	xs := make([]*store.Execution, 0, len(f.Executions))
	for _, in := range f.Executions {
		if in.IdempotencyKey == "" {
			return nil, invalid("fire %s: execution %s: idempotency key: missing (the slot)", f.ScheduleID, in.ID)
		}
		if in.At.IsZero() {
			in.At = f.At
		}
		x, err := NewExecution(in)
		if err != nil {
			return nil, err
		}
		xs = append(xs, x)
	}
	return xs, nil
}

func orNow(t time.Time) time.Time {
	if t.IsZero() {
		return time.Now()
	}
	return t
}

// stamp fills in a stored record's times: updated defaults to now, created
// to updated, both to the microsecond that the stores keep.
func stamp(created, updated *time.Time) {
	*updated = store.Micro(orNow(*updated))
	if created.IsZero() {
		*created = *updated
	}
	*created = store.Micro(*created)
}

// SlotTaken is FireSchedule's error when f's slot was fired by another
// server, or the schedule was paused or changed since it was read.
func SlotTaken(f store.Fire) error {
	return fmt.Errorf("schedule %s slot %s: %w: fired by another server, paused or changed", f.ScheduleID,
		f.From.Format(time.RFC3339Nano), store.ErrConflict)
}

func microPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	m := store.Micro(*t)
	return &m
}

// ChangeEvent returns the "execution" event recording change of x at at.
func ChangeEvent(x *store.Execution, change string, at time.Time) store.Event {
	body, _ := json.Marshal(store.ExecutionChange{Change: change, ExecutionID: x.ID, WorkflowID: x.WorkflowID,
		Version: x.Version, Status: x.Status, AvailableAt: x.AvailableAt, At: at})
	return store.Event{ExecutionID: x.ID, Kind: "execution", Body: body, At: at}
}
