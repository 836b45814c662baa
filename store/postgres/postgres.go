// Package postgres implements store.Store on PostgreSQL (pgx, pgxpool).
// Several servers may share one database: claims use FOR UPDATE SKIP
// LOCKED, history batches lock the executions they change, and event ids
// ascend in commit order.
package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rune-org/rune/store"
	"github.com/rune-org/rune/store/internal/sqlstore"
	"github.com/rune-org/rune/store/migrate"
	"github.com/rune-org/rune/store/sqlfile"
)

//go:embed migrations/*.sql
var migrations embed.FS

//go:embed queries.sql
var queriesSQL string

var queries = sqlfile.MustParse(queriesSQL)

// PoolMaxConnsDefault is the pool size when the URL sets no pool_max_conns
// (pgxpool's own default, the number of CPUs but at least 4, queued a
// server's HTTP requests, dispatcher and history writer behind each other).
const PoolMaxConnsDefault = 32

// Store is a store.Store on a PostgreSQL schema.
type Store struct {
	pool   *pgxpool.Pool
	schema string
	// creates group-commits CreateExecution (groupcommit.go).
	creates *groupCommit
}

var _ store.Store = (*Store)(nil)

var schemaName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// Open connects to the database at url (a PostgreSQL URL or DSN; pool
// settings such as pool_max_conns are read from it, the size defaulting to
// PoolMaxConnsDefault) and applies the migrations. schema names the schema the store uses, created when
// missing; "" takes a search_path given in the URL, or else the server's
// default (public).
func Open(ctx context.Context, url, schema string) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// pgx's message may quote the URL, password included: say only what failed.
		return nil, fmt.Errorf("postgres: %w: url: not a PostgreSQL URL or DSN", store.ErrInvalid)
	}
	if !strings.Contains(url, "pool_max_conns") {
		cfg.MaxConns = PoolMaxConnsDefault
	}
	if schema == "" {
		schema = cfg.ConnConfig.RuntimeParams["search_path"]
	}
	if schema != "" {
		if !schemaName.MatchString(schema) {
			return nil, fmt.Errorf("postgres: %w: schema: %q is not a lower-case identifier", store.ErrInvalid, schema)
		}
		cfg.ConnConfig.RuntimeParams["search_path"] = schema
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: connect to %s: %w", cfg.ConnConfig.Host, err)
	}
	s := &Store{pool: pool, schema: schema}
	if err := s.migrate(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	s.creates = newGroupCommit(s)
	return s, nil
}

// Schema is the schema the store uses ("" for the server's default).
func (s *Store) Schema() string { return s.schema }

// Close stops the group commit and closes the pool.
func (s *Store) Close() error {
	s.creates.close()
	s.pool.Close()
	return nil
}

func (s *Store) migrate(ctx context.Context) error {
	ms, err := migrate.Load(migrations, "migrations")
	if err != nil {
		return err
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("postgres: connect: %w", err)
	}
	defer conn.Release()
	if _, err := migrate.Run(ctx, &target{conn: conn.Conn(), schema: s.schema}, ms); err != nil {
		return fmt.Errorf("postgres: schema %q: %w", s.schema, err)
	}
	return nil
}

// target migrates on one connection, holding a session advisory lock per
// schema so that servers starting together migrate once.
type target struct {
	conn   *pgx.Conn
	schema string
}

func (t *target) Lock(ctx context.Context) (func(), error) {
	if _, err := t.conn.Exec(ctx, queries["migrate_lock"], t.schema); err != nil {
		return nil, err
	}
	unlock := func() { _, _ = t.conn.Exec(context.WithoutCancel(ctx), queries["migrate_unlock"], t.schema) }
	if t.schema != "" {
		// The schema itself, under the lock: concurrent CREATE SCHEMA IF NOT
		// EXISTS can fail on the catalog's unique index.
		if _, err := t.conn.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{t.schema}.Sanitize()); err != nil {
			unlock()
			return nil, err
		}
	}
	return unlock, nil
}

func (t *target) Applied(ctx context.Context) ([]int, error) {
	if _, err := t.conn.Exec(ctx, queries["migrations_table"]); err != nil {
		return nil, err
	}
	rows, _ := t.conn.Query(ctx, queries["migrations_applied"])
	return pgx.CollectRows(rows, pgx.RowTo[int])
}

func (t *target) Apply(ctx context.Context, m migrate.Migration) error {
	return pgx.BeginFunc(ctx, t.conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, m.SQL); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, queries["migration_record"], m.Version)
		return err
	})
}

func (s *Store) tx(ctx context.Context, what string, fn func(tx pgx.Tx) error) error {
	return sqlstore.Wrap("postgres", what, pgx.BeginFunc(ctx, s.pool, fn))
}

// got maps the error of a read of one row of what; op names the read in
// any error but a missing row.
func got(op, what string, err error) error {
	return sqlstore.Got("postgres", op, what, errors.Is(err, pgx.ErrNoRows), err)
}

// Workflows.

func (s *Store) CreateWorkflow(ctx context.Context, in store.WorkflowInput) (*store.Workflow, error) {
	w, err := sqlstore.NewWorkflow(&in, false)
	if err != nil {
		return nil, err
	}
	err = s.tx(ctx, "create workflow", func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, queries["workflow_head_insert"], in.ID)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("workflow %s: %w: the id exists", in.ID, store.ErrConflict)
		}
		_, err = tx.Exec(ctx, queries["workflow_insert"], w.ID, w.Version, w.Name, w.Definition, w.CreatedAt)
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
	err = s.tx(ctx, "update workflow", func(tx pgx.Tx) error {
		var latest int
		var deleted *time.Time
		err := tx.QueryRow(ctx, queries["workflow_head_lock"], in.ID).Scan(&latest, &deleted)
		if errors.Is(err, pgx.ErrNoRows) || deleted != nil {
			return fmt.Errorf("workflow %s: %w", in.ID, store.ErrNotFound)
		}
		if err != nil {
			return err
		}
		cur, err := sqlstore.UpdateCheck(&in, latest, func() (*store.Workflow, error) {
			rows, _ := tx.Query(ctx, queries["workflow_get"], in.ID, latest)
			return pgx.CollectExactlyOneRow(rows, scanWorkflow)
		})
		if err != nil || cur != nil {
			w = cur
			return err
		}
		w.Version = latest + 1
		if _, err := tx.Exec(ctx, queries["workflow_head_update"], w.Version, w.ID); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, queries["workflow_insert"], w.ID, w.Version, w.Name, w.Definition, w.CreatedAt)
		return err
	})
	if err != nil {
		return nil, err
	}
	return w, nil
}

func (s *Store) GetWorkflow(ctx context.Context, id string, version int) (*store.Workflow, error) {
	if version == 0 {
		var deleted *time.Time
		err := s.pool.QueryRow(ctx, queries["workflow_head"], id).Scan(&version, &deleted)
		if err := sqlstore.Got("postgres", "get workflow "+id, "workflow "+id, errors.Is(err, pgx.ErrNoRows) || deleted != nil, err); err != nil {
			return nil, err
		}
	}
	rows, _ := s.pool.Query(ctx, queries["workflow_get"], id, version)
	w, err := pgx.CollectExactlyOneRow(rows, scanWorkflow)
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
	rows, _ := s.pool.Query(ctx, queries["workflow_list"], after, limit+1)
	page.Items, err = pgx.CollectRows(rows, scanWorkflow)
	if err != nil {
		return page, fmt.Errorf("postgres: list workflows: %w", err)
	}
	return sqlstore.PageOf(page.Items, limit, store.WorkflowCursor), nil
}

func (s *Store) ListVersions(ctx context.Context, id string, limit int, cursor string) (store.Page[*store.Workflow], error) {
	below, err := sqlstore.ParseVersionCursor(cursor)
	if err != nil {
		return store.Page[*store.Workflow]{}, err
	}
	limit = sqlstore.ListLimit(limit)
	rows, _ := s.pool.Query(ctx, queries["workflow_versions"], id, below, limit+1)
	ws, err := pgx.CollectRows(rows, scanWorkflow)
	if err != nil {
		return store.Page[*store.Workflow]{}, fmt.Errorf("postgres: list versions of %s: %w", id, err)
	}
	return sqlstore.VersionsPage(id, cursor, ws, limit)
}

func (s *Store) DeleteWorkflow(ctx context.Context, id string, at time.Time) error {
	tag, err := s.pool.Exec(ctx, queries["workflow_delete"], orNow(at), id)
	if err != nil {
		return fmt.Errorf("postgres: delete workflow %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("workflow %s: %w", id, store.ErrNotFound)
	}
	return nil
}

// Executions.

func (s *Store) CreateExecution(ctx context.Context, in store.ExecutionInput) (*store.Execution, bool, error) {
	x, err := sqlstore.NewExecution(in)
	if err != nil {
		return nil, false, err
	}
	// ON CONFLICT DO NOTHING waits for a concurrent insert of the same key
	// to commit, so the lookup below then finds it.
	res := s.creates.insert(ctx, x)
	if res.err != nil {
		return nil, false, fmt.Errorf("postgres: create execution %s: %w", x.ID, res.err)
	}
	if res.inserted {
		x.Version = res.version
		return x, true, nil
	}
	if x.IdempotencyKey != "" {
		rows, _ := s.pool.Query(ctx, queries["execution_by_key"], x.WorkflowID, x.IdempotencyKey)
		old, err := pgx.CollectExactlyOneRow(rows, scanExecution)
		if err == nil {
			return old, false, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return nil, false, fmt.Errorf("postgres: create execution %s: %w", x.ID, err)
		}
	}
	var latest int
	var deleted *time.Time
	err = s.pool.QueryRow(ctx, queries["workflow_head"], x.WorkflowID).Scan(&latest, &deleted)
	missing := errors.Is(err, pgx.ErrNoRows) || err == nil && deleted != nil
	if err != nil && !missing {
		return nil, false, fmt.Errorf("postgres: create execution %s: %w", x.ID, err)
	}
	if err := sqlstore.CheckHead(x, latest, missing); err != nil {
		return nil, false, err
	}
	return nil, false, fmt.Errorf("execution %s: %w: the id exists", x.ID, store.ErrConflict)
}

func (s *Store) ClaimExecutions(ctx context.Context, c store.Claim) ([]*store.Execution, error) {
	if err := sqlstore.CheckClaim(&c); err != nil {
		return nil, err
	}
	rows, _ := s.pool.Query(ctx, queries["execution_claim"], c.Owner, c.Now.Add(c.Lease), c.Now, c.Limit)
	xs, err := pgx.CollectRows(rows, scanExecution)
	if err != nil {
		return nil, fmt.Errorf("postgres: claim executions: %w", err)
	}
	slices.SortStableFunc(xs, func(a, b *store.Execution) int { return a.AvailableAt.Compare(b.AvailableAt) })
	return xs, nil
}

func (s *Store) MarkDispatched(ctx context.Context, id, owner string, at time.Time) error {
	at = orNow(at)
	return s.tx(ctx, "mark dispatched", func(tx pgx.Tx) error {
		x, err := lockExecution(ctx, tx, id)
		if err != nil {
			return err
		}
		if mark, err := sqlstore.Dispatchable(x, owner); !mark {
			return err
		}
		_, err = tx.Exec(ctx, queries["execution_dispatched"], at, id)
		return err
	})
}

func (s *Store) MarkDispatchedAll(ctx context.Context, ids []string, owner string, at time.Time) ([]string, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	rows, _ := s.pool.Query(ctx, queries["execution_dispatched_many"], orNow(at), ids, owner)
	marked, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("postgres: mark dispatched: %w", err)
	}
	return sqlstore.NotMarked(ids, marked), nil
}

func lockExecution(ctx context.Context, tx pgx.Tx, id string) (*store.Execution, error) {
	rows, _ := tx.Query(ctx, queries["execution_lock"], id)
	x, err := pgx.CollectExactlyOneRow(rows, scanExecution)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("execution %s: %w", id, store.ErrNotFound)
	}
	return x, err
}

func (s *Store) GetExecution(ctx context.Context, id string) (*store.Execution, error) {
	rows, _ := s.pool.Query(ctx, queries["execution_get"], id)
	x, err := pgx.CollectExactlyOneRow(rows, scanExecution)
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
	var curAt *time.Time
	if cur.ID != "" {
		curAt = &cur.At
	}
	trigger, kind, err := store.TriggerFilter(f.Trigger)
	if err != nil {
		return page, err
	}
	contains, _, err := store.InputFilter(f.Input)
	if err != nil {
		return page, err
	}
	args := []any{f.WorkflowID, f.Status, f.IdempotencyKey,
		timeOrNil(f.CreatedAfter), timeOrNil(f.CreatedBefore), curAt, cur.ID, limit + 1, trigger, kind}
	q := queries["execution_list"]
	if contains != nil {
		q = queries["execution_list_input"]
		args = append(args, string(contains))
	}
	rows, _ := s.pool.Query(ctx, q, args...)
	page.Items, err = pgx.CollectRows(rows, scanExecution)
	if err != nil {
		return page, fmt.Errorf("postgres: list executions: %w", err)
	}
	return sqlstore.PageOf(page.Items, limit, store.ExecutionCursor), nil
}

func (s *Store) CancelExecution(ctx context.Context, id string, at time.Time) (*store.Execution, error) {
	at = orNow(at)
	var x *store.Execution
	err := s.tx(ctx, "cancel execution", func(tx pgx.Tx) error {
		var err error
		if x, err = lockExecution(ctx, tx, id); err != nil {
			return err
		}
		e, err := sqlstore.CancelEvent(x, at)
		if e == nil {
			return err
		}
		if _, err := tx.Exec(ctx, queries["execution_cancel"], x.Status, at, x.FinishedAt, id); err != nil {
			return err
		}
		return insertEvents(ctx, tx, []store.Event{*e}, nil)
	})
	if errors.Is(err, store.ErrConflict) {
		return x, err
	}
	if err != nil {
		return nil, err
	}
	return x, nil
}

// Credentials and tokens.

func (s *Store) PutCredential(ctx context.Context, c *store.Credential) error {
	if err := sqlstore.CheckCredential(c); err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, queries["credential_put"], c.Name, c.Type, c.KeyID, c.Ciphertext, c.CreatedAt, c.UpdatedAt); err != nil {
		return fmt.Errorf("postgres: put credential %s: %w", c.Name, err)
	}
	return nil
}

func (s *Store) GetCredential(ctx context.Context, name string) (*store.Credential, error) {
	rows, _ := s.pool.Query(ctx, queries["credential_get"], name)
	c, err := pgx.CollectExactlyOneRow(rows, scanCredential)
	if err := got("get credential "+name, "credential "+name, err); err != nil {
		return nil, err
	}
	return c, nil
}

func (s *Store) ListCredentials(ctx context.Context) ([]*store.Credential, error) {
	rows, _ := s.pool.Query(ctx, queries["credential_list"])
	cs, err := pgx.CollectRows(rows, scanCredential)
	if err != nil {
		return nil, fmt.Errorf("postgres: list credentials: %w", err)
	}
	return cs, nil
}

func (s *Store) DeleteCredential(ctx context.Context, name string) error {
	tag, err := s.pool.Exec(ctx, queries["credential_delete"], name)
	if err != nil {
		return fmt.Errorf("postgres: delete credential %s: %w", name, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("credential %s: %w", name, store.ErrNotFound)
	}
	return nil
}

func (s *Store) CreateToken(ctx context.Context, t *store.Token) error {
	if err := sqlstore.CheckToken(t); err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx, queries["token_insert"], t.ID, t.Name, t.Prefix, t.Hash, t.CreatedAt, t.RevokedAt,
		t.Role, strings.Join(t.Workflows, ","), t.ExpiresAt)
	if err != nil {
		return fmt.Errorf("postgres: create token %s: %w", t.Name, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("token %s: %w: the name (or id or hash) exists", t.Name, store.ErrConflict)
	}
	return nil
}

func (s *Store) TokenByHash(ctx context.Context, h []byte) (*store.Token, error) {
	rows, _ := s.pool.Query(ctx, queries["token_by_hash"], h)
	t, err := pgx.CollectExactlyOneRow(rows, scanToken)
	if err := got("token by hash", "token", err); err != nil {
		return nil, err
	}
	return t, nil
}

func (s *Store) ListTokens(ctx context.Context) ([]*store.Token, error) {
	rows, _ := s.pool.Query(ctx, queries["token_list"])
	ts, err := pgx.CollectRows(rows, scanToken)
	if err != nil {
		return nil, fmt.Errorf("postgres: list tokens: %w", err)
	}
	return ts, nil
}

func (s *Store) TokenByID(ctx context.Context, id string) (*store.Token, error) {
	rows, _ := s.pool.Query(ctx, queries["token_by_id"], id)
	t, err := pgx.CollectExactlyOneRow(rows, scanToken)
	if err := got("token by id", "token "+id, err); err != nil {
		return nil, err
	}
	return t, nil
}

func (s *Store) RevokeToken(ctx context.Context, name string, at time.Time) error {
	return s.tx(ctx, "revoke token "+name, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, queries["token_revoke"], orNow(at), name)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("token %s: %w", name, store.ErrNotFound)
		}
		_, err = tx.Exec(ctx, queries["token_sessions_delete"], name)
		return err
	})
}

// Console sessions.

func (s *Store) CreateSession(ctx context.Context, se *store.Session) error {
	if err := sqlstore.CheckSession(se); err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx, queries["session_insert"], se.Hash, se.TokenID, se.CreatedAt, se.ExpiresAt)
	if err != nil {
		return fmt.Errorf("postgres: create session: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("session: %w: the hash exists", store.ErrConflict)
	}
	return nil
}

func (s *Store) SessionByHash(ctx context.Context, h []byte) (*store.Session, error) {
	var se store.Session
	err := s.pool.QueryRow(ctx, queries["session_by_hash"], h).Scan(&se.Hash, &se.TokenID, &se.CreatedAt, &se.ExpiresAt)
	if err := got("session by hash", "session", err); err != nil {
		return nil, err
	}
	se.CreatedAt, se.ExpiresAt = se.CreatedAt.UTC(), se.ExpiresAt.UTC()
	return &se, nil
}

func (s *Store) DeleteSession(ctx context.Context, h []byte) error {
	tag, err := s.pool.Exec(ctx, queries["session_delete"], h)
	if err != nil {
		return fmt.Errorf("postgres: delete session: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("session: %w", store.ErrNotFound)
	}
	return nil
}

func (s *Store) PruneSessions(ctx context.Context, before time.Time) (int, error) {
	tag, err := s.pool.Exec(ctx, queries["session_prune"], before)
	if err != nil {
		return 0, fmt.Errorf("postgres: prune sessions: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// Ping checks that the database answers (rune server's /readyz).
func (s *Store) Ping(ctx context.Context) error { return s.pool.Ping(ctx) }

func (s *Store) PruneHistory(ctx context.Context, before time.Time, limit int) (int, error) {
	if err := sqlstore.CheckPrune("history", limit); err != nil {
		return 0, err
	}
	var n int
	err := s.tx(ctx, "prune history", func(tx pgx.Tx) error {
		rows, _ := tx.Query(ctx, queries["prune_pick"], before, limit)
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil || len(ids) == 0 {
			return err
		}
		for _, q := range []string{"prune_events", "prune_runs"} {
			if _, err := tx.Exec(ctx, queries[q], ids); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, queries["prune_mark"], ids, orNow(time.Time{})); err != nil {
			return err
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
	if err := s.pool.QueryRow(ctx, queries["audit_insert"], e.At, e.Actor, e.Role, e.Method, e.Route, objects, e.Status).Scan(&e.ID); err != nil {
		return fmt.Errorf("postgres: append audit: %w", err)
	}
	return nil
}

func (s *Store) ListAudit(ctx context.Context, f store.AuditFilter) (store.Page[*store.AuditEntry], error) {
	before, err := sqlstore.AuditCursor(f.Cursor)
	if err != nil {
		return store.Page[*store.AuditEntry]{}, err
	}
	limit := sqlstore.ListLimit(f.Limit)
	rows, _ := s.pool.Query(ctx, queries["audit_list"], before, limit+1)
	es, err := pgx.CollectRows(rows, scanAudit)
	if err != nil {
		return store.Page[*store.AuditEntry]{}, fmt.Errorf("postgres: list audit: %w", err)
	}
	return sqlstore.AuditPage(es, limit), nil
}

func (s *Store) PruneAudit(ctx context.Context, before time.Time, limit int) (int, error) {
	if err := sqlstore.CheckPrune("audit", limit); err != nil {
		return 0, err
	}
	tag, err := s.pool.Exec(ctx, queries["audit_prune"], before, limit)
	if err != nil {
		return 0, fmt.Errorf("postgres: prune audit: %w", err)
	}
	return int(tag.RowsAffected()), nil
}
