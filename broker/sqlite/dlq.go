package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rune-org/rune/broker"
)

// DeadLetter is one message of the dead-letter topic.
type DeadLetter = broker.DeadLettered

// DeadLetters returns up to limit dead letters (all when limit ≤ 0), oldest
// first, and how many there are. It takes nothing away.
func (b *Broker) DeadLetters(ctx context.Context, limit int) ([]DeadLetter, int, error) {
	if b.closed.Load() {
		return nil, 0, ErrClosed
	}
	if limit <= 0 {
		limit = -1 // SQLite: no limit
	}
	tx, err := b.db.R.BeginTx(ctx, &sql.TxOptions{ReadOnly: true}) // one snapshot for the rows and the count
	if err != nil {
		return nil, 0, fmt.Errorf("sqlite broker: read dead letters: %w", err)
	}
	defer tx.Rollback()
	rs, err := tx.QueryContext(ctx, queries["dead_letters"], limit)
	if err != nil {
		return nil, 0, fmt.Errorf("sqlite broker: read dead letters: %w", err)
	}
	defer rs.Close()
	var out []DeadLetter
	for rs.Next() {
		var (
			row int64
			dl  DeadLetter
			at  int64
		)
		if err := rs.Scan(&row, &dl.ID, &dl.Key, &dl.Topic, &dl.Reason, &at, &dl.Body); err != nil {
			return nil, 0, fmt.Errorf("sqlite broker: read dead letters: %w", err)
		}
		dl.At = time.Unix(0, at)
		out = append(out, dl)
	}
	if err := rs.Err(); err != nil {
		return nil, 0, fmt.Errorf("sqlite broker: read dead letters: %w", err)
	}
	var total int
	if err := tx.QueryRowContext(ctx, queries["dead_letters_count"]).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("sqlite broker: count dead letters: %w", err)
	}
	return out, total, nil
}

// Replay publishes the dead letters whose message ids are given to the
// topics they were consumed from, unchanged, and removes them from the
// dead-letter topic in the same transaction: a crash leaves each either
// still a dead letter or published, never both or neither. A message
// dead-lettered several times is published once and every copy removed.
// fix, when not nil, may change a message before it is published (e.g. give
// it a corrected workflow definition); its error stops the replay. Only
// execution and timeout messages can be replayed. Replay returns the ids
// replayed; ids not found are an error that names them.
func (b *Broker) Replay(ctx context.Context, ids []string, fix func(broker.Message) (broker.Message, error)) ([]string, error) {
	if len(ids) == 0 {
		return nil, errors.New("sqlite broker: replay: no message ids given")
	}
	if b.closed.Load() {
		return nil, ErrClosed
	}
	want, _ := json.Marshal(ids)
	rs, err := b.db.R.QueryContext(ctx, queries["dead_letters_by_id"], string(want))
	if err != nil {
		return nil, fmt.Errorf("sqlite broker: replay: read dead letters: %w", err)
	}
	type found struct {
		rows []int64
		m    broker.Message
	}
	byID := map[string]*found{}
	var order []string
	for rs.Next() {
		var (
			row         int64
			m           broker.Message
			reason      string
			publishedAt int64
			body        []byte
		)
		if err := rs.Scan(&row, &m.ID, &m.Key, &m.Lane, &m.Trace, &m.Topic, &reason, &publishedAt, &body); err != nil {
			rs.Close()
			return nil, fmt.Errorf("sqlite broker: replay: read dead letters: %w", err)
		}
		if f := byID[m.ID]; f != nil {
			f.rows = append(f.rows, row)
			continue
		}
		if m.Topic != broker.Execution && m.Topic != broker.Timeout {
			rs.Close()
			return nil, fmt.Errorf("sqlite broker: message %s came from topic %q: only %s and %s messages can be replayed", m.ID, m.Topic, broker.Execution, broker.Timeout)
		}
		if m.Body, err = broker.Decode(m.Topic, body); err != nil {
			rs.Close()
			return nil, fmt.Errorf("sqlite broker: message %s cannot be replayed: its body does not decode as a %s message: %w", m.ID, m.Topic, err)
		}
		byID[m.ID] = &found{rows: []int64{row}, m: m}
		order = append(order, m.ID)
	}
	rs.Close()
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("sqlite broker: replay: read dead letters: %w", err)
	}
	var done []string
	for _, id := range order {
		f := byID[id]
		m := f.m
		if fix != nil {
			if m, err = fix(m); err != nil {
				return done, fmt.Errorf("message %s: %w", id, err)
			}
		}
		if err := b.replay(ctx, m, f.rows); err != nil {
			return done, err
		}
		done = append(done, id)
	}
	var missing []string
	for _, id := range ids {
		if byID[id] == nil && !slices.Contains(missing, id) {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return done, fmt.Errorf("sqlite broker: not among the dead letters: %s", strings.Join(missing, ", "))
	}
	return done, nil
}

// replay inserts m and deletes the dead-letter rows in one transaction.
func (b *Broker) replay(ctx context.Context, m broker.Message, rows []int64) error {
	m.First, m.Delay = false, 0
	body, err := broker.Encode(m)
	if err != nil {
		return fmt.Errorf("sqlite broker: replay message %s: %w", m.ID, err)
	}
	now := b.clock()
	err = b.db.Write(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, queries["insert"], string(m.Topic), now, now, m.ID, m.Key, m.Lane, m.Trace,
			false, false, body, priority(&m)); err != nil {
			return err
		}
		for _, r := range rows {
			if _, err := tx.ExecContext(ctx, queries["delete"], r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sqlite broker: replay message %s to %s: %w", m.ID, m.Topic, err)
	}
	b.signal(m.Topic)
	return nil
}

// PurgeDeadLetters deletes every dead letter and returns how many there were.
func (b *Broker) PurgeDeadLetters(ctx context.Context) (int, error) {
	if b.closed.Load() {
		return 0, ErrClosed
	}
	var n int64
	err := b.db.Write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, queries["purge_dead_letters"])
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("sqlite broker: purge dead letters: %w", err)
	}
	return int(n), nil
}
