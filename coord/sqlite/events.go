package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/rune-org/rune/coord"
)

// Events implements coord.Events on the Store's file: a row of
// coord_evwait per wait and of coord_event per delivered event, keyed by
// the pair's coord.EventPair. Each call is one write in the group commit, a
// read-modify-write on the writer alone, so a Deliver and a Register never
// miss each other. The sweep deletes events past their Keep and waits
// coord.EventWaitGrace past their Due.
type Events struct{ s *Store }

var _ coord.Events = (*Events)(nil)

// Events is the store's coord.Events.
func (s *Store) Events() *Events { return &s.events }

const (
	evRegistered = 0
	evMatched    = 1
	evTaken      = 2
)

// Register implements coord.Events.
func (e *Events) Register(ctx context.Context, now time.Time, w coord.EventWait) (*coord.Event, error) {
	if err := coord.CheckEventWait(w); err != nil {
		return nil, fmt.Errorf("coord/sqlite: Events.Register: %w", err)
	}
	pair := coord.EventPair(w.Name, w.Key)
	var match []byte
	err := e.s.write(ctx, func(tx *sql.Tx) error {
		var state int
		err := e.s.stmt(tx, "evwait_get").QueryRow(pair, w.Timer).Scan(&state, &match)
		if err == nil {
			return nil // registered before: its match, if any
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		err = e.s.stmt(tx, "event_first_since").QueryRow(pair, w.Since.UnixMilli(), now.UnixMilli()).Scan(&match)
		state = evMatched
		if errors.Is(err, sql.ErrNoRows) {
			match, state, err = nil, evRegistered, nil
		}
		if err != nil {
			return err
		}
		_, err = e.s.stmt(tx, "evwait_insert").Exec(pair, w.Timer, w.Since.UnixMilli(), w.Due.UnixMilli(), state, match)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("coord/sqlite: Events.Register %s: %w", w.Timer, err)
	}
	return decodeEvent(match)
}

// Deliver implements coord.Events.
func (e *Events) Deliver(ctx context.Context, ev coord.Event) ([]string, error) {
	if err := coord.CheckEvent(ev); err != nil {
		return nil, fmt.Errorf("coord/sqlite: Events.Deliver: %w", err)
	}
	pair := coord.EventPair(ev.Name, ev.Key)
	enc, err := json.Marshal(ev)
	if err != nil {
		return nil, fmt.Errorf("coord/sqlite: Events.Deliver: %w", err)
	}
	var matched []string
	err = e.s.write(ctx, func(tx *sql.Tx) error {
		matched = nil
		var prev string
		err := e.s.stmt(tx, "event_matched").QueryRow(pair, ev.ID).Scan(&prev)
		if err == nil {
			return json.Unmarshal([]byte(prev), &matched)
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		rows, err := e.s.stmt(tx, "evwait_match").Query(pair, ev.At.UnixMilli(), enc)
		if err != nil {
			return err
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			matched = append(matched, id)
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return err
		}
		list, err := json.Marshal(append([]string{}, matched...))
		if err != nil {
			return err
		}
		_, err = e.s.stmt(tx, "event_insert").Exec(pair, ev.ID, ev.At.UnixMilli(), ev.Keep.UnixMilli(), enc, string(list))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("coord/sqlite: Events.Deliver %s: %w", ev.ID, err)
	}
	return matched, nil
}

// Take implements coord.Events.
func (e *Events) Take(ctx context.Context, w coord.EventWait) (*coord.Event, error) {
	if err := coord.CheckEventWait(w); err != nil {
		return nil, fmt.Errorf("coord/sqlite: Events.Take: %w", err)
	}
	pair := coord.EventPair(w.Name, w.Key)
	var match []byte
	err := e.s.write(ctx, func(tx *sql.Tx) error {
		if _, err := e.s.stmt(tx, "evwait_timeout").Exec(pair, w.Timer); err != nil {
			return err
		}
		var state int
		err := e.s.stmt(tx, "evwait_get").QueryRow(pair, w.Timer).Scan(&state, &match)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("coord/sqlite: Events.Take %s: %w", w.Timer, err)
	}
	return decodeEvent(match)
}

// Forget implements coord.Events.
func (e *Events) Forget(ctx context.Context, w coord.EventWait) error {
	if err := coord.CheckEventWait(w); err != nil {
		return fmt.Errorf("coord/sqlite: Events.Forget: %w", err)
	}
	err := e.s.write(ctx, func(tx *sql.Tx) error {
		_, err := e.s.stmt(tx, "evwait_forget").Exec(coord.EventPair(w.Name, w.Key), w.Timer)
		return err
	})
	if err != nil {
		return fmt.Errorf("coord/sqlite: Events.Forget %s: %w", w.Timer, err)
	}
	return nil
}

func decodeEvent(b []byte) (*coord.Event, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var ev coord.Event
	if err := json.Unmarshal(b, &ev); err != nil {
		return nil, fmt.Errorf("coord/sqlite: a stored event: %w", err)
	}
	return &ev, nil
}
