// Package sqlite implements store.Store on an embedded SQLite file
// (modernc.org/sqlite, pure Go): the embedded `rune server`'s database.
//
// One process uses a file at a time. Writes go through a single connection
// (so a claim is trivially atomic and event ids ascend in commit order);
// reads use a small pool of their own, which WAL lets run beside the writer.
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/rune-org/rune/internal/sqlitedb"
	"github.com/rune-org/rune/store"
	"github.com/rune-org/rune/store/internal/sqlstore"
	"github.com/rune-org/rune/store/migrate"
	"github.com/rune-org/rune/store/sqlfile"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

//go:embed migrations/*.sql
var migrations embed.FS

//go:embed queries.sql
var queriesSQL string

var queries = sqlfile.MustParse(queriesSQL)

// BusyTimeout is how long a statement waits for a lock held by another
// connection before it fails.
const BusyTimeout = 10 * time.Second

// ReadConns is the size of the read pool.
const ReadConns = 4

// Store is a store.Store on one SQLite file.
type Store struct {
	w, r *sql.DB
	path string
	// hot holds AppendHistory's statements, prepared once on the writer
	// connection: parsing them per call was a third of its time.
	hot map[string]*sql.Stmt
}

var hotQueries = []string{"history_executions", "history_runs", "history_recorded", "run_upsert", "execution_history", "event_insert"}

var _ store.Store = (*Store)(nil)

// Open opens (creating it when missing) the database file at path and
// applies its migrations.
func Open(ctx context.Context, path string) (*Store, error) {
	if path == "" {
		return nil, fmt.Errorf("sqlite: %w: path: missing", store.ErrInvalid)
	}
	dsn := func(extra string) string {
		return "file:" + (&url.URL{Path: path}).EscapedPath() + "?_pragma=busy_timeout(" +
			fmt.Sprint(BusyTimeout.Milliseconds()) + ")&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)" +
			"&_pragma=foreign_keys(ON)&_txlock=immediate" + extra
	}
	w, err := sql.Open("sqlite", dsn(""))
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetConnMaxIdleTime(0)
	s := &Store{w: w, path: path}
	if err := sqlitedb.Ping(ctx, w, BusyTimeout); err != nil {
		w.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	ms, err := migrate.Load(migrations, "migrations")
	if err != nil {
		w.Close()
		return nil, err
	}
	if _, err := migrate.Run(ctx, target{w}, ms); err != nil {
		w.Close()
		return nil, fmt.Errorf("sqlite: %s: %w", path, err)
	}
	s.hot = map[string]*sql.Stmt{}
	for _, name := range hotQueries {
		if s.hot[name], err = w.PrepareContext(ctx, queries[name]); err != nil {
			w.Close()
			return nil, fmt.Errorf("sqlite: prepare %s: %w", name, err)
		}
	}
	s.r, err = sql.Open("sqlite", dsn("&_pragma=query_only(ON)"))
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	s.r.SetMaxOpenConns(ReadConns)
	return s, nil
}

// Path is the database file's path.
func (s *Store) Path() string { return s.path }

// Close closes both pools.
func (s *Store) Close() error {
	var errs []error
	for _, st := range s.hot {
		errs = append(errs, st.Close())
	}
	return errors.Join(append(errs, s.r.Close(), s.w.Close())...)
}

// target migrates through the writer connection: BEGIN IMMEDIATE takes the
// file's write lock, so a second process waits and then sees the version rows.
type target struct{ db *sql.DB }

func (t target) Lock(context.Context) (func(), error) { return func() {}, nil }

func (t target) Applied(ctx context.Context) ([]int, error) {
	if _, err := t.db.ExecContext(ctx, queries["migrations_table"]); err != nil {
		return nil, err
	}
	rows, err := t.db.QueryContext(ctx, queries["migrations_applied"])
	if err != nil {
		return nil, err
	}
	var vs []int
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			rows.Close()
			return nil, err
		}
		vs = append(vs, v)
	}
	return vs, errors.Join(rows.Err(), rows.Close())
}

func (t target) Apply(ctx context.Context, m migrate.Migration) error {
	return inTx(ctx, t.db, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, queries["migration_count"], m.Version).Scan(&n); err != nil || n > 0 {
			return err // applied meanwhile by another process
		}
		if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, queries["migration_record"], m.Version, time.Now().UnixMicro())
		return err
	})
}

func inTx(ctx context.Context, db *sql.DB, fn func(tx *sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		return errors.Join(err, tx.Rollback())
	}
	return tx.Commit()
}

func (s *Store) tx(ctx context.Context, what string, fn func(tx *sql.Tx) error) error {
	return sqlstore.Wrap("sqlite", what, inTx(ctx, s.w, fn))
}

// got maps the error of a read of one row of what; op names the read in
// any error but a missing row.
func got(op, what string, err error) error {
	return sqlstore.Got("sqlite", op, what, errors.Is(err, sql.ErrNoRows), err)
}

// Workflows.

func (s *Store) CreateWorkflow(ctx context.Context, in store.WorkflowInput) (*store.Workflow, error) {
	w, err := sqlstore.NewWorkflow(&in, false)
	if err != nil {
		return nil, err
	}
	err = s.tx(ctx, "create workflow", func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, queries["workflow_head_insert"], in.ID)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("workflow %s: %w: the id exists", in.ID, store.ErrConflict)
		}
		_, err = tx.ExecContext(ctx, queries["workflow_insert"], w.ID, w.Version, w.Name, string(w.Definition), micros(w.CreatedAt))
		return err
	})
	if err != nil {
		return nil, err
	}
	return w, nil
}

func (s *Store) UpdateWorkflow(ctx context.Context, in store.WorkflowInput) (*store.Workflow, error) {
	w, err := sqlstore.NewWorkflow(&in, true)
	if err != nil {
		return nil, err
	}
	err = s.tx(ctx, "update workflow", func(tx *sql.Tx) error {
		var latest int
		var deleted sql.NullInt64
		err := tx.QueryRowContext(ctx, queries["workflow_head"], in.ID).Scan(&latest, &deleted)
		if errors.Is(err, sql.ErrNoRows) || deleted.Valid {
			return fmt.Errorf("workflow %s: %w", in.ID, store.ErrNotFound)
		}
		if err != nil {
			return err
		}
		cur, err := sqlstore.UpdateCheck(&in, latest, func() (*store.Workflow, error) {
			return scanWorkflow(tx.QueryRowContext(ctx, queries["workflow_get"], in.ID, latest))
		})
		if err != nil || cur != nil {
			w = cur
			return err
		}
		w.Version = latest + 1
		if _, err := tx.ExecContext(ctx, queries["workflow_head_update"], w.Version, w.ID); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, queries["workflow_insert"], w.ID, w.Version, w.Name, string(w.Definition), micros(w.CreatedAt))
		return err
	})
	if err != nil {
		return nil, err
	}
	return w, nil
}

func (s *Store) GetWorkflow(ctx context.Context, id string, version int) (*store.Workflow, error) {
	if version == 0 {
		var latest int
		var deleted sql.NullInt64
		err := s.r.QueryRowContext(ctx, queries["workflow_head"], id).Scan(&latest, &deleted)
		if err := sqlstore.Got("sqlite", "get workflow "+id, "workflow "+id, errors.Is(err, sql.ErrNoRows) || deleted.Valid, err); err != nil {
			return nil, err
		}
		version = latest
	}
	w, err := scanWorkflow(s.r.QueryRowContext(ctx, queries["workflow_get"], id, version))
	if err := got("get workflow "+id, fmt.Sprintf("workflow %s version %d", id, version), err); err != nil {
		return nil, err
	}
	return w, nil
}

func (s *Store) ListWorkflows(ctx context.Context, limit int, cursor string) (store.Page[*store.Workflow], error) {
	var page store.Page[*store.Workflow]
	after, limit, err := sqlstore.WorkflowPage(limit, cursor)
	if err != nil {
		return page, err
	}
	page.Items, err = queryAll(ctx, s.r, scanWorkflow, queries["workflow_list"], after, limit+1)
	if err != nil {
		return page, fmt.Errorf("sqlite: list workflows: %w", err)
	}
	return sqlstore.PageOf(page.Items, limit, store.WorkflowCursor), nil
}

func (s *Store) ListVersions(ctx context.Context, id string, limit int, cursor string) (store.Page[*store.Workflow], error) {
	below, err := sqlstore.ParseVersionCursor(cursor)
	if err != nil {
		return store.Page[*store.Workflow]{}, err
	}
	limit = sqlstore.ListLimit(limit)
	ws, err := queryAll(ctx, s.r, scanWorkflow, queries["workflow_versions"], id, below, limit+1)
	if err != nil {
		return store.Page[*store.Workflow]{}, fmt.Errorf("sqlite: list versions of %s: %w", id, err)
	}
	return sqlstore.VersionsPage(id, cursor, ws, limit)
}

func (s *Store) DeleteWorkflow(ctx context.Context, id string, at time.Time) error {
	return s.tx(ctx, "delete workflow", func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, queries["workflow_delete"], micros(orNow(at)), id)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("workflow %s: %w", id, store.ErrNotFound)
		}
		return nil
	})
}

// Executions.

func (s *Store) CreateExecution(ctx context.Context, in store.ExecutionInput) (*store.Execution, bool, error) {
	x, err := sqlstore.NewExecution(in)
	if err != nil {
		return nil, false, err
	}
	created := true
	err = s.tx(ctx, "create execution", func(tx *sql.Tx) error {
		var err error
		x, created, err = createExecution(ctx, tx, x)
		return err
	})
	if err != nil {
		return nil, false, err
	}
	return x, created, nil
}

// createExecution inserts x in tx, or returns the execution that has its
// idempotency key and false.
func createExecution(ctx context.Context, tx *sql.Tx, x *store.Execution) (*store.Execution, bool, error) {
	if x.IdempotencyKey != "" {
		old, err := scanExecution(tx.QueryRowContext(ctx, queries["execution_by_key"], x.WorkflowID, x.IdempotencyKey))
		if err == nil {
			return old, false, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return nil, false, err
		}
	}
	var latest int
	var deleted sql.NullInt64
	err := tx.QueryRowContext(ctx, queries["workflow_head"], x.WorkflowID).Scan(&latest, &deleted)
	missing := errors.Is(err, sql.ErrNoRows) || deleted.Valid
	if err != nil && !missing {
		return nil, false, err
	}
	if err := sqlstore.CheckHead(x, latest, missing); err != nil {
		return nil, false, err
	}
	res, err := tx.ExecContext(ctx, queries["execution_insert"], executionArgs(x)...)
	if err != nil {
		return nil, false, err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return nil, false, fmt.Errorf("execution %s: %w: the id exists", x.ID, store.ErrConflict)
	}
	return x, true, nil
}

func (s *Store) ClaimExecutions(ctx context.Context, c store.Claim) ([]*store.Execution, error) {
	if err := sqlstore.CheckClaim(&c); err != nil {
		return nil, err
	}
	var xs []*store.Execution
	err := s.tx(ctx, "claim executions", func(tx *sql.Tx) error {
		var err error
		xs, err = queryAll(ctx, tx, scanExecution, queries["execution_claim"],
			c.Owner, micros(c.Now.Add(c.Lease)), micros(c.Now), c.Limit)
		return err
	})
	slices.SortStableFunc(xs, func(a, b *store.Execution) int { return a.AvailableAt.Compare(b.AvailableAt) })
	return xs, err
}

func (s *Store) MarkDispatched(ctx context.Context, id, owner string, at time.Time) error {
	at = orNow(at)
	return s.tx(ctx, "mark dispatched", func(tx *sql.Tx) error {
		return markDispatched(ctx, tx, id, owner, at)
	})
}

func markDispatched(ctx context.Context, tx *sql.Tx, id, owner string, at time.Time) error {
	x, err := scanExecution(tx.QueryRowContext(ctx, queries["execution_get"], id))
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("execution %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return err
	}
	if mark, err := sqlstore.Dispatchable(x, owner); !mark {
		return err
	}
	_, err = tx.ExecContext(ctx, queries["execution_dispatched"], micros(at), micros(at), id)
	return err
}

func (s *Store) MarkDispatchedAll(ctx context.Context, ids []string, owner string, at time.Time) ([]string, error) {
	at = orNow(at)
	var notMarked []string
	err := s.tx(ctx, "mark dispatched", func(tx *sql.Tx) error {
		for _, id := range ids {
			err := markDispatched(ctx, tx, id, owner, at)
			if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrConflict) {
				notMarked = append(notMarked, id)
			} else if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return notMarked, nil
}

func (s *Store) GetExecution(ctx context.Context, id string) (*store.Execution, error) {
	x, err := scanExecution(s.r.QueryRowContext(ctx, queries["execution_get"], id))
	if err := got("get execution "+id, "execution "+id, err); err != nil {
		return nil, err
	}
	return x, nil
}

func (s *Store) ListExecutions(ctx context.Context, f store.ExecutionFilter) (store.Page[*store.Execution], error) {
	var page store.Page[*store.Execution]
	cur, limit, err := sqlstore.ExecutionPage(f)
	if err != nil {
		return page, err
	}
	var curAt int64
	if cur.ID != "" {
		curAt = micros(cur.At)
	}
	trigger, kind, err := store.TriggerFilter(f.Trigger)
	if err != nil {
		return page, err
	}
	_, paths, err := store.InputFilter(f.Input)
	if err != nil {
		return page, err
	}
	page.Items, err = queryAll(ctx, s.r, scanExecution, queries["execution_list"], f.WorkflowID, f.Status,
		f.IdempotencyKey, microsOrZero(f.CreatedAfter), microsOrZero(f.CreatedBefore), curAt, cur.ID, limit+1,
		trigger, kind, string(paths))
	if err != nil {
		return page, fmt.Errorf("sqlite: list executions: %w", err)
	}
	return sqlstore.PageOf(page.Items, limit, store.ExecutionCursor), nil
}

func (s *Store) CancelExecution(ctx context.Context, id string, at time.Time) (*store.Execution, error) {
	at = orNow(at)
	var x *store.Execution
	err := s.tx(ctx, "cancel execution", func(tx *sql.Tx) error {
		var err error
		x, err = scanExecution(tx.QueryRowContext(ctx, queries["execution_get"], id))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("execution %s: %w", id, store.ErrNotFound)
		}
		if err != nil {
			return err
		}
		e, err := sqlstore.CancelEvent(x, at)
		if e == nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, queries["execution_cancel"], x.Status, micros(at), microsPtr(x.FinishedAt), id); err != nil {
			return err
		}
		_, err = insertEvent(ctx, tx.StmtContext(ctx, s.hot["event_insert"]), "", *e)
		return err
	})
	if errors.Is(err, store.ErrConflict) {
		return x, err
	}
	if err != nil {
		return nil, err
	}
	return x, nil
}

// History.

func (s *Store) AppendHistory(ctx context.Context, events []store.HistoryEvent) ([]store.Event, error) {
	if len(events) == 0 {
		return nil, nil
	}
	var out []store.Event
	err := s.tx(ctx, "append history", func(tx *sql.Tx) error {
		stmt := func(name string) *sql.Stmt { return tx.StmtContext(ctx, s.hot[name]) }
		upsertRun, updateExecution, insert := stmt("run_upsert"), stmt("execution_history"), stmt("event_insert")
		b := store.Batch{Executions: map[string]*store.Execution{}, Runs: map[store.RunKey]*store.NodeRun{}, Now: time.Now()}
		// The batch's keys, each once: one statement reads each kind.
		var execIDs []string
		var runKeys, eventKeys [][]string
		seenRun := map[store.RunKey]bool{}
		for _, ev := range events {
			if _, ok := b.Executions[ev.ExecutionID]; !ok {
				b.Executions[ev.ExecutionID] = nil // nil until read: not this store's
				execIDs = append(execIDs, ev.ExecutionID)
			}
			if ev.Status != nil {
				if k := store.StatusRunKey(ev.Status); !seenRun[k] {
					seenRun[k] = true
					runKeys = append(runKeys, []string{k.ExecutionID, k.NodeID, k.Branch})
				}
			}
			if ev.DedupeKey != "" {
				eventKeys = append(eventKeys, []string{ev.ExecutionID, ev.DedupeKey})
			}
		}
		if err := eachRow(ctx, stmt("history_executions"), execIDs, func(rows *sql.Rows) error {
			x, err := scanExecution(rows)
			if err == nil {
				b.Executions[x.ID] = x
			}
			return err
		}); err != nil {
			return err
		}
		if err := eachRow(ctx, stmt("history_runs"), runKeys, func(rows *sql.Rows) error {
			r, err := scanRun(rows)
			if err == nil {
				b.Runs[r.Key()] = r
			}
			return err
		}); err != nil {
			return err
		}
		recorded := map[[2]string]bool{}
		if err := eachRow(ctx, stmt("history_recorded"), eventKeys, func(rows *sql.Rows) error {
			var k [2]string
			err := rows.Scan(&k[0], &k[1])
			recorded[k] = true
			return err
		}); err != nil {
			return err
		}
		b.Recorded = func(id, key string) bool { return recorded[[2]string{id, key}] }
		for id, x := range b.Executions {
			if x == nil {
				delete(b.Executions, id)
			}
		}
		a := store.ApplyBatch(events, b)
		for _, r := range a.Runs {
			if _, err := upsertRun.ExecContext(ctx, r.ExecutionID, r.NodeID, r.Branch, jsonText(r.Lineage),
				r.Status, r.Attempt, rawText(r.Output), rawText(r.Error), rawText(r.Details), microsPtr(r.StartedAt),
				microsPtr(r.FinishedAt), microsPtr(r.NextAttemptAt), microsPtr(r.ResumeAt), r.DurationMS,
				micros(r.ReportedAt), micros(r.UpdatedAt)); err != nil {
				return err
			}
		}
		for _, x := range a.Executions {
			if _, err := updateExecution.ExecContext(ctx, x.Status, micros(x.AvailableAt), x.Attempts,
				jsonText(x.Cursor), jsonText(x.Vars), jsonText(x.Unfinished), rawText(x.Completion), micros(x.UpdatedAt),
				microsPtr(x.FinishedAt), x.ID); err != nil {
				return err
			}
		}
		out = a.Events
		for i := range out {
			id, err := insertEvent(ctx, insert, a.DedupeKeys[i], out[i])
			if err != nil {
				return err
			}
			out[i].ID = id
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// eachRow runs a batch read (keys: a JSON array) and calls fn on each row.
func eachRow[K any](ctx context.Context, q *sql.Stmt, keys []K, fn func(*sql.Rows) error) error {
	if len(keys) == 0 {
		return nil
	}
	arg, err := json.Marshal(keys)
	if err != nil {
		return err
	}
	rows, err := q.QueryContext(ctx, string(arg))
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// insertEvent records e with the event_insert statement of a transaction.
func insertEvent(ctx context.Context, insert *sql.Stmt, dedupe string, e store.Event) (int64, error) {
	var key any
	if dedupe != "" {
		key = dedupe
	}
	var id int64
	err := insert.QueryRowContext(ctx, e.ExecutionID, key, e.Kind, string(e.Body), micros(e.At)).Scan(&id)
	return id, err
}

func (s *Store) NodeRuns(ctx context.Context, id string) ([]*store.NodeRun, error) {
	if _, err := s.GetExecution(ctx, id); err != nil {
		return nil, err
	}
	runs, err := queryAll(ctx, s.r, scanRun, queries["run_list"], id)
	if err != nil {
		return nil, fmt.Errorf("sqlite: node runs of %s: %w", id, err)
	}
	return runs, nil
}

func (s *Store) Splits(ctx context.Context, id string) ([]store.SplitProgress, error) {
	return sqlstore.Splits(s.NodeRuns(ctx, id))
}

func (s *Store) Events(ctx context.Context, f store.EventFilter) ([]store.Event, error) {
	limit := sqlstore.EventLimit(f.Limit)
	var es []store.Event
	var err error
	if f.ExecutionID == "" {
		es, err = queryAll(ctx, s.r, scanEvent, queries["events_all"], f.AfterID, limit)
	} else {
		es, err = queryAll(ctx, s.r, scanEvent, queries["events_execution"], f.ExecutionID, f.AfterID, limit)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: events: %w", err)
	}
	return es, nil
}

// Credentials and tokens.

func (s *Store) PutCredential(ctx context.Context, c *store.Credential) error {
	if err := sqlstore.CheckCredential(c); err != nil {
		return err
	}
	return s.tx(ctx, "put credential", func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, queries["credential_put"], c.Name, c.Type, c.KeyID, c.Ciphertext,
			micros(c.CreatedAt), micros(c.UpdatedAt))
		return err
	})
}

func (s *Store) GetCredential(ctx context.Context, name string) (*store.Credential, error) {
	c, err := scanCredential(s.r.QueryRowContext(ctx, queries["credential_get"], name))
	if err := got("get credential "+name, "credential "+name, err); err != nil {
		return nil, err
	}
	return c, nil
}

func (s *Store) ListCredentials(ctx context.Context) ([]*store.Credential, error) {
	cs, err := queryAll(ctx, s.r, scanCredential, queries["credential_list"])
	if err != nil {
		return nil, fmt.Errorf("sqlite: list credentials: %w", err)
	}
	return cs, nil
}

func (s *Store) DeleteCredential(ctx context.Context, name string) error {
	return s.tx(ctx, "delete credential", func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, queries["credential_delete"], name)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("credential %s: %w", name, store.ErrNotFound)
		}
		return nil
	})
}

func (s *Store) CreateToken(ctx context.Context, t *store.Token) error {
	if err := sqlstore.CheckToken(t); err != nil {
		return err
	}
	return s.tx(ctx, "create token", func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, queries["token_insert"], t.ID, t.Name, t.Prefix, t.Hash, micros(t.CreatedAt), microsPtr(t.RevokedAt),
			t.Role, strings.Join(t.Workflows, ","), microsPtr(t.ExpiresAt))
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("token %s: %w: the name (or id or hash) exists", t.Name, store.ErrConflict)
		}
		return nil
	})
}

func (s *Store) TokenByHash(ctx context.Context, h []byte) (*store.Token, error) {
	t, err := scanToken(s.r.QueryRowContext(ctx, queries["token_by_hash"], h))
	if err := got("token by hash", "token", err); err != nil {
		return nil, err
	}
	return t, nil
}

func (s *Store) ListTokens(ctx context.Context) ([]*store.Token, error) {
	ts, err := queryAll(ctx, s.r, scanToken, queries["token_list"])
	if err != nil {
		return nil, fmt.Errorf("sqlite: list tokens: %w", err)
	}
	return ts, nil
}

func (s *Store) TokenByID(ctx context.Context, id string) (*store.Token, error) {
	t, err := scanToken(s.r.QueryRowContext(ctx, queries["token_by_id"], id))
	if err := got("token by id", "token "+id, err); err != nil {
		return nil, err
	}
	return t, nil
}

func (s *Store) RevokeToken(ctx context.Context, name string, at time.Time) error {
	return s.tx(ctx, "revoke token", func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, queries["token_revoke"], micros(orNow(at)), name)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("token %s: %w", name, store.ErrNotFound)
		}
		_, err = tx.ExecContext(ctx, queries["token_sessions_delete"], name)
		return err
	})
}

// Console sessions.

func (s *Store) CreateSession(ctx context.Context, se *store.Session) error {
	if err := sqlstore.CheckSession(se); err != nil {
		return err
	}
	return s.tx(ctx, "create session", func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, queries["session_insert"], se.Hash, se.TokenID, micros(se.CreatedAt), micros(se.ExpiresAt))
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("session: %w: the hash exists", store.ErrConflict)
		}
		return nil
	})
}

func (s *Store) SessionByHash(ctx context.Context, h []byte) (*store.Session, error) {
	var se store.Session
	var created, expires int64
	err := s.r.QueryRowContext(ctx, queries["session_by_hash"], h).Scan(&se.Hash, &se.TokenID, &created, &expires)
	if err := got("session by hash", "session", err); err != nil {
		return nil, err
	}
	se.CreatedAt, se.ExpiresAt = timeOf(created), timeOf(expires)
	return &se, nil
}

func (s *Store) DeleteSession(ctx context.Context, h []byte) error {
	return s.tx(ctx, "delete session", func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, queries["session_delete"], h)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("session: %w", store.ErrNotFound)
		}
		return nil
	})
}

func (s *Store) PruneSessions(ctx context.Context, before time.Time) (int, error) {
	var n int64
	err := s.tx(ctx, "prune sessions", func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, queries["session_prune"], micros(before))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return int(n), err
}

// Ping checks that the database answers (rune server's /readyz).
func (s *Store) Ping(ctx context.Context) error { return s.r.PingContext(ctx) }

func (s *Store) PruneHistory(ctx context.Context, before time.Time, limit int) (int, error) {
	if err := sqlstore.CheckPrune("history", limit); err != nil {
		return 0, err
	}
	var n int
	err := s.tx(ctx, "prune history", func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, queries["prune_pick"], micros(before), limit)
		if err != nil {
			return err
		}
		var ids []string
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			ids = append(ids, id)
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return err
		}
		now := micros(time.Now())
		for _, id := range ids {
			for _, q := range []string{"prune_events", "prune_runs"} {
				if _, err := tx.ExecContext(ctx, queries[q], id); err != nil {
					return err
				}
			}
			if _, err := tx.ExecContext(ctx, queries["prune_mark"], now, id); err != nil {
				return err
			}
		}
		n = len(ids)
		return nil
	})
	return n, err
}

// Audit log.

func (s *Store) AppendAudit(ctx context.Context, e *store.AuditEntry) error {
	objects, err := sqlstore.AuditObjects(e)
	if err != nil {
		return err
	}
	return s.tx(ctx, "append audit", func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, queries["audit_insert"], micros(e.At), e.Actor, e.Role, e.Method, e.Route, string(objects), e.Status).Scan(&e.ID)
	})
}

func (s *Store) ListAudit(ctx context.Context, f store.AuditFilter) (store.Page[*store.AuditEntry], error) {
	before, err := sqlstore.AuditCursor(f.Cursor)
	if err != nil {
		return store.Page[*store.AuditEntry]{}, err
	}
	limit := sqlstore.ListLimit(f.Limit)
	es, err := queryAll(ctx, s.r, scanAudit, queries["audit_list"], before, limit+1)
	if err != nil {
		return store.Page[*store.AuditEntry]{}, fmt.Errorf("sqlite: list audit: %w", err)
	}
	return sqlstore.AuditPage(es, limit), nil
}

func (s *Store) PruneAudit(ctx context.Context, before time.Time, limit int) (int, error) {
	if err := sqlstore.CheckPrune("audit", limit); err != nil {
		return 0, err
	}
	var n int64
	err := s.tx(ctx, "prune audit", func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, queries["audit_prune"], micros(before), limit)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return int(n), err
}
