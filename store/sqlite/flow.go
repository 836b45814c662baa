package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/rune-org/rune/store"
	"github.com/rune-org/rune/store/internal/sqlstore"
	"github.com/rune-org/rune/store/sqlfile"
)

// Flow control by key (issue 35). One writer connection serialises every
// write, so a key's slots are counted and taken in one transaction without
// further locking.

//go:embed flow.sql
var flowSQL string

var flowQueries = sqlfile.MustParse(flowSQL)

var _ store.FlowStore = (*Store)(nil)

func (s *Store) CreateFlowExecution(ctx context.Context, in store.ExecutionInput, f store.FlowCreate) (*store.Execution, bool, bool, error) {
	x, err := sqlstore.NewExecution(in)
	if err != nil {
		return nil, false, false, err
	}
	prio := cmp.Or(f.Priority, store.PriorityDefault)
	if prio < store.PriorityMin || prio > store.PriorityMax {
		return nil, false, false, fmt.Errorf("execution %s: priority %d: %w: want 1 to 10", x.ID, prio, store.ErrInvalid)
	}
	now := x.CreatedAt
	created, debounced := true, false
	err = s.tx(ctx, "create execution", func(tx *sql.Tx) error {
		if x.IdempotencyKey != "" {
			old, err := scanExecution(tx.QueryRowContext(ctx, queries["execution_by_key"], x.WorkflowID, x.IdempotencyKey))
			if err == nil {
				x, created = old, false
				return nil
			}
			if !errors.Is(err, sql.ErrNoRows) {
				return err
			}
		}
		if f.DebounceKey != "" {
			due := store.Micro(now.Add(f.Period))
			var id string
			var first int64
			err := tx.QueryRowContext(ctx, flowQueries["flow_debounce_get"], x.WorkflowID, f.DebounceKey).Scan(&id, &first)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return err
			}
			if err == nil {
				if f.MaxWait > 0 {
					due = minTime(due, timeOf(first).Add(f.MaxWait))
				}
				res, err := tx.ExecContext(ctx, flowQueries["flow_debounce_collapse"], string(x.Input), micros(due), micros(now), id, micros(store.HeldUntil))
				if err != nil {
					return err
				}
				if n, _ := res.RowsAffected(); n == 1 {
					old, err := scanExecution(tx.QueryRowContext(ctx, queries["execution_get"], id))
					x, created, debounced = old, false, true
					return err
				}
			}
			if due.After(x.AvailableAt) {
				x.AvailableAt = due
			}
		}
		due := x.AvailableAt
		slot, err := s.slotAtCreate(ctx, tx, x, f, now)
		if err != nil {
			return err
		}
		if x, created, err = createExecution(ctx, tx, x); err != nil || !created {
			return err
		}
		if slot != "" {
			if _, err := tx.ExecContext(ctx, flowQueries["flow_slot_insert"], x.ID, x.WorkflowID, f.ConcurrencyKey, f.Limit, prio, slot,
				micros(x.CreatedAt), micros(due), micros(now)); err != nil {
				return err
			}
		}
		if slot == "queued" {
			if _, err := tx.ExecContext(ctx, flowQueries["flow_key_touch"], x.WorkflowID, f.ConcurrencyKey, micros(now)); err != nil {
				return err
			}
		}
		if prio != store.PriorityDefault {
			if _, err := tx.ExecContext(ctx, flowQueries["flow_set_priority"], prio, x.ID); err != nil {
				return err
			}
		}
		if f.DebounceKey != "" {
			_, err = tx.ExecContext(ctx, flowQueries["flow_debounce_put"], x.WorkflowID, f.DebounceKey, x.ID, micros(now))
		}
		return err
	})
	if err != nil {
		return nil, false, false, err
	}
	return x, created, debounced, nil
}

// slotAtCreate decides the concurrency slot of an execution about to be
// created (store.FlowCreate's Limit) when it is due now: "admitted" when
// its key has a free slot and nothing queued (it holds the slot from now,
// as Admit would give it at the claim), else "queued", held (available_at
// HeldUntil); "" (Admit decides at the claim) when there is no limit or it
// is due later.
func (s *Store) slotAtCreate(ctx context.Context, tx *sql.Tx, x *store.Execution, f store.FlowCreate, now time.Time) (string, error) {
	if f.Limit <= 0 || x.AvailableAt.After(now) {
		return "", nil
	}
	var running, queued int
	if err := tx.QueryRowContext(ctx, flowQueries["flow_queued_any"], x.WorkflowID, f.ConcurrencyKey).Scan(&queued); err != nil {
		return "", err
	}
	if queued == 0 {
		if err := tx.QueryRowContext(ctx, flowQueries["flow_running"], x.WorkflowID, f.ConcurrencyKey).Scan(&running); err != nil {
			return "", err
		}
		if running < f.Limit {
			return "admitted", nil
		}
	}
	x.AvailableAt = store.HeldUntil
	return "queued", nil
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func (s *Store) SetPriority(ctx context.Context, ids []string, priority int) error {
	return s.tx(ctx, "set priority", func(tx *sql.Tx) error {
		for _, id := range ids {
			if _, err := tx.ExecContext(ctx, flowQueries["flow_set_priority"], priority, id); err != nil {
				return err
			}
		}
		return nil
	})
}

func (s *Store) Admit(ctx context.Context, x *store.Execution, a store.Admission) (store.Admitted, error) {
	var out store.Admitted
	// A slot taken at create or promoted stays the execution's until it
	// ends: read on a reader, it costs no turn at the one writer, which a
	// burst of creates keeps busy.
	var state string
	err := s.r.QueryRowContext(ctx, flowQueries["flow_slot_state"], x.ID).Scan(&state)
	if err == nil && state == "admitted" {
		return store.Admitted{Run: true}, nil
	}
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return out, sqlstore.Wrap("sqlite", "admit execution", err)
	}
	err = s.tx(ctx, "admit execution", func(tx *sql.Tx) error {
		var state string
		err := tx.QueryRowContext(ctx, flowQueries["flow_slot_state"], x.ID).Scan(&state)
		switch {
		case err == nil && state == "admitted":
			out.Run = true
			return nil
		case err == nil:
			// Queued, yet claimed: decided again below.
			if _, err := tx.ExecContext(ctx, flowQueries["flow_slot_delete"], x.ID); err != nil {
				return err
			}
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		var running, queued int
		if err := tx.QueryRowContext(ctx, flowQueries["flow_running"], x.WorkflowID, a.Key).Scan(&running); err != nil {
			return err
		}
		if err := tx.QueryRowContext(ctx, flowQueries["flow_queued_any"], x.WorkflowID, a.Key).Scan(&queued); err != nil {
			return err
		}
		prio := store.PriorityDefault
		if err := tx.QueryRowContext(ctx, flowQueries["flow_priority"], x.ID).Scan(&prio); err != nil {
			return err
		}
		insert := func(state string) error {
			_, err := tx.ExecContext(ctx, flowQueries["flow_slot_insert"], x.ID, x.WorkflowID, a.Key, a.Limit, prio, state,
				micros(x.CreatedAt), micros(x.AvailableAt), micros(a.Now))
			return err
		}
		if running < a.Limit && queued == 0 {
			out.Run = true
			return insert("admitted")
		}
		switch a.OnLimit {
		case store.OnLimitDrop:
			out.Drop = true
			return nil
		case store.OnLimitCancelOldest:
			err := tx.QueryRowContext(ctx, flowQueries["flow_oldest"], x.WorkflowID, a.Key, x.ID).Scan(&out.Cancel)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return err
			}
		}
		if err := insert("queued"); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, flowQueries["flow_key_touch"], x.WorkflowID, a.Key, micros(a.Now)); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, flowQueries["flow_hold"], micros(store.HeldUntil), micros(a.Now), x.ID, a.Owner)
		return err
	})
	return out, err
}

func (s *Store) Promote(ctx context.Context, now time.Time, keys int) (int, error) {
	promoted := 0
	err := s.tx(ctx, "promote", func(tx *sql.Tx) error {
		promoted = 0
		if _, err := tx.ExecContext(ctx, flowQueries["flow_cleanup"]); err != nil {
			return err
		}
		type wk struct{ wf, key string }
		ks, err := queryAll(ctx, tx, func(sc scanner) (wk, error) {
			var k wk
			return k, sc.Scan(&k.wf, &k.key)
		}, flowQueries["flow_keys_due"], max(keys, 1))
		if err != nil {
			return err
		}
		for _, k := range ks {
			n, more, err := promoteKey(ctx, tx, k.wf, k.key, now)
			if err != nil {
				return err
			}
			promoted += n
			q := "flow_key_turn"
			if !more {
				q = "flow_key_delete"
			}
			args := []any{micros(now), k.wf, k.key}
			if !more {
				args = args[1:]
			}
			if _, err := tx.ExecContext(ctx, flowQueries[q], args...); err != nil {
				return err
			}
		}
		return nil
	})
	return promoted, err
}

// promoteKey gives a key's free slots to its queue's head; more reports
// that executions of the key are still queued.
func promoteKey(ctx context.Context, tx *sql.Tx, wf, key string, now time.Time) (n int, more bool, err error) {
	var admitted int
	if err := tx.QueryRowContext(ctx, flowQueries["flow_admitted_count"], wf, key).Scan(&admitted); err != nil {
		return 0, false, err
	}
	type head struct {
		id     string
		lim    int
		due    int64
		status string
	}
	for {
		hs, err := queryAll(ctx, tx, func(sc scanner) (head, error) {
			var h head
			return h, sc.Scan(&h.id, &h.lim, &h.due, &h.status)
		}, flowQueries["flow_heads"], wf, key, 64)
		if err != nil || len(hs) == 0 {
			return n, false, err
		}
		dropped := false
		for _, h := range hs {
			if h.status != store.StatusEnqueued {
				if _, err := tx.ExecContext(ctx, flowQueries["flow_slot_delete"], h.id); err != nil {
					return n, false, err
				}
				dropped = true
				continue
			}
			if admitted >= h.lim {
				return n, true, nil
			}
			if h.due > micros(now) {
				continue // not due yet (start_at): later ones may be
			}
			if _, err := tx.ExecContext(ctx, flowQueries["flow_admit"], h.id); err != nil {
				return n, false, err
			}
			if _, err := tx.ExecContext(ctx, flowQueries["flow_release"], max(h.due, micros(now)), micros(now), h.id); err != nil {
				return n, false, err
			}
			admitted++
			n++
		}
		if !dropped {
			return n, true, nil
		}
	}
}

func (s *Store) Priorities(ctx context.Context, ids []string) (map[string]int, error) {
	m := map[string]int{}
	if len(ids) == 0 {
		return m, nil
	}
	list, err := json.Marshal(ids)
	if err != nil {
		return nil, err
	}
	rows, err := s.r.QueryContext(ctx, flowQueries["flow_priorities"], string(list))
	if err != nil {
		return nil, sqlstore.Wrap("sqlite", "priorities", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var p int
		if err := rows.Scan(&id, &p); err != nil {
			return nil, err
		}
		m[id] = p
	}
	return m, sqlstore.Wrap("sqlite", "priorities", rows.Err())
}

func (s *Store) FlowState(ctx context.Context, id string) (store.FlowState, error) {
	var st store.FlowState
	if err := s.r.QueryRowContext(ctx, flowQueries["flow_priority"], id).Scan(&st.Priority); err != nil {
		return st, got("flow state "+id, "execution "+id, err)
	}
	var state, wf string
	var seq int64
	err := s.r.QueryRowContext(ctx, flowQueries["flow_state"], id).Scan(&st.Key, &st.Limit, &state, &st.Priority, &seq, &wf)
	switch {
	case err == nil:
		st.Queued = state == "queued"
		if err := s.r.QueryRowContext(ctx, flowQueries["flow_running"], wf, st.Key).Scan(&st.Running); err != nil {
			return st, err
		}
		if st.Queued {
			if err := s.r.QueryRowContext(ctx, flowQueries["flow_position"], wf, st.Key, st.Priority, seq, id).Scan(&st.Position); err != nil {
				return st, err
			}
			st.Position++
		}
	case !errors.Is(err, sql.ErrNoRows):
		return st, err
	}
	err = s.r.QueryRowContext(ctx, flowQueries["flow_debounce_of"], id).Scan(&st.DebounceKey)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return st, err
	}
	st.Debounced = err == nil
	return st, nil
}

func (s *Store) QueuedByWorkflow(ctx context.Context) (map[string]int, error) {
	rows, err := s.r.QueryContext(ctx, flowQueries["flow_queued_by_workflow"])
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	m := map[string]int{}
	for rows.Next() {
		var wf string
		var n int
		if err := rows.Scan(&wf, &n); err != nil {
			return nil, err
		}
		m[wf] = n
	}
	return m, rows.Err()
}
