// Package sqlitedb opens a SQLite file the way Rune's durable parts share it
// (WAL, one writer connection, a pool of readers) and commits their writes in
// groups: many callers' small transactions become one SQLite transaction, so
// the fsync-free WAL commit is paid once per group rather than once per call.
package sqlitedb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Options configures Open. The zero value is ready to use.
type Options struct {
	// BusyTimeout is how long a statement waits for another connection's
	// lock before it fails. Default 10s.
	BusyTimeout time.Duration
	// ReadConns is the size of the reader pool. Default 4.
	ReadConns int
	// Synchronous is SQLite's synchronous pragma. Default "NORMAL": in WAL
	// mode a commit survives the process being killed (the WAL is in the OS's
	// page cache) but not the machine losing power; "FULL" survives that too,
	// at one fsync per group commit.
	Synchronous string
	// MaxGroup bounds how many Write calls share one transaction. Default 512.
	MaxGroup int
}

// DB is one SQLite file: W, its single writer connection (use it through
// Write, or directly for schema set-up), and R, a pool of query-only readers.
// Readers see what committed writes left, never a group in progress.
type DB struct {
	W, R *sql.DB
	path string
	opts Options

	reqs    chan *writeReq
	stop    chan struct{}
	stopped chan struct{}
	once    sync.Once
}

type writeReq struct {
	ctx  context.Context
	fn   func(*sql.Tx) error
	done chan error
}

// ErrClosed is returned by Write after Close.
var ErrClosed = errors.New("sqlitedb: closed")

// Open opens (creating it when missing) the SQLite file at path.
func Open(ctx context.Context, path string, opts Options) (*DB, error) {
	if path == "" {
		return nil, errors.New("sqlitedb: path: missing")
	}
	if opts.BusyTimeout <= 0 {
		opts.BusyTimeout = 10 * time.Second
	}
	if opts.ReadConns <= 0 {
		opts.ReadConns = 4
	}
	if opts.Synchronous == "" {
		opts.Synchronous = "NORMAL"
	}
	if opts.MaxGroup <= 0 {
		opts.MaxGroup = 512
	}
	dsn := func(extra string) string {
		return "file:" + (&url.URL{Path: path}).EscapedPath() + "?_pragma=busy_timeout(" +
			fmt.Sprint(opts.BusyTimeout.Milliseconds()) + ")&_pragma=journal_mode(WAL)&_pragma=synchronous(" +
			opts.Synchronous + ")&_txlock=immediate" + extra
	}
	w, err := sql.Open("sqlite", dsn(""))
	if err != nil {
		return nil, fmt.Errorf("sqlitedb: open %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetConnMaxIdleTime(0)
	if err := Ping(ctx, w, opts.BusyTimeout); err != nil {
		w.Close()
		return nil, fmt.Errorf("sqlitedb: open %s: %w", path, err)
	}
	r, err := sql.Open("sqlite", dsn("&_pragma=query_only(ON)"))
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("sqlitedb: open %s: %w", path, err)
	}
	r.SetMaxOpenConns(opts.ReadConns)
	d := &DB{W: w, R: r, path: path, opts: opts,
		reqs: make(chan *writeReq, opts.MaxGroup), stop: make(chan struct{}), stopped: make(chan struct{})}
	go d.writeLoop()
	return d, nil
}

// Ping opens db's first connection. Turning a new file to WAL takes an
// exclusive lock and fails at once, without the busy timeout, when another
// process is doing the same: that is retried for up to timeout.
func Ping(ctx context.Context, db *sql.DB, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := db.PingContext(ctx)
		var se *sqlite.Error
		if err == nil || !errors.As(err, &se) || se.Code()&0xff != sqlite3.SQLITE_BUSY || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Path is the file's path.
func (d *DB) Path() string { return d.path }

// Write runs fn in a transaction shared with other concurrent Write calls and
// returns once that transaction has committed (nil) or failed. fn runs inside
// a savepoint of its own: when it returns an error, only its changes are
// rolled back, and Write returns that error; the group's other calls commit.
// fn must not keep tx, and runs on the writer's goroutine, one call at a
// time, so a read-modify-write inside fn is atomic. A ctx done before fn
// starts returns ctx.Err() and runs nothing; once fn has run, Write waits for
// the commit whatever ctx says, so a nil return always means committed.
func (d *DB) Write(ctx context.Context, fn func(*sql.Tx) error) error {
	req := &writeReq{ctx: ctx, fn: fn, done: make(chan error, 1)}
	select {
	case <-d.stop:
		return ErrClosed
	default:
	}
	select {
	case d.reqs <- req:
	case <-d.stop:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	// A request queued as Close stops the writer may be taken by no one:
	// once the writer has stopped, what it did not answer is closed out.
	select {
	case err := <-req.done:
		return err
	case <-d.stopped:
		select {
		case err := <-req.done:
			return err
		default:
			return ErrClosed
		}
	}
}

func (d *DB) writeLoop() {
	defer close(d.stopped)
	group := make([]*writeReq, 0, d.opts.MaxGroup)
	for {
		var first *writeReq
		select {
		case first = <-d.reqs:
		case <-d.stop:
			d.failPending(ErrClosed)
			return
		}
		group = append(group[:0], first)
	fill:
		for len(group) < d.opts.MaxGroup {
			select {
			case r := <-d.reqs:
				group = append(group, r)
			default:
				break fill
			}
		}
		d.commit(group)
	}
}

// commit runs one group in one transaction.
func (d *DB) commit(group []*writeReq) {
	results := make([]error, len(group))
	tx, err := d.W.BeginTx(context.Background(), nil)
	if err != nil {
		for _, r := range group {
			r.done <- fmt.Errorf("sqlitedb: begin: %w", err)
		}
		return
	}
	for i, r := range group {
		if err := r.ctx.Err(); err != nil {
			results[i] = err
			continue
		}
		if _, err := tx.Exec("SAVEPOINT w"); err != nil {
			results[i] = err
			continue
		}
		if err := r.fn(tx); err != nil {
			results[i] = err
			if _, rerr := tx.Exec("ROLLBACK TO w"); rerr != nil {
				results[i] = errors.Join(err, rerr)
			}
		}
		if _, err := tx.Exec("RELEASE w"); err != nil && results[i] == nil {
			results[i] = err
		}
	}
	if err := tx.Commit(); err != nil {
		for _, r := range group {
			r.done <- fmt.Errorf("sqlitedb: commit: %w", err)
		}
		return
	}
	for i, r := range group {
		r.done <- results[i]
	}
}

func (d *DB) failPending(err error) {
	for {
		select {
		case r := <-d.reqs:
			r.done <- err
		default:
			return
		}
	}
}

// Close stops the writer after the group in progress and closes both pools.
// Write calls still queued return ErrClosed.
func (d *DB) Close() error {
	d.once.Do(func() { close(d.stop) })
	<-d.stopped
	return errors.Join(d.R.Close(), d.W.Close())
}
