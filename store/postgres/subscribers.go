package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rune-org/rune/store"
)

func (s *Store) PutSubscribers(ctx context.Context, subs []*store.Subscriber, at time.Time) ([]bool, error) {
	for _, x := range subs {
		if err := store.CheckSubscriber(x); err != nil {
			return nil, err
		}
	}
	if at.IsZero() {
		at = time.Now()
	}
	created := make([]bool, len(subs))
	err := s.tx(ctx, "put subscribers", func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		for _, x := range subs {
			body, err := json.Marshal(x)
			if err != nil {
				return err
			}
			b.Queue(notifyQueries["subscriber_put"], x.ID, body, store.Micro(at))
		}
		res := tx.SendBatch(ctx, b)
		for i := range subs {
			if err := res.QueryRow().Scan(&created[i]); err != nil {
				res.Close()
				return err
			}
		}
		return res.Close()
	})
	if err != nil {
		return nil, err
	}
	return created, nil
}

func (s *Store) GetSubscriber(ctx context.Context, id string) (*store.Subscriber, error) {
	var body, prefs []byte
	var prefsAt *time.Time
	x := &store.Subscriber{}
	err := s.pool.QueryRow(ctx, notifyQueries["subscriber_get"], id).Scan(&body, &x.CreatedAt, &x.UpdatedAt, &prefs, &prefsAt)
	if err := got("get subscriber "+id, "subscriber "+id, err); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(body, x); err != nil {
		return nil, fmt.Errorf("postgres: subscriber %s: %w", id, err)
	}
	x.ID, x.CreatedAt, x.UpdatedAt = id, x.CreatedAt.UTC(), x.UpdatedAt.UTC()
	if prefs != nil {
		if err := json.Unmarshal(prefs, &x.Preferences); err != nil {
			return nil, fmt.Errorf("postgres: preferences of %s: %w", id, err)
		}
		if prefsAt != nil {
			x.Preferences.UpdatedAt = prefsAt.UTC()
		}
	}
	return x, nil
}

func (s *Store) DeleteSubscriber(ctx context.Context, id string) error {
	return s.tx(ctx, "delete subscriber "+id, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, notifyQueries["subscriber_delete"], id)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("subscriber %s: %w", id, store.ErrNotFound)
		}
		_, err = tx.Exec(ctx, notifyQueries["preferences_delete"], id)
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
// one transaction holding the subscriber's row (two opt-outs at once both
// stay).
func (s *Store) updatePreferences(ctx context.Context, id string, at time.Time, change func(*store.Preferences)) error {
	if at.IsZero() {
		at = time.Now()
	}
	return s.tx(ctx, "put preferences of "+id, func(tx pgx.Tx) error {
		var one int
		if err := got("subscriber "+id, "subscriber "+id, tx.QueryRow(ctx, notifyQueries["subscriber_lock"], id).Scan(&one)); err != nil {
			return err
		}
		var cur store.Preferences
		var body []byte
		err := tx.QueryRow(ctx, notifyQueries["preferences_get"], id).Scan(&body)
		switch {
		case err == nil:
			if err := json.Unmarshal(body, &cur); err != nil {
				return err
			}
		case !errors.Is(err, pgx.ErrNoRows):
			return err
		}
		change(&cur)
		b, err := json.Marshal(&cur)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, notifyQueries["preferences_put"], id, b, store.Micro(at))
		return err
	})
}
