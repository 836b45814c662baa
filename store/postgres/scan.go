package postgres

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rune-org/rune/store"
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

func executionArgs(x *store.Execution) []any {
	return []any{x.ID, x.WorkflowID, x.Version, x.Status, []byte(x.Input), nonEmpty(x.IdempotencyKey), x.Trigger,
		x.AvailableAt, x.Attempts, jsonValue(x.Cursor), jsonValue(x.Vars), jsonValue(x.Unfinished), []byte(x.Completion),
		x.CancelRequested, nonEmpty(x.ClaimedBy), x.ClaimUntil, x.DispatchedAt, x.CreatedAt, x.UpdatedAt, x.FinishedAt}
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

// executionRows encodes what AppendHistory changes in executions as the
// JSON array execution_history reads.
func executionRows(xs []*store.Execution) (string, error) {
	type row struct {
		ID          string                     `json:"id"`
		Status      string                     `json:"status"`
		AvailableAt time.Time                  `json:"available_at"`
		Attempts    int                        `json:"attempts"`
		Cursor      []string                   `json:"cursor"`
		Vars        map[string]json.RawMessage `json:"vars"`
		Unfinished  map[string]map[string]int  `json:"unfinished"`
		Completion  json.RawMessage            `json:"completion"`
		UpdatedAt   time.Time                  `json:"updated_at"`
		FinishedAt  *time.Time                 `json:"finished_at"`
	}
	rows := make([]row, len(xs))
	for i, x := range xs {
		rows[i] = row{x.ID, x.Status, x.AvailableAt, x.Attempts, x.Cursor, x.Vars, x.Unfinished, x.Completion, x.UpdatedAt, x.FinishedAt}
		if len(x.Cursor) == 0 {
			rows[i].Cursor = nil
		}
		if len(x.Vars) == 0 {
			rows[i].Vars = nil
		}
		if len(x.Unfinished) == 0 {
			rows[i].Unfinished = nil
		}
	}
	b, err := json.Marshal(rows)
	return string(b), err
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

// runRows encodes runs as the JSON array run_upsert_many reads.
func runRows(runs []*store.NodeRun) (string, error) {
	type row struct {
		ExecutionID   string          `json:"execution_id"`
		NodeID        string          `json:"node_id"`
		Branch        string          `json:"branch"`
		Lineage       any             `json:"lineage"`
		Status        string          `json:"status"`
		Attempt       int             `json:"attempt"`
		Output        json.RawMessage `json:"output"`
		Error         json.RawMessage `json:"error"`
		Details       json.RawMessage `json:"details"`
		StartedAt     *time.Time      `json:"started_at"`
		FinishedAt    *time.Time      `json:"finished_at"`
		NextAttemptAt *time.Time      `json:"next_attempt_at"`
		ResumeAt      *time.Time      `json:"resume_at"`
		DurationMS    int64           `json:"duration_ms"`
		ReportedAt    time.Time       `json:"reported_at"`
		UpdatedAt     time.Time       `json:"updated_at"`
	}
	rows := make([]row, len(runs))
	for i, r := range runs {
		rows[i] = row{r.ExecutionID, r.NodeID, r.Branch, nil, r.Status, r.Attempt, r.Output, r.Error, r.Details,
			r.StartedAt, r.FinishedAt, r.NextAttemptAt, r.ResumeAt, r.DurationMS, r.ReportedAt, r.UpdatedAt}
		if len(r.Lineage) > 0 {
			rows[i].Lineage = r.Lineage
		}
	}
	b, err := json.Marshal(rows)
	return string(b), err
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
	if err := row.Scan(&t.ID, &t.Name, &t.Prefix, &t.Hash, &t.CreatedAt, &t.RevokedAt); err != nil {
		return nil, err
	}
	t.CreatedAt, t.RevokedAt = t.CreatedAt.UTC(), utc(t.RevokedAt)
	return &t, nil
}
