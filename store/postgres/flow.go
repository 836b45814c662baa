package postgres

import (
	"cmp"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rune-org/rune/store"
	"github.com/rune-org/rune/store/internal/sqlstore"
	"github.com/rune-org/rune/store/sqlfile"
)

// Flow control by key (issue 35). Servers sharing the database serialise
// the writes of one key's slots with a transaction-scoped advisory lock on
// the key: Admit waits for it, Promote skips a key another server holds
// (it serves it), so no two servers ever count the same free slot twice.

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
	err = s.tx(ctx, "create execution", func(tx pgx.Tx) error {
		created, debounced = true, false
		byKey := func() (*store.Execution, error) {
			rows, _ := tx.Query(ctx, queries["execution_by_key"], x.WorkflowID, x.IdempotencyKey)
			return pgx.CollectExactlyOneRow(rows, scanExecution)
		}
		if x.IdempotencyKey != "" {
			old, err := byKey()
			if err == nil {
				x, created = old, false
				return nil
			}
			if !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
		}
		if f.DebounceKey != "" {
			if _, err := tx.Exec(ctx, flowQueries["flow_debounce_lock"], x.WorkflowID, f.DebounceKey); err != nil {
				return err
			}
			due := store.Micro(now.Add(f.Period))
			var id string
			var first time.Time
			err := tx.QueryRow(ctx, flowQueries["flow_debounce_get"], x.WorkflowID, f.DebounceKey).Scan(&id, &first)
			if err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
			if err == nil {
				if f.MaxWait > 0 && first.Add(f.MaxWait).Before(due) {
					due = store.Micro(first.Add(f.MaxWait))
				}
				tag, err := tx.Exec(ctx, flowQueries["flow_debounce_collapse"], string(x.Input), due, now, id, store.HeldUntil)
				if err != nil {
					return err
				}
				if tag.RowsAffected() == 1 {
					rows, _ := tx.Query(ctx, queries["execution_get"], id)
					old, err := pgx.CollectExactlyOneRow(rows, scanExecution)
					x, created, debounced = old, false, true
					return err
				}
			}
			if due.After(x.AvailableAt) {
				x.AvailableAt = due
			}
		}
		due := x.AvailableAt
		slot, err := slotAtCreate(ctx, tx, x, f, now)
		if err != nil {
			return err
		}
		rows, _ := tx.Query(ctx, queries["execution_create_many"], createManyArgs([]*store.Execution{x})...)
		versions, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (int, error) {
			var id string
			var v int
			return v, r.Scan(&id, &v)
		})
		if err != nil {
			return err
		}
		if len(versions) == 0 {
			if x.IdempotencyKey != "" {
				if old, err := byKey(); err == nil {
					x, created = old, false
					return nil
				}
			}
			var latest int
			var deleted *time.Time
			err = tx.QueryRow(ctx, queries["workflow_head"], x.WorkflowID).Scan(&latest, &deleted)
			missing := errors.Is(err, pgx.ErrNoRows) || err == nil && deleted != nil
			if err != nil && !missing {
				return err
			}
			if err := sqlstore.CheckHead(x, latest, missing); err != nil {
				return err
			}
			return fmt.Errorf("execution %s: %w: the id exists", x.ID, store.ErrConflict)
		}
		x.Version = versions[0]
		if prio != store.PriorityDefault {
			if _, err := tx.Exec(ctx, flowQueries["flow_set_priority"], prio, x.ID); err != nil {
				return err
			}
		}
		if slot != "" {
			if _, err := tx.Exec(ctx, flowQueries["flow_slot_insert"], x.ID, x.WorkflowID, f.ConcurrencyKey, f.Limit, prio, slot,
				x.CreatedAt.UnixMicro(), due, now); err != nil {
				return err
			}
		}
		if slot == "queued" {
			if _, err := tx.Exec(ctx, flowQueries["flow_key_touch"], x.WorkflowID, f.ConcurrencyKey, now); err != nil {
				return err
			}
		}
		if f.DebounceKey != "" {
			_, err = tx.Exec(ctx, flowQueries["flow_debounce_put"], x.WorkflowID, f.DebounceKey, x.ID, now)
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
// is due later. It takes the key's lock, as Admit does, so its counts
// agree with other servers' admissions.
func slotAtCreate(ctx context.Context, tx pgx.Tx, x *store.Execution, f store.FlowCreate, now time.Time) (string, error) {
	if f.Limit <= 0 || x.AvailableAt.After(now) {
		return "", nil
	}
	if _, err := tx.Exec(ctx, flowQueries["flow_lock"], x.WorkflowID, f.ConcurrencyKey); err != nil {
		return "", err
	}
	var running, queued int
	if err := tx.QueryRow(ctx, flowQueries["flow_queued_any"], x.WorkflowID, f.ConcurrencyKey).Scan(&queued); err != nil {
		return "", err
	}
	if queued == 0 {
		if err := tx.QueryRow(ctx, flowQueries["flow_running"], x.WorkflowID, f.ConcurrencyKey).Scan(&running); err != nil {
			return "", err
		}
		if running < f.Limit {
			return "admitted", nil
		}
	}
	x.AvailableAt = store.HeldUntil
	return "queued", nil
}

func (s *Store) SetPriority(ctx context.Context, ids []string, priority int) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := s.pool.Exec(ctx, flowQueries["flow_set_priority_many"], priority, ids)
	return sqlstore.Wrap("postgres", "set priority", err)
}

func (s *Store) Priorities(ctx context.Context, ids []string) (map[string]int, error) {
	m := map[string]int{}
	if len(ids) == 0 {
		return m, nil
	}
	rows, _ := s.pool.Query(ctx, flowQueries["flow_priorities"], ids)
	var id string
	var p int
	_, err := pgx.ForEachRow(rows, []any{&id, &p}, func() error {
		m[id] = p
		return nil
	})
	if err != nil {
		return nil, sqlstore.Wrap("postgres", "priorities", err)
	}
	return m, nil
}

func (s *Store) Admit(ctx context.Context, x *store.Execution, a store.Admission) (store.Admitted, error) {
	var out store.Admitted
	err := s.tx(ctx, "admit execution", func(tx pgx.Tx) error {
		out = store.Admitted{}
		if _, err := tx.Exec(ctx, flowQueries["flow_lock"], x.WorkflowID, a.Key); err != nil {
			return err
		}
		var state string
		err := tx.QueryRow(ctx, flowQueries["flow_slot_state"], x.ID).Scan(&state)
		switch {
		case err == nil && state == "admitted":
			out.Run = true
			return nil
		case err == nil:
			if _, err := tx.Exec(ctx, flowQueries["flow_slot_delete"], x.ID); err != nil {
				return err
			}
		case !errors.Is(err, pgx.ErrNoRows):
			return err
		}
		var running, queued, prio int
		if err := tx.QueryRow(ctx, flowQueries["flow_running"], x.WorkflowID, a.Key).Scan(&running); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, flowQueries["flow_queued_any"], x.WorkflowID, a.Key).Scan(&queued); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, flowQueries["flow_priority"], x.ID).Scan(&prio); err != nil {
			return err
		}
		insert := func(state string) error {
			_, err := tx.Exec(ctx, flowQueries["flow_slot_insert"], x.ID, x.WorkflowID, a.Key, a.Limit, prio, state,
				x.CreatedAt.UnixMicro(), x.AvailableAt, a.Now)
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
			err := tx.QueryRow(ctx, flowQueries["flow_oldest"], x.WorkflowID, a.Key, x.ID).Scan(&out.Cancel)
			if err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
		}
		if err := insert("queued"); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, flowQueries["flow_key_touch"], x.WorkflowID, a.Key, a.Now); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, flowQueries["flow_hold"], store.HeldUntil, a.Now, x.ID, a.Owner)
		return err
	})
	return out, err
}

func (s *Store) Promote(ctx context.Context, now time.Time, keys int) (int, error) {
	if _, err := s.pool.Exec(ctx, flowQueries["flow_cleanup"]); err != nil {
		return 0, sqlstore.Wrap("postgres", "promote", err)
	}
	type wk struct{ wf, key string }
	rows, _ := s.pool.Query(ctx, flowQueries["flow_keys_due"], max(keys, 1))
	ks, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (wk, error) {
		var k wk
		return k, r.Scan(&k.wf, &k.key)
	})
	if err != nil {
		return 0, sqlstore.Wrap("postgres", "promote", err)
	}
	promoted := 0
	for _, k := range ks {
		err := s.tx(ctx, "promote", func(tx pgx.Tx) error {
			var mine bool
			if err := tx.QueryRow(ctx, flowQueries["flow_try_lock"], k.wf, k.key).Scan(&mine); err != nil || !mine {
				return err // another server serves this key now
			}
			n, more, err := promoteKey(ctx, tx, k.wf, k.key, now)
			if err != nil {
				return err
			}
			promoted += n
			if more {
				_, err = tx.Exec(ctx, flowQueries["flow_key_turn"], now, k.wf, k.key)
			} else {
				_, err = tx.Exec(ctx, flowQueries["flow_key_delete"], k.wf, k.key)
			}
			return err
		})
		if err != nil {
			return promoted, err
		}
	}
	return promoted, nil
}

// promoteKey gives a key's free slots to its queue's head; more reports
// that executions of the key are still queued.
func promoteKey(ctx context.Context, tx pgx.Tx, wf, key string, now time.Time) (n int, more bool, err error) {
	var admitted int
	if err := tx.QueryRow(ctx, flowQueries["flow_admitted_count"], wf, key).Scan(&admitted); err != nil {
		return 0, false, err
	}
	type head struct {
		id     string
		lim    int
		due    time.Time
		status string
	}
	for {
		rows, _ := tx.Query(ctx, flowQueries["flow_heads"], wf, key, 64)
		hs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (head, error) {
			var h head
			return h, r.Scan(&h.id, &h.lim, &h.due, &h.status)
		})
		if err != nil || len(hs) == 0 {
			return n, false, err
		}
		dropped := false
		for _, h := range hs {
			if h.status != store.StatusEnqueued {
				if _, err := tx.Exec(ctx, flowQueries["flow_slot_delete"], h.id); err != nil {
					return n, false, err
				}
				dropped = true
				continue
			}
			if admitted >= h.lim {
				return n, true, nil
			}
			if h.due.After(now) {
				continue // not due yet (start_at): later ones may be
			}
			if _, err := tx.Exec(ctx, flowQueries["flow_admit"], h.id); err != nil {
				return n, false, err
			}
			if _, err := tx.Exec(ctx, flowQueries["flow_release"], now, now, h.id); err != nil {
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

func (s *Store) FlowState(ctx context.Context, id string) (store.FlowState, error) {
	var st store.FlowState
	if err := s.pool.QueryRow(ctx, flowQueries["flow_priority"], id).Scan(&st.Priority); err != nil {
		return st, got("flow state "+id, "execution "+id, err)
	}
	var state, wf string
	var seq int64
	err := s.pool.QueryRow(ctx, flowQueries["flow_state"], id).Scan(&st.Key, &st.Limit, &state, &st.Priority, &seq, &wf)
	switch {
	case err == nil:
		st.Queued = state == "queued"
		if err := s.pool.QueryRow(ctx, flowQueries["flow_running"], wf, st.Key).Scan(&st.Running); err != nil {
			return st, err
		}
		if st.Queued {
			if err := s.pool.QueryRow(ctx, flowQueries["flow_position"], wf, st.Key, st.Priority, seq, id).Scan(&st.Position); err != nil {
				return st, err
			}
			st.Position++
		}
	case !errors.Is(err, pgx.ErrNoRows):
		return st, err
	}
	err = s.pool.QueryRow(ctx, flowQueries["flow_debounce_of"], id).Scan(&st.DebounceKey)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return st, err
	}
	st.Debounced = err == nil
	return st, nil
}

func (s *Store) QueuedByWorkflow(ctx context.Context) (map[string]int, error) {
	rows, _ := s.pool.Query(ctx, flowQueries["flow_queued_by_workflow"])
	m := map[string]int{}
	var wf string
	var n int
	_, err := pgx.ForEachRow(rows, []any{&wf, &n}, func() error {
		m[wf] = n
		return nil
	})
	return m, err
}
