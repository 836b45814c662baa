package postgres

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/rune-org/rune/store"
)

// Group commit of CreateExecution. A trigger is one row, and on this
// machine its synchronous commit (1–20 ms) cost far more than the insert:
// one commit per trigger capped the API at about 500 triggers/s. Concurrent
// CreateExecution calls therefore hand their row to a few committers; each
// takes whatever is waiting, inserts it in one transaction (one pipelined
// round trip) and commits once, and only then answers every caller. A
// caller still returns only after its row is durable, and a lone caller
// waits for no one: there is no gathering window, a batch is whatever
// arrived while the previous commit ran.
const (
	// groupCommitters is how many batches may be committing at once.
	groupCommitters = 2
	// groupCommitMax bounds one batch.
	groupCommitMax = 256
)

type createReq struct {
	x    *store.Execution
	done chan createRes // buffered: the committer never blocks on it
}

type createRes struct {
	// inserted: the row is committed. Otherwise err, or nothing inserted
	// (a taken id or key, a missing workflow: the caller finds out which).
	inserted bool
	version  int
	err      error
}

// groupCommit runs the committers until stop is closed.
type groupCommit struct {
	s    *Store
	reqs chan createReq
	stop chan struct{}
	wg   sync.WaitGroup
}

func newGroupCommit(s *Store) *groupCommit {
	g := &groupCommit{s: s, reqs: make(chan createReq), stop: make(chan struct{})}
	for range groupCommitters {
		g.wg.Go(g.run)
	}
	return g
}

func (g *groupCommit) close() {
	close(g.stop)
	g.wg.Wait()
}

// insert commits x (in a batch with other callers' rows) and reports
// whether it was inserted.
func (g *groupCommit) insert(ctx context.Context, x *store.Execution) createRes {
	req := createReq{x: x, done: make(chan createRes, 1)}
	select {
	case g.reqs <- req:
	case <-ctx.Done():
		return createRes{err: ctx.Err()}
	case <-g.stop:
		return createRes{err: errors.New("store closed")}
	}
	// Once handed over, the row may commit: wait for the answer even if
	// ctx ends, so that an error never hides a committed trigger.
	return <-req.done
}

func (g *groupCommit) run() {
	for {
		var batch []createReq
		select {
		case <-g.stop:
			return
		case r := <-g.reqs:
			batch = append(batch, r)
		}
	gather:
		for len(batch) < groupCommitMax {
			select {
			case r := <-g.reqs:
				batch = append(batch, r)
			default:
				break gather
			}
		}
		g.commit(batch)
	}
}

// commit inserts batch in one transaction. When the transaction fails as a
// whole (a row's statement failed, or a deadlock between two batches), each
// row is retried on its own so one bad row fails only its caller.
func (g *groupCommit) commit(batch []createReq) {
	ctx := context.Background()
	// Rows in a stable order (workflow, idempotency key), so two batches
	// waiting on each other's keys wait in the same order, never in a cycle.
	slices.SortFunc(batch, func(a, b createReq) int {
		return cmp.Or(cmp.Compare(a.x.WorkflowID, b.x.WorkflowID), cmp.Compare(a.x.IdempotencyKey, b.x.IdempotencyKey))
	})
	res := make([]createRes, len(batch))
	if len(batch) == 1 {
		// Alone: one statement, its own commit, no transaction round trips.
		r := batch[0]
		err := g.s.pool.QueryRow(ctx, queries["execution_create"], executionArgs(r.x)...).Scan(&res[0].version)
		switch {
		case err == nil:
			res[0].inserted = true
		case !errors.Is(err, pgx.ErrNoRows):
			res[0].err = err
		}
		r.done <- res[0]
		return
	}
	err := pgx.BeginFunc(ctx, g.s.pool, func(tx pgx.Tx) error {
		var b pgx.Batch
		for i, r := range batch {
			b.Queue(queries["execution_create"], executionArgs(r.x)...).QueryRow(func(row pgx.Row) error {
				err := row.Scan(&res[i].version)
				if errors.Is(err, pgx.ErrNoRows) {
					return nil
				}
				res[i].inserted = err == nil
				return err
			})
		}
		return tx.SendBatch(ctx, &b).Close()
	})
	if err != nil {
		for _, r := range batch {
			g.commit([]createReq{r})
		}
		return
	}
	for i, r := range batch {
		r.done <- res[i]
	}
}
