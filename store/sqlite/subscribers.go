package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/rune-org/rune/store"
)

func (s *Store) PutSubscribers(ctx context.Context, subs []*store.Subscriber, at time.Time) ([]bool, error) {
	for _, x := range subs {
		if err := store.CheckSubscriber(x); err != nil {
			return nil, err
		}
	}
	at = orNow(at)
	created := make([]bool, len(subs))
	err := s.tx(ctx, "put subscribers", func(tx *sql.Tx) error {
		for i, x := range subs {
			body, err := json.Marshal(x)
			if err != nil {
				return err
			}
			var one int
			err = tx.QueryRowContext(ctx, notifyQueries["subscriber_exists"], x.ID).Scan(&one)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return err
			}
			created[i] = errors.Is(err, sql.ErrNoRows)
			if _, err := tx.ExecContext(ctx, notifyQueries["subscriber_put"], x.ID, string(body), micros(at)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return created, nil
}

func (s *Store) GetSubscriber(ctx context.Context, id string) (*store.Subscriber, error) {
	var body string
	var prefs sql.NullString
	var created, updated int64
	var prefsAt sql.NullInt64
	err := s.r.QueryRowContext(ctx, notifyQueries["subscriber_get"], id).Scan(&body, &created, &updated, &prefs, &prefsAt)
	if err := got("get subscriber "+id, "subscriber "+id, err); err != nil {
		return nil, err
	}
	x := &store.Subscriber{}
	if err := json.Unmarshal([]byte(body), x); err != nil {
		return nil, fmt.Errorf("sqlite: subscriber %s: %w", id, err)
	}
	x.ID, x.CreatedAt, x.UpdatedAt = id, timeOf(created), timeOf(updated)
	if prefs.Valid {
		if err := json.Unmarshal([]byte(prefs.String), &x.Preferences); err != nil {
			return nil, fmt.Errorf("sqlite: preferences of %s: %w", id, err)
		}
		x.Preferences.UpdatedAt = timeOf(prefsAt.Int64)
	}
	return x, nil
}

func (s *Store) DeleteSubscriber(ctx context.Context, id string) error {
	return s.tx(ctx, "delete subscriber "+id, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, notifyQueries["subscriber_delete"], id)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("subscriber %s: %w", id, store.ErrNotFound)
		}
		_, err = tx.ExecContext(ctx, notifyQueries["preferences_delete"], id)
		return err
	})
}

func (s *Store) PutPreferences(ctx context.Context, id string, p *store.Preferences, at time.Time) error {
	change, err := store.ReplacePreferences(p)
	if err != nil {
		return err
	}
	return s.updatePreferences(ctx, id, at, change)
}

func (s *Store) OptOutCategory(ctx context.Context, id, category string, at time.Time) error {
	change, err := store.OptOutOf(category)
	if err != nil {
		return err
	}
	return s.updatePreferences(ctx, id, at, change)
}

// updatePreferences changes subscriber id's preferences with change, in
// one transaction.
func (s *Store) updatePreferences(ctx context.Context, id string, at time.Time, change func(*store.Preferences)) error {
	return s.tx(ctx, "put preferences of "+id, func(tx *sql.Tx) error {
		var one int
		if err := got("subscriber "+id, "subscriber "+id, tx.QueryRowContext(ctx, notifyQueries["subscriber_exists"], id).Scan(&one)); err != nil {
			return err
		}
		var cur store.Preferences
		var body string
		err := tx.QueryRowContext(ctx, notifyQueries["preferences_get"], id).Scan(&body)
		switch {
		case err == nil:
			if err := json.Unmarshal([]byte(body), &cur); err != nil {
				return err
			}
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		change(&cur)
		b, err := json.Marshal(&cur)
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, notifyQueries["preferences_put"], id, string(b), micros(orNow(at)))
		return err
	})
}
