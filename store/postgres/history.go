package postgres

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rune-org/rune/store"
	"github.com/rune-org/rune/store/internal/sqlstore"
)

// AppendHistory applies a batch in one transaction and about four round
// trips: one pgx batch locks the touched executions (in id order) and reads
// their touched runs and already recorded events; store.ApplyBatch decides;
// a second pgx batch writes the runs, the executions and the events (each
// one statement over column arrays, unnest()ed).
func (s *Store) AppendHistory(ctx context.Context, events []store.HistoryEvent) ([]store.Event, error) {
	if len(events) == 0 {
		return nil, nil
	}
	var execIDs []string
	seenExec := map[string]bool{}
	var runE, runN, runB []string
	seenRun := map[store.RunKey]bool{}
	var keyE, keyK []string
	for _, ev := range events {
		if !seenExec[ev.ExecutionID] {
			seenExec[ev.ExecutionID] = true
			execIDs = append(execIDs, ev.ExecutionID)
		}
		if ev.Status != nil {
			if k := store.StatusRunKey(ev.Status); !seenRun[k] {
				seenRun[k] = true
				runE, runN, runB = append(runE, k.ExecutionID), append(runN, k.NodeID), append(runB, k.Branch)
			}
		}
		if ev.DedupeKey != "" {
			keyE, keyK = append(keyE, ev.ExecutionID), append(keyK, ev.DedupeKey)
		}
	}
	var out []store.Event
	err := s.tx(ctx, "append history", func(tx pgx.Tx) error {
		b := store.Batch{Executions: map[string]*store.Execution{}, Runs: map[store.RunKey]*store.NodeRun{}, Now: time.Now()}
		recorded := map[[2]string]bool{}
		var reads pgx.Batch
		reads.Queue(queries["execution_lock_many"], execIDs).Query(func(rows pgx.Rows) error {
			xs, err := pgx.CollectRows(rows, scanExecution)
			for _, x := range xs {
				b.Executions[x.ID] = x
			}
			return err
		})
		reads.Queue(queries["run_get_many"], runE, runN, runB).Query(func(rows pgx.Rows) error {
			runs, err := pgx.CollectRows(rows, scanRun)
			for _, r := range runs {
				b.Runs[r.Key()] = r
			}
			return err
		})
		reads.Queue(queries["events_recorded"], keyE, keyK).Query(func(rows pgx.Rows) error {
			var e, k string
			_, err := pgx.ForEachRow(rows, []any{&e, &k}, func() error {
				recorded[[2]string{e, k}] = true
				return nil
			})
			return err
		})
		if err := tx.SendBatch(ctx, &reads).Close(); err != nil {
			return err
		}
		b.Recorded = func(id, key string) bool { return recorded[[2]string{id, key}] }
		a := store.ApplyBatch(events, b)
		if len(a.Events) == 0 {
			return nil
		}
		var writes pgx.Batch
		if len(a.Runs) > 0 {
			writes.Queue(queries["run_upsert_many"], runColumns(a.Runs)...)
		}
		if len(a.Executions) > 0 {
			writes.Queue(queries["execution_history"], executionColumns(a.Executions)...)
		}
		out = a.Events
		queueEvents(&writes, out, a.DedupeKeys)
		return tx.SendBatch(ctx, &writes).Close()
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// insertEvents records es (and their dedupe keys, when given) in tx,
// setting their ids.
func insertEvents(ctx context.Context, tx pgx.Tx, es []store.Event, keys []string) error {
	var b pgx.Batch
	queueEvents(&b, es, keys)
	return tx.SendBatch(ctx, &b).Close()
}

// queueEvents queues the event lock and the insert of es, which sets their
// ids when the batch runs. The lock is taken last in its transaction, just
// before the insert, so it is held only until the commit that follows.
func queueEvents(b *pgx.Batch, es []store.Event, keys []string) {
	n := len(es)
	execs, kinds, bodies := make([]string, n), make([]string, n), make([]string, n)
	dedupe := make([]*string, n)
	ats := make([]time.Time, n)
	for i, e := range es {
		execs[i], kinds[i], bodies[i], ats[i] = e.ExecutionID, e.Kind, string(e.Body), e.At
		if i < len(keys) && keys[i] != "" {
			dedupe[i] = &keys[i]
		}
	}
	b.Queue(queries["event_lock"])
	b.Queue(queries["event_insert_many"], execs, dedupe, kinds, bodies, ats).Query(func(r pgx.Rows) error {
		ids, err := pgx.CollectRows(r, pgx.RowTo[int64])
		if err != nil {
			return err
		}
		if len(ids) != n {
			return fmt.Errorf("inserted %d events, got %d ids", n, len(ids))
		}
		// RETURNING gives no order; the ids were drawn in array order.
		slices.Sort(ids)
		for i := range es {
			es[i].ID = ids[i]
		}
		return nil
	})
}

func (s *Store) NodeRuns(ctx context.Context, id string) ([]*store.NodeRun, error) {
	if _, err := s.GetExecution(ctx, id); err != nil {
		return nil, err
	}
	rows, _ := s.pool.Query(ctx, queries["run_list"], id)
	runs, err := pgx.CollectRows(rows, scanRun)
	if err != nil {
		return nil, fmt.Errorf("postgres: node runs of %s: %w", id, err)
	}
	return runs, nil
}

func (s *Store) Splits(ctx context.Context, id string) ([]store.SplitProgress, error) {
	return sqlstore.Splits(s.NodeRuns(ctx, id))
}

func (s *Store) Events(ctx context.Context, f store.EventFilter) ([]store.Event, error) {
	limit := sqlstore.EventLimit(f.Limit)
	var rows pgx.Rows
	if f.ExecutionID == "" {
		rows, _ = s.pool.Query(ctx, queries["events_all"], f.AfterID, limit)
	} else {
		rows, _ = s.pool.Query(ctx, queries["events_execution"], f.ExecutionID, f.AfterID, limit)
	}
	es, err := pgx.CollectRows(rows, scanEvent)
	if err != nil {
		return nil, fmt.Errorf("postgres: events: %w", err)
	}
	return es, nil
}
