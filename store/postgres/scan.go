package postgres

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rune-org/rune/store"
	"github.com/rune-org/rune/store/internal/sqlstore"
)

// Conversions between the store's types and the columns.

func orNow(t time.Time) time.Time {
	if t.IsZero() {
		t = time.Now()
	}
	return store.Micro(t)
}

func timeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// jsonValue encodes v for a json(b) column: nil (NULL) for an empty value.
func jsonValue(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil || string(b) == "null" || string(b) == "{}" || string(b) == "[]" {
		return nil
	}
	return b
}

func raw(b []byte) json.RawMessage {
	if b == nil {
		return nil
	}
	return json.RawMessage(b)
}

func decode(b []byte, v any) error {
	if b == nil {
		return nil
	}
	return json.Unmarshal(b, v)
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func scanWorkflow(row pgx.CollectableRow) (*store.Workflow, error) {
	var w store.Workflow
	var def []byte
	if err := row.Scan(&w.ID, &w.Version, &w.Name, &def, &w.CreatedAt, &w.DeletedAt); err != nil {
		return nil, err
	}
	w.Definition = raw(def)
	w.CreatedAt, w.DeletedAt = w.CreatedAt.UTC(), utc(w.DeletedAt)
	return &w, nil
}

func scanExecution(row pgx.CollectableRow) (*store.Execution, error) {
	var x store.Execution
	var input, cursor, vars, unfinished, completion []byte
	var key, claimedBy *string
	if err := row.Scan(&x.ID, &x.WorkflowID, &x.Version, &x.Status, &input, &key, &x.Trigger, &x.AvailableAt,
		&x.Attempts, &cursor, &vars, &unfinished, &completion, &x.CancelRequested, &claimedBy, &x.ClaimUntil,
		&x.DispatchedAt, &x.CreatedAt, &x.UpdatedAt, &x.FinishedAt); err != nil {
		return nil, err
	}
	x.Input, x.Completion = raw(input), raw(completion)
	if key != nil {
		x.IdempotencyKey = *key
	}
	if claimedBy != nil {
		x.ClaimedBy = *claimedBy
	}
	x.AvailableAt, x.CreatedAt, x.UpdatedAt = x.AvailableAt.UTC(), x.CreatedAt.UTC(), x.UpdatedAt.UTC()
	x.ClaimUntil, x.DispatchedAt, x.FinishedAt = utc(x.ClaimUntil), utc(x.DispatchedAt), utc(x.FinishedAt)
	if err := errors.Join(decode(cursor, &x.Cursor), decode(vars, &x.Vars), decode(unfinished, &x.Unfinished)); err != nil {
		return nil, err
	}
	return &x, nil
}

// executionColumns gives what AppendHistory changes in executions as the
// column arrays execution_history reads.
func executionColumns(xs []*store.Execution) []any {
	n := len(xs)
	ids, statuses := make([]string, n), make([]string, n)
	avail, updated := make([]time.Time, n), make([]time.Time, n)
	attempts := make([]int32, n)
	cursors, vars, unfinished, completions := make([][]byte, n), make([][]byte, n), make([][]byte, n), make([][]byte, n)
	finished := make([]*time.Time, n)
	for i, x := range xs {
		ids[i], statuses[i], avail[i], attempts[i] = x.ID, x.Status, x.AvailableAt, int32(x.Attempts)
		cursors[i], vars[i], unfinished[i] = jsonValue(x.Cursor), jsonValue(x.Vars), jsonValue(x.Unfinished)
		completions[i], updated[i], finished[i] = x.Completion, x.UpdatedAt, x.FinishedAt
	}
	return []any{ids, statuses, avail, attempts, jsonArray(cursors), jsonArray(vars), jsonArray(unfinished),
		jsonArray(completions), updated, finished}
}

// jsonArray passes JSON values (nil: NULL) for a json[] or jsonb[] parameter.
func jsonArray(vs [][]byte) []*string {
	out := make([]*string, len(vs))
	for i, v := range vs {
		if v != nil {
			s := string(v)
			out[i] = &s
		}
	}
	return out
}

func scanRun(row pgx.CollectableRow) (*store.NodeRun, error) {
	var r store.NodeRun
	var lineage, output, errJSON, details []byte
	if err := row.Scan(&r.ExecutionID, &r.NodeID, &r.Branch, &lineage, &r.Status, &r.Attempt, &output, &errJSON,
		&details, &r.StartedAt, &r.FinishedAt, &r.NextAttemptAt, &r.ResumeAt, &r.DurationMS, &r.ReportedAt, &r.UpdatedAt); err != nil {
		return nil, err
	}
	r.Output, r.Error, r.Details = raw(output), raw(errJSON), raw(details)
	r.StartedAt, r.FinishedAt, r.NextAttemptAt, r.ResumeAt = utc(r.StartedAt), utc(r.FinishedAt), utc(r.NextAttemptAt), utc(r.ResumeAt)
	r.ReportedAt, r.UpdatedAt = r.ReportedAt.UTC(), r.UpdatedAt.UTC()
	return &r, decode(lineage, &r.Lineage)
}

// runColumns gives runs as the column arrays run_upsert_many reads.
func runColumns(runs []*store.NodeRun) []any {
	n := len(runs)
	execs, nodes, branches, statuses := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	lineages, outputs, errs, details := make([][]byte, n), make([][]byte, n), make([][]byte, n), make([][]byte, n)
	attempts := make([]int32, n)
	started, finished, next, resume := make([]*time.Time, n), make([]*time.Time, n), make([]*time.Time, n), make([]*time.Time, n)
	durations := make([]int64, n)
	reported, updated := make([]time.Time, n), make([]time.Time, n)
	for i, r := range runs {
		execs[i], nodes[i], branches[i], statuses[i], attempts[i] = r.ExecutionID, r.NodeID, r.Branch, r.Status, int32(r.Attempt)
		lineages[i], outputs[i], errs[i], details[i] = jsonValue(r.Lineage), r.Output, r.Error, r.Details
		started[i], finished[i], next[i], resume[i] = r.StartedAt, r.FinishedAt, r.NextAttemptAt, r.ResumeAt
		durations[i], reported[i], updated[i] = r.DurationMS, r.ReportedAt, r.UpdatedAt
	}
	return []any{execs, nodes, branches, jsonArray(lineages), statuses, attempts, jsonArray(outputs), jsonArray(errs),
		jsonArray(details), started, finished, next, resume, durations, reported, updated}
}

func scanEvent(row pgx.CollectableRow) (store.Event, error) {
	var e store.Event
	var body []byte
	err := row.Scan(&e.ID, &e.ExecutionID, &e.Kind, &body, &e.At)
	e.Body, e.At = raw(body), e.At.UTC()
	return e, err
}

func scanCredential(row pgx.CollectableRow) (*store.Credential, error) {
	var c store.Credential
	if err := row.Scan(&c.Name, &c.Type, &c.KeyID, &c.Ciphertext, &c.CreatedAt, &c.UpdatedAt); err != nil {
		return nil, err
	}
	c.CreatedAt, c.UpdatedAt = c.CreatedAt.UTC(), c.UpdatedAt.UTC()
	return &c, nil
}

func scanToken(row pgx.CollectableRow) (*store.Token, error) {
	var t store.Token
	var scope string
	if err := row.Scan(&t.ID, &t.Name, &t.Prefix, &t.Hash, &t.CreatedAt, &t.RevokedAt, &t.Role, &scope, &t.ExpiresAt); err != nil {
		return nil, err
	}
	t.CreatedAt, t.RevokedAt, t.ExpiresAt = t.CreatedAt.UTC(), utc(t.RevokedAt), utc(t.ExpiresAt)
	t.Workflows = sqlstore.SplitScope(scope)
	return &t, nil
}

func scanAudit(row pgx.CollectableRow) (*store.AuditEntry, error) {
	var e store.AuditEntry
	var objects []byte
	if err := row.Scan(&e.ID, &e.At, &e.Actor, &e.Role, &e.Method, &e.Route, &objects, &e.Status); err != nil {
		return nil, err
	}
	e.At = e.At.UTC()
	return &e, json.Unmarshal(objects, &e.Objects)
}
