// Package sqlite implements the coordination seams (coord.Coordinator,
// Barriers, Timers, Blobs and Effects) on one SQLite file, for the durable
// embedded runtime: what memory keeps in process survives a restart, a
// SIGTERM or a kill -9.
//
// New creates the tables (schema.sql, all named coord_*, beside the broker's
// and the store's in the same file) and returns a Store exposing the five:
//
//	st, err := sqlite.New(ctx, db, sqlite.Options{})
//	st.Coordinator(), st.Barriers(), st.Timers(), st.Blobs(), st.Effects()
//
// Every change goes through sqlitedb.DB.Write, so many callers' calls share
// one transaction (group commit) while each runs alone on the writer
// goroutine: a read-modify-write there is atomic, as a Lua script is on
// Redis. Reads that need no atomicity (Begin, Parked, Get, Stats) use the
// reader pool. A call that returned nil has committed, and with the WAL and
// synchronous=NORMAL survives the process being killed.
//
// Nothing of a live execution expires: its accounting, finished ids, parked
// ids, barriers (open or closed) and blobs live until it ends, however long
// it waits, and timers until Done. What expires, by a sweep in the
// background, bounded per pass: an ended execution with all of the above,
// Options.Retain after its end (and never before the Store has run for
// Retain, so that the redeliveries after a restart still find what they
// replay); a completed barrier's values, Options.BarrierRetain after its
// completion (a cancelled one's at once); a side effect, Options.EffectsRetain
// after its last use; and a barrier of an execution this store never
// started (none in the engine: it starts every execution first) its
// spec's TTL after its last arrival.
package sqlite

import (
	_ "embed"

	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/rune-org/rune/coord"
	"github.com/rune-org/rune/internal/sqlitedb"
	"github.com/rune-org/rune/store/sqlfile"
)

// Defaults of Options.
const (
	DefaultRetain        = 10 * time.Minute
	DefaultBarrierRetain = 10 * time.Minute
	DefaultEffectsRetain = 7 * 24 * time.Hour
	DefaultSweepBatch    = 500
)

// DefaultBarrierTTL is the TTL of a barrier whose spec gives none, and of
// the closed marker that Cancel leaves for a barrier that did not exist; it
// only bounds barriers of executions the store does not know (see Barriers).
const DefaultBarrierTTL = coord.DefaultBarrierTTL

// Options configures a Store. The zero value gives the defaults.
type Options struct {
	// Retain is how long an ended execution's state (finished ids and
	// Records, final context, barriers, blobs) is kept, so that redeliveries
	// still Replay and the completer's duplicate Finish still gets the
	// Outcome. It counts only while a Store runs: nothing ended expires
	// before the Store has run for Retain. Default 10 minutes.
	Retain time.Duration
	// BarrierRetain is how long a completed barrier keeps its values and
	// state for the repeat of its completing arrival; then only its closed
	// marker remains, until its execution expires. Default 10 minutes.
	BarrierRetain time.Duration
	// EffectsRetain is how long a side effect's key is kept after its last
	// Begin or Record: a retry or redelivery later than that acts again.
	// Default 7 days, as on Redis; at least a day (coord.Effects).
	EffectsRetain time.Duration
	// SweepEvery is how often the background sweep runs. Default Retain/4,
	// between 10 ms and one minute.
	SweepEvery time.Duration
	// SweepBatch bounds the rows one sweep write deletes, so that it holds
	// the writer for milliseconds. Default 500.
	SweepBatch int
	// Now is the clock of expiry (not of timers: Claim and Wake take the
	// time from their callers). Default time.Now.
	Now func() time.Time
	// Logger receives the sweep's errors. Default slog.Default().
	Logger *slog.Logger
}

var (
	//go:embed schema.sql
	schemaSQL string
	//go:embed queries.sql
	queriesSQL string

	queries = sqlfile.MustParse(queriesSQL)
)

// Store holds the five coordination seams on one SQLite file. Create it with
// New and stop its sweep with Close, before closing the file.
type Store struct {
	db     *sqlitedb.DB
	opts   Options
	log    *slog.Logger
	opened time.Time

	w map[string]*sql.Stmt // prepared on the writer connection
	r map[string]*sql.Stmt // prepared on the reader pool (r_*)

	coord    Coordinator
	barriers Barriers
	timers   Timers
	blobs    Blobs
	effects  Effects
	events   Events // issue 34

	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

// New creates the coordination tables in db when missing, prepares the
// queries and starts the sweep. Invalid Options (a negative duration, an
// EffectsRetain under a day) are an error. The caller keeps ownership of db
// and closes it after Store.Close.
func New(ctx context.Context, db *sqlitedb.DB, opts Options) (*Store, error) {
	if err := resolve(&opts); err != nil {
		return nil, err
	}
	if _, err := db.W.ExecContext(ctx, schemaSQL); err != nil {
		return nil, fmt.Errorf("coord/sqlite: create tables in %s: %w", db.Path(), err)
	}
	s := &Store{db: db, opts: opts, log: opts.Logger, opened: opts.Now(),
		w: map[string]*sql.Stmt{}, r: map[string]*sql.Stmt{},
		stop: make(chan struct{}), done: make(chan struct{})}
	for name, q := range queries {
		pool, into := db.W, s.w
		if strings.HasPrefix(name, "r_") {
			pool, into = db.R, s.r
		}
		st, err := pool.PrepareContext(ctx, q)
		if err != nil {
			s.closeStmts()
			return nil, fmt.Errorf("coord/sqlite: prepare %s: %w", name, err)
		}
		into[name] = st
	}
	s.coord.s, s.barriers.s, s.timers.s, s.blobs.s, s.effects.s = s, s, s, s, s
	s.events.s = s
	if err := s.checkVersion(ctx); err != nil {
		s.closeStmts()
		return nil, err
	}
	go s.sweeper()
	return s, nil
}

// schemaVersion is the version of schema.sql, recorded in coord_schema.
const schemaVersion = 1

// checkVersion records schemaVersion in a new file and refuses a file
// whose tables a later version wrote.
func (s *Store) checkVersion(ctx context.Context) error {
	var v int
	err := s.write(ctx, func(tx *sql.Tx) error {
		if _, err := s.stmt(tx, "schema_record").Exec(schemaVersion); err != nil {
			return err
		}
		return s.stmt(tx, "schema_version").QueryRow().Scan(&v)
	})
	if err != nil {
		return fmt.Errorf("coord/sqlite: schema version of %s: %w", s.db.Path(), err)
	}
	if v > schemaVersion {
		return fmt.Errorf("coord/sqlite: %s holds coordination tables of version %d, newer than this Rune's %d", s.db.Path(), v, schemaVersion)
	}
	return nil
}

func resolve(o *Options) error {
	for _, d := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"Retain", &o.Retain, DefaultRetain},
		{"BarrierRetain", &o.BarrierRetain, DefaultBarrierRetain},
		{"EffectsRetain", &o.EffectsRetain, DefaultEffectsRetain},
		{"SweepEvery", &o.SweepEvery, 0},
	} {
		if *d.v < 0 {
			return fmt.Errorf("coord/sqlite: Options.%s is negative (%v)", d.name, *d.v)
		}
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	if o.SweepEvery == 0 {
		o.SweepEvery = min(max(o.Retain/4, 10*time.Millisecond), time.Minute)
	}
	if o.EffectsRetain < 24*time.Hour {
		return fmt.Errorf("coord/sqlite: Options.EffectsRetain is %v, want at least a day (coord.Effects)", o.EffectsRetain)
	}
	if o.SweepBatch < 0 {
		return fmt.Errorf("coord/sqlite: Options.SweepBatch is negative (%d)", o.SweepBatch)
	}
	if o.SweepBatch == 0 {
		o.SweepBatch = DefaultSweepBatch
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return nil
}

// Coordinator is the store's coord.Coordinator.
func (s *Store) Coordinator() *Coordinator { return &s.coord }

// Barriers is the store's coord.Barriers.
func (s *Store) Barriers() *Barriers { return &s.barriers }

// Timers is the store's coord.Timers.
func (s *Store) Timers() *Timers { return &s.timers }

// Blobs is the store's coord.Blobs.
func (s *Store) Blobs() *Blobs { return &s.blobs }

// Effects is the store's coord.Effects.
func (s *Store) Effects() *Effects { return &s.effects }

// Close stops the sweep and releases the prepared statements. The seams
// must not be used after. It does not close the DB. Close is idempotent.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		close(s.stop)
		<-s.done
		s.closeStmts()
	})
	return nil
}

func (s *Store) closeStmts() {
	for _, m := range []map[string]*sql.Stmt{s.w, s.r} {
		for _, st := range m {
			st.Close()
		}
	}
}

// nowMs is the expiry clock in Unix milliseconds.
func (s *Store) nowMs() int64 { return s.opts.Now().UnixMilli() }

// write runs fn in the group commit (sqlitedb.DB.Write).
func (s *Store) write(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return s.db.Write(ctx, fn)
}

// stmt is the writer's prepared statement name, bound to tx.
func (s *Store) stmt(tx *sql.Tx, name string) *sql.Stmt {
	st, ok := s.w[name]
	if !ok {
		panic("coord/sqlite: no query " + name)
	}
	return tx.Stmt(st)
}

// read is the reader pool's prepared statement name.
func (s *Store) read(name string) *sql.Stmt {
	st, ok := s.r[name]
	if !ok {
		panic("coord/sqlite: no query " + name)
	}
	return st
}

// sweeper runs sweep every SweepEvery until Close.
func (s *Store) sweeper() {
	defer close(s.done)
	tick := time.NewTicker(s.opts.SweepEvery)
	defer tick.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-s.stop
		cancel()
	}()
	for {
		select {
		case <-s.stop:
			return
		case <-tick.C:
			if err := s.sweep(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("coord/sqlite: sweep of expired coordination state failed; it is tried again", "err", err)
			}
		}
	}
}

// sweep deletes what has expired (see the package doc), each kind by
// writes of at most SweepBatch rows, until none is left.
func (s *Store) sweep(ctx context.Context) error {
	now := s.opts.Now()
	nowMs := now.UnixMilli()
	batch := s.opts.SweepBatch
	steps := []func(tx *sql.Tx) (int, error){
		func(tx *sql.Tx) (int, error) { return s.sweepValues(tx, nowMs, batch) },
		func(tx *sql.Tx) (int, error) { return s.sweepOrphans(tx, nowMs, batch) },
		func(tx *sql.Tx) (int, error) {
			res, err := s.stmt(tx, "sweep_effects").Exec(nowMs-s.opts.EffectsRetain.Milliseconds(), batch)
			return affected(res, err)
		},
		// The Limiter's rows (microseconds) past their until.
		func(tx *sql.Tx) (int, error) { return affected(s.stmt(tx, "sweep_rate").Exec(now.UnixMicro(), batch)) },
		func(tx *sql.Tx) (int, error) {
			return affected(s.stmt(tx, "sweep_rate_res").Exec(now.UnixMicro(), batch))
		},
		func(tx *sql.Tx) (int, error) {
			return affected(s.stmt(tx, "sweep_window").Exec(now.UnixMicro(), batch))
		},
		// issue 34: events past their Keep, waits a grace past their Due.
		func(tx *sql.Tx) (int, error) {
			res, err := s.stmt(tx, "sweep_events").Exec(nowMs, batch)
			return affected(res, err)
		},
		func(tx *sql.Tx) (int, error) {
			res, err := s.stmt(tx, "sweep_evwaits").Exec(nowMs-coord.EventWaitGrace.Milliseconds(), batch)
			return affected(res, err)
		},
		// issue 36: digests past their until, their values first.
		func(tx *sql.Tx) (int, error) { return affected(s.stmt(tx, "sweep_digest_vals").Exec(nowMs, batch)) },
		func(tx *sql.Tx) (int, error) { return affected(s.stmt(tx, "sweep_digests").Exec(nowMs, batch)) },
		func(tx *sql.Tx) (int, error) { return affected(s.stmt(tx, "sweep_digest_members").Exec(nowMs, batch)) },
	}
	// Ended executions only once the Store has run for Retain: the time
	// the process was down does not count, so a redelivery after a long
	// stop still finds what it replays.
	if now.Sub(s.opened) >= s.opts.Retain {
		cutoff := nowMs - s.opts.Retain.Milliseconds()
		steps = append(steps, func(tx *sql.Tx) (int, error) { return s.sweepExecs(tx, cutoff, batch) })
	}
	for _, step := range steps {
		for {
			var n int
			err := s.write(ctx, func(tx *sql.Tx) error {
				var err error
				n, err = step(tx)
				return err
			})
			if err != nil {
				return err
			}
			if n < batch {
				break
			}
		}
	}
	return nil
}

// sweepValues deletes the values of barriers whose vals_until has passed,
// up to batch rows, and returns how many rows it deleted (batch when there
// may be more).
func (s *Store) sweepValues(tx *sql.Tx, nowMs int64, batch int) (int, error) {
	bars, err := s.barrierKeys(tx, "sweep_vals_due", nowMs, batch)
	if err != nil {
		return 0, err
	}
	budget := batch
	for _, b := range bars {
		if budget == 0 {
			break
		}
		n, err := affected(s.stmt(tx, "sweep_barval_chunk").Exec(b.exec, b.key, budget))
		if err != nil {
			return 0, err
		}
		budget -= n
		if budget > 0 {
			if _, err := s.stmt(tx, "sweep_vals_gone").Exec(b.exec, b.key); err != nil {
				return 0, err
			}
			budget-- // the barrier's own row
		}
	}
	return batch - budget, nil
}

// sweepOrphans deletes the barriers of unknown executions whose TTL has
// passed, and lets those whose execution has started since live with it.
func (s *Store) sweepOrphans(tx *sql.Tx, nowMs int64, batch int) (int, error) {
	bars, err := s.barrierKeys(tx, "sweep_bar_orphans", nowMs, batch)
	if err != nil {
		return 0, err
	}
	budget := batch
	for _, b := range bars {
		if budget == 0 {
			break
		}
		if b.known {
			if _, err := s.stmt(tx, "sweep_bar_adopt").Exec(b.exec, b.key); err != nil {
				return 0, err
			}
			budget--
			continue
		}
		n, err := affected(s.stmt(tx, "sweep_barval_chunk").Exec(b.exec, b.key, budget))
		if err != nil {
			return 0, err
		}
		budget -= n
		if budget > 0 {
			if _, err := s.stmt(tx, "sweep_bar_delete").Exec(b.exec, b.key); err != nil {
				return 0, err
			}
			budget--
		}
	}
	return batch - budget, nil
}

type barrierRef struct {
	exec, key string
	known     bool
}

// barrierKeys runs query (sweep_vals_due or sweep_bar_orphans) and returns
// its barriers.
func (s *Store) barrierKeys(tx *sql.Tx, query string, nowMs int64, limit int) ([]barrierRef, error) {
	rows, err := s.stmt(tx, query).Query(nowMs, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []barrierRef
	for rows.Next() {
		var b barrierRef
		dest := []any{&b.exec, &b.key}
		if query == "sweep_bar_orphans" {
			dest = append(dest, &b.known)
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, rows.Err()
}

// execTables are the per-execution deletes of sweepExecs, children first:
// the execution's row goes last, once nothing refers to it.
var execTables = []string{"sweep_exec_done", "sweep_exec_ctx", "sweep_exec_parked", "sweep_exec_barval", "sweep_exec_bar", "sweep_exec_blob"}

// sweepExecs deletes executions that ended at or before cutoff, with all
// their rows, up to batch rows.
func (s *Store) sweepExecs(tx *sql.Tx, cutoff int64, batch int) (int, error) {
	const limit = 64
	rows, err := s.stmt(tx, "sweep_execs").Query(cutoff, limit)
	if err != nil {
		return 0, err
	}
	var execs []string
	for rows.Next() {
		var e string
		if err := rows.Scan(&e); err != nil {
			rows.Close()
			return 0, err
		}
		execs = append(execs, e)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	budget := batch
	for _, e := range execs {
		for _, q := range execTables {
			if budget == 0 {
				return batch, nil
			}
			n, err := affected(s.stmt(tx, q).Exec(e, budget))
			if err != nil {
				return 0, err
			}
			budget -= n
		}
		if budget == 0 {
			return batch, nil // maybe rows left: the next write finishes it
		}
		if _, err := s.stmt(tx, "sweep_exec_delete").Exec(e); err != nil {
			return 0, err
		}
		budget--
	}
	if len(execs) == limit {
		return batch, nil // maybe more executions: another write
	}
	return batch - budget, nil
}

func affected(res sql.Result, err error) (int, error) {
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	return int(n), err
}

// errNoRow is errors.Is(err, sql.ErrNoRows), spelled once.
func errNoRow(err error) bool { return errors.Is(err, sql.ErrNoRows) }
