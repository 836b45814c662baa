package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"github.com/rune-org/rune/store"
	"github.com/rune-org/rune/store/internal/sqlstore"
)

// Conversions between the store's types and SQLite's columns: times as
// INTEGER microseconds, JSON as TEXT.

func micros(t time.Time) int64 { return t.UnixMicro() }

func microsOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMicro()
}

func microsPtr(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UnixMicro()
}

func orNow(t time.Time) time.Time {
	if t.IsZero() {
		t = time.Now()
	}
	return store.Micro(t)
}

func timeOf(n int64) time.Time { return time.UnixMicro(n).UTC() }

func timePtrOf(n sql.NullInt64) *time.Time {
	if !n.Valid {
		return nil
	}
	t := timeOf(n.Int64)
	return &t
}

// jsonText encodes v as TEXT (NULL for an empty value).
func jsonText(v any) any {
	b, err := json.Marshal(v)
	if err != nil || string(b) == "null" || string(b) == "{}" || string(b) == "[]" {
		return nil
	}
	return string(b)
}

func rawText(r json.RawMessage) any {
	if len(r) == 0 {
		return nil
	}
	return string(r)
}

func rawOf(s sql.NullString) json.RawMessage {
	if !s.Valid {
		return nil
	}
	return json.RawMessage(s.String)
}

func decode(s sql.NullString, v any) error {
	if !s.Valid {
		return nil
	}
	return json.Unmarshal([]byte(s.String), v)
}

type scanner interface{ Scan(dest ...any) error }

type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

func queryAll[T any](ctx context.Context, q querier, scan func(scanner) (T, error), query string, args ...any) ([]T, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			rows.Close()
			return nil, err
		}
		out = append(out, v)
	}
	return out, errors.Join(rows.Err(), rows.Close())
}

func scanWorkflow(s scanner) (*store.Workflow, error) {
	var w store.Workflow
	var def string
	var created int64
	var deleted sql.NullInt64
	if err := s.Scan(&w.ID, &w.Version, &w.Name, &def, &created, &deleted); err != nil {
		return nil, err
	}
	w.Definition = json.RawMessage(def)
	w.CreatedAt = timeOf(created)
	w.DeletedAt = timePtrOf(deleted)
	return &w, nil
}

func executionArgs(x *store.Execution) []any {
	var key any
	if x.IdempotencyKey != "" {
		key = x.IdempotencyKey
	}
	var claimedBy any
	if x.ClaimedBy != "" {
		claimedBy = x.ClaimedBy
	}
	return []any{x.ID, x.WorkflowID, x.Version, x.Status, string(x.Input), key, x.Trigger, micros(x.AvailableAt),
		x.Attempts, jsonText(x.Cursor), jsonText(x.Vars), jsonText(x.Unfinished), rawText(x.Completion),
		x.CancelRequested, claimedBy, microsPtr(x.ClaimUntil), microsPtr(x.DispatchedAt), micros(x.CreatedAt),
		micros(x.UpdatedAt), microsPtr(x.FinishedAt)}
}

func scanExecution(s scanner) (*store.Execution, error) {
	var x store.Execution
	var input string
	var key, cursor, vars, unfinished, completion, claimedBy sql.NullString
	var avail, created, updated int64
	var claimUntil, dispatched, finished sql.NullInt64
	if err := s.Scan(&x.ID, &x.WorkflowID, &x.Version, &x.Status, &input, &key, &x.Trigger, &avail, &x.Attempts,
		&cursor, &vars, &unfinished, &completion, &x.CancelRequested, &claimedBy, &claimUntil, &dispatched,
		&created, &updated, &finished); err != nil {
		return nil, err
	}
	x.Input = json.RawMessage(input)
	x.IdempotencyKey = key.String
	x.ClaimedBy = claimedBy.String
	x.AvailableAt, x.CreatedAt, x.UpdatedAt = timeOf(avail), timeOf(created), timeOf(updated)
	x.ClaimUntil, x.DispatchedAt, x.FinishedAt = timePtrOf(claimUntil), timePtrOf(dispatched), timePtrOf(finished)
	x.Completion = rawOf(completion)
	if err := errors.Join(decode(cursor, &x.Cursor), decode(vars, &x.Vars), decode(unfinished, &x.Unfinished)); err != nil {
		return nil, err
	}
	return &x, nil
}

func scanRun(s scanner) (*store.NodeRun, error) {
	var r store.NodeRun
	var lineage, output, errText, details sql.NullString
	var started, finished, next, resume sql.NullInt64
	var reported, updated int64
	if err := s.Scan(&r.ExecutionID, &r.NodeID, &r.Branch, &lineage, &r.Status, &r.Attempt, &output, &errText,
		&details, &started, &finished, &next, &resume, &r.DurationMS, &reported, &updated); err != nil {
		return nil, err
	}
	r.Output, r.Error, r.Details = rawOf(output), rawOf(errText), rawOf(details)
	r.StartedAt, r.FinishedAt, r.NextAttemptAt, r.ResumeAt = timePtrOf(started), timePtrOf(finished), timePtrOf(next), timePtrOf(resume)
	r.ReportedAt, r.UpdatedAt = timeOf(reported), timeOf(updated)
	return &r, decode(lineage, &r.Lineage)
}

func scanEvent(s scanner) (store.Event, error) {
	var e store.Event
	var body string
	var at int64
	if err := s.Scan(&e.ID, &e.ExecutionID, &e.Kind, &body, &at); err != nil {
		return e, err
	}
	e.Body, e.At = json.RawMessage(body), timeOf(at)
	return e, nil
}

func scanCredential(s scanner) (*store.Credential, error) {
	var c store.Credential
	var created, updated int64
	if err := s.Scan(&c.Name, &c.Type, &c.KeyID, &c.Ciphertext, &created, &updated); err != nil {
		return nil, err
	}
	c.CreatedAt, c.UpdatedAt = timeOf(created), timeOf(updated)
	return &c, nil
}

func scanToken(s scanner) (*store.Token, error) {
	var t store.Token
	var created int64
	var revoked, expires sql.NullInt64
	var scope string
	if err := s.Scan(&t.ID, &t.Name, &t.Prefix, &t.Hash, &created, &revoked, &t.Role, &scope, &expires); err != nil {
		return nil, err
	}
	t.CreatedAt, t.RevokedAt, t.ExpiresAt = timeOf(created), timePtrOf(revoked), timePtrOf(expires)
	t.Workflows = sqlstore.SplitScope(scope)
	return &t, nil
}

func scanAudit(s scanner) (*store.AuditEntry, error) {
	var e store.AuditEntry
	var at int64
	var objects string
	if err := s.Scan(&e.ID, &at, &e.Actor, &e.Role, &e.Method, &e.Route, &objects, &e.Status); err != nil {
		return nil, err
	}
	e.At = timeOf(at)
	return &e, json.Unmarshal([]byte(objects), &e.Objects)
}
