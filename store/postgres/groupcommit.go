package postgres

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rune-org/rune/store"
)

// Group commit of CreateExecution. A trigger is one row, and on a busy
// machine its synchronous commit and round trips (10–100 ms each when the
// CPUs are queued) cost far more than the insert: one commit per trigger
// capped the API at about 500 triggers/s. Concurrent CreateExecution calls
// therefore hand their row to a few committers; each takes whatever is
// waiting, inserts it all in one statement (one round trip, one commit) and
// only then answers every caller. A caller still returns only after its row
// is durable, and a lone caller waits for no one: there is no gathering
// window, a batch is whatever arrived while the previous commit ran.
const (
	// groupCommitters is how many batches may be committing at once.
	groupCommitters = 4
	// groupCommitMax bounds one batch.
	groupCommitMax = 256
)

type createReq struct {
	x    *store.Execution
	done chan createRes // buffered: the committer never blocks on it
}

type createRes struct {
	// inserted: the row is committed, with version. Otherwise err, or
	// nothing inserted (a taken id or key, a missing workflow or version:
	// the caller finds out which).
	inserted bool
	version  int
	err      error
}

// groupCommit runs the committers until close.
type groupCommit struct {
	s        *Store
	reqs     chan createReq
	stop     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup
}

func newGroupCommit(s *Store) *groupCommit {
	g := &groupCommit{s: s, reqs: make(chan createReq), stop: make(chan struct{})}
	for range groupCommitters {
		g.wg.Go(g.run)
	}
	return g
}

func (g *groupCommit) close() {
	g.stopOnce.Do(func() { close(g.stop) })
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

// commit inserts batch in one statement and answers each caller. Rows with
// an id already in the batch go in a statement of their own afterwards (the
// answer maps returned ids to callers). When the statement fails as a
// whole, each row is retried alone so one bad row fails only its caller.
func (g *groupCommit) commit(batch []createReq) {
	ctx := context.Background()
	// Rows in a stable order (workflow, idempotency key), so two batches
	// waiting on each other's keys wait in the same order, never in a cycle.
	slices.SortFunc(batch, func(a, b createReq) int {
		return cmp.Or(cmp.Compare(a.x.WorkflowID, b.x.WorkflowID), cmp.Compare(a.x.IdempotencyKey, b.x.IdempotencyKey))
	})
	var rows, later []createReq
	seen := make(map[string]bool, len(batch))
	for _, r := range batch {
		if seen[r.x.ID] {
			later = append(later, r)
			continue
		}
		seen[r.x.ID] = true
		rows = append(rows, r)
	}
	xs := make([]*store.Execution, len(rows))
	for i, r := range rows {
		xs[i] = r.x
	}
	n := len(rows)
	inserted := make(map[string]int, n)
	res, err := g.s.pool.Query(ctx, queries["execution_create_many"], createManyArgs(xs)...)
	if err == nil {
		var id string
		var version int
		_, err = pgx.ForEachRow(res, []any{&id, &version}, func() error {
			inserted[id] = version
			return nil
		})
	}
	if err != nil && n > 1 {
		later = append(later, rows...)
		rows = nil
	}
	for _, r := range rows {
		v, ok := inserted[r.x.ID]
		r.done <- createRes{inserted: ok, version: v, err: err}
	}
	for _, r := range later {
		g.commit([]createReq{r})
	}
}

// createManyArgs is xs as the column arrays of execution_create_many.
func createManyArgs(xs []*store.Execution) []any {
	n := len(xs)
	var (
		ids, workflows, statuses, inputs, triggers = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		keys                                       = make([]*string, n)
		versions, attempts                         = make([]int32, n), make([]int32, n)
		availableAt, createdAt                     = make([]time.Time, n), make([]time.Time, n)
	)
	for i, x := range xs {
		ids[i], workflows[i], statuses[i], inputs[i], triggers[i] = x.ID, x.WorkflowID, x.Status, string(x.Input), x.Trigger
		keys[i], versions[i], attempts[i] = nonEmpty(x.IdempotencyKey), int32(x.Version), int32(x.Attempts)
		availableAt[i], createdAt[i] = x.AvailableAt, x.CreatedAt
	}
	return []any{ids, workflows, versions, statuses, inputs, keys, triggers, availableAt, attempts, createdAt}
}
