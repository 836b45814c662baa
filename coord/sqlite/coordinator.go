package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/rune-org/rune/coord"
	"github.com/rune-org/rune/message"
)

// Coordinator implements coord.Coordinator on the Store's file: an
// execution is a row of coord_exec (live count, first halt, completer),
// its finished ids and Records rows of coord_done, its final context rows of
// coord_ctx (one JSON value per key, decoded only for the Outcome: numbers
// come back as float64, as from Redis), its parked ids rows of
// coord_parked. Finish encodes the Record, Halt and End before it joins the
// group commit, and decodes the final context after, so the writer only
// runs SQL.
type Coordinator struct{ s *Store }

var _ coord.Coordinator = (*Coordinator)(nil)

// Start implements coord.Coordinator.
func (c *Coordinator) Start(ctx context.Context, exec string, n int) error {
	if exec == "" {
		return errors.New("coord/sqlite: Start: empty execution id")
	}
	if n < 1 {
		return fmt.Errorf("coord/sqlite: Start exec %q: n is %d, want at least 1", exec, n)
	}
	err := c.s.write(ctx, func(tx *sql.Tx) error {
		_, err := c.s.stmt(tx, "exec_start").Exec(exec, n)
		return err
	})
	if err != nil {
		return fmt.Errorf("coord/sqlite: Start exec %q: %w", exec, err)
	}
	return nil
}

// Begin implements coord.Coordinator. It only reads.
func (c *Coordinator) Begin(ctx context.Context, exec, id string) (coord.Begin, error) {
	var (
		live        int
		halted, fin bool
		rec         []byte
	)
	err := c.s.read("r_exec_begin").QueryRowContext(ctx, exec, id).Scan(&live, &halted, &fin, &rec)
	switch {
	case errNoRow(err):
		return coord.Begin{State: coord.Drop}, nil // unknown or expired
	case err != nil:
		return coord.Begin{}, fmt.Errorf("coord/sqlite: Begin exec %q id %q: %w", exec, id, err)
	case fin:
		return coord.Begin{State: coord.Replay, Record: rec}, nil
	case halted || live <= 0:
		return coord.Begin{State: coord.Drop}, nil
	}
	return coord.Begin{State: coord.Run}, nil
}

// finished is what Finish's write read for an Outcome that needs decoding:
// the stored halt and final context of an ended execution.
type finished struct {
	o      coord.Outcome
	ended  bool
	halt   sql.NullString
	ctxRaw string // a JSON object
}

// Finish implements coord.Coordinator.
func (c *Coordinator) Finish(ctx context.Context, exec, id string, f coord.Finish) (coord.Outcome, error) {
	where := func(format string, a ...any) error {
		return fmt.Errorf("coord/sqlite: Finish exec %q id %q: "+format, append([]any{exec, id}, a...)...)
	}
	rec, err := f.Encode(exec)
	if err != nil {
		return coord.Outcome{}, where("%w", err)
	}
	var halt any // NULL unless halting
	if f.Halt != nil {
		b, err := json.Marshal(f.Halt)
		if err != nil {
			return coord.Outcome{}, where("encode Halt: %w", err)
		}
		halt = string(b)
	}
	var end []byte // one JSON object, nil without End
	if len(f.End) > 0 {
		var err error
		if end, err = json.Marshal(f.End); err != nil {
			for k, v := range f.End { // name the key
				if _, kerr := json.Marshal(v); kerr != nil {
					return coord.Outcome{}, where("encode End key %q: %w", k, kerr)
				}
			}
			return coord.Outcome{}, where("encode End: %w", err)
		}
	}

	var r finished
	err = c.s.write(ctx, func(tx *sql.Tx) error {
		r = finished{}
		return c.finish(tx, exec, id, f, rec, halt, end, &r)
	})
	if err != nil {
		return coord.Outcome{}, where("%w", err)
	}
	if r.ended {
		if err := r.decode(); err != nil {
			return coord.Outcome{}, where("%w", err)
		}
	}
	return r.o, nil
}

// finish is Finish's write; it fills r. The usual Finish (a new id of a
// live execution) takes two statements: the insert of id, and the
// accounting, which also says whether the rules let it count; anything
// else (a duplicate, an ended or halted execution, IfLast not last) reads
// the execution first (finishSlow).
func (c *Coordinator) finish(tx *sql.Tx, exec, id string, f coord.Finish, rec []byte, halt any, end []byte, r *finished) error {
	n, err := affected(c.s.stmt(tx, "done_insert").Exec(exec, id, rec))
	if err != nil {
		return err
	}
	if n == 0 {
		return c.finishSlow(tx, exec, id, f, r) // finished before
	}
	var live, parked int
	err = c.s.stmt(tx, "exec_account").QueryRow(exec, f.Spawned-1, halt, f.Mode.Optimistic(), f.Mode.IfLast(), id, c.s.nowMs()).Scan(&live, &parked)
	if errNoRow(err) {
		if _, err := c.s.stmt(tx, "done_undo").Exec(exec, id); err != nil {
			return err
		}
		return c.finishSlow(tx, exec, id, f, r)
	}
	if err != nil {
		return err
	}
	if parked > 0 {
		forgot, err := affected(c.s.stmt(tx, "parked_forget").Exec(exec, id))
		if err != nil {
			return err
		}
		if forgot > 0 {
			if _, err := c.s.stmt(tx, "exec_parked_dec").Exec(exec); err != nil {
				return err
			}
		}
	}
	if end != nil {
		if _, err := c.s.stmt(tx, "ctx_set").Exec(exec, string(end)); err != nil {
			return err
		}
	}
	if live > 0 {
		return nil
	}
	return c.ending(tx, exec, r)
}

// finishSlow is a Finish that the fast path did not record: it reads the
// execution and id and answers by the rules, recording nothing.
func (c *Coordinator) finishSlow(tx *sql.Tx, exec, id string, f coord.Finish, r *finished) error {
	var (
		live                              int
		halted, isLast, published, wasFin bool
		stored                            []byte
	)
	err := c.s.stmt(tx, "exec_finish_lookup").QueryRow(exec, id).Scan(&live, &halted, &isLast, &published, &wasFin, &stored)
	if errNoRow(err) {
		return coord.ErrUnknownExecution
	}
	if err != nil {
		return err
	}
	switch {
	case wasFin && f.Mode.Optimistic():
		r.o = coord.Outcome{Case: coord.Replayed, Record: stored}
		return nil
	case wasFin:
		r.o = coord.Outcome{Case: coord.Duplicate}
		if published {
			r.o.Case = coord.DuplicatePublished
		}
		if isLast {
			return c.ending(tx, exec, r)
		}
		return nil
	case live <= 0:
		return fmt.Errorf("execution has ended: %w", coord.ErrUnknownExecution)
	case f.Mode.Optimistic() && halted:
		r.o = coord.Outcome{Case: coord.Dropped}
		return nil
	case f.Mode.IfLast() && live+f.Spawned-1 > 0:
		r.o = coord.Outcome{Case: coord.NotLast}
		return nil
	}
	// The fast path's accounting refused what these rules accept.
	return fmt.Errorf("execution %q in an unexpected state (live %d, halted %v)", exec, live, halted)
}

// ending reads an ended execution's halt and final context into r.
func (c *Coordinator) ending(tx *sql.Tx, exec string, r *finished) error {
	r.ended = true
	if err := c.s.stmt(tx, "exec_halt").QueryRow(exec).Scan(&r.halt); err != nil {
		return err
	}
	return c.s.stmt(tx, "ctx_all").QueryRow(exec).Scan(&r.ctxRaw)
}

// decode completes the Outcome of an ended execution from what ending read.
func (r *finished) decode() error {
	c := &coord.Completion{Status: message.CompletionCompleted}
	r.o.Completion = c
	if r.halt.Valid {
		c.Status = message.CompletionHalted
		c.Failure = new(message.Failure)
		if err := json.Unmarshal([]byte(r.halt.String), c.Failure); err != nil {
			return fmt.Errorf("decode stored Failure: %w", err)
		}
	}
	if err := json.Unmarshal([]byte(r.ctxRaw), &c.FinalContext); err != nil {
		return fmt.Errorf("decode the final context: %w", err)
	}
	if c.FinalContext == nil {
		c.FinalContext = map[string]any{}
	}
	return nil
}

// Park implements coord.Coordinator. Nothing of a live execution expires
// here, so due changes nothing.
func (c *Coordinator) Park(ctx context.Context, exec, id string, _ time.Time) (bool, error) {
	wake := false
	err := c.s.write(ctx, func(tx *sql.Tx) error {
		wake = false
		var (
			live   int
			halted bool
		)
		err := c.s.stmt(tx, "exec_state").QueryRow(exec).Scan(&live, &halted)
		if errNoRow(err) || err == nil && (halted || live <= 0) {
			wake = true
			return nil
		}
		if err != nil {
			return err
		}
		n, err := affected(c.s.stmt(tx, "parked_add").Exec(exec, id))
		if err != nil || n == 0 {
			return err
		}
		_, err = c.s.stmt(tx, "exec_parked_inc").Exec(exec)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("coord/sqlite: Park exec %q id %q: %w", exec, id, err)
	}
	return wake, nil
}

// Parked implements coord.Coordinator.
func (c *Coordinator) Parked(ctx context.Context, exec string) ([]string, error) {
	rows, err := c.s.read("r_parked_list").QueryContext(ctx, exec)
	if err != nil {
		return nil, fmt.Errorf("coord/sqlite: Parked exec %q: %w", exec, err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("coord/sqlite: Parked exec %q: %w", exec, err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("coord/sqlite: Parked exec %q: %w", exec, err)
	}
	return ids, nil
}

// Published implements coord.Coordinator.
func (c *Coordinator) Published(ctx context.Context, exec string) error {
	err := c.s.write(ctx, func(tx *sql.Tx) error {
		_, err := c.s.stmt(tx, "exec_published").Exec(exec)
		return err
	})
	if err != nil {
		return fmt.Errorf("coord/sqlite: Published exec %q: %w", exec, err)
	}
	return nil
}
