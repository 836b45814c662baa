package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/rune-org/rune/coord"
)

// Digests implements coord.Digests on the Store's file (coord_digest,
// coord_digest_val, coord_digest_member): each call is one write in the
// group commit, a read-modify-write on the writer alone, so two Joins never
// both open a key's digest, and a Join that returned survives a kill -9.
// The sweep deletes digests coord.DigestGrace after their Closes.
type Digests struct{ s *Store }

var _ coord.Digests = (*Digests)(nil)

// Digests is the store's coord.Digests.
func (s *Store) Digests() *Digests { return &Digests{s: s} }

// Join implements coord.Digests.
func (d *Digests) Join(ctx context.Context, key string, m coord.DigestMember, now, closes time.Time) (coord.Digest, error) {
	if err := coord.CheckDigestJoin(key, m); err != nil {
		return coord.Digest{}, fmt.Errorf("coord/sqlite: Digests.Join: %w", err)
	}
	var a coord.Digest
	err := d.s.write(ctx, func(tx *sql.Tx) error {
		a = coord.Digest{}
		var closesMs int64
		err := d.s.stmt(tx, "digest_member").QueryRow(key, m.ID).Scan(&a.Opener, &a.Execution, &closesMs)
		if err == nil {
			a.Opened, a.Closes = a.Opener == m.ID, time.UnixMilli(closesMs).UTC()
			return nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		var n int
		err = d.s.stmt(tx, "digest_open").QueryRow(key).Scan(&a.Opener, &a.Execution, &closesMs, &n)
		switch {
		case err == nil && now.UnixMilli() < closesMs:
			if n >= coord.MaxDigestItems {
				return coord.ErrDigestFull
			}
			a.Closes = time.UnixMilli(closesMs).UTC()
			if _, err := d.s.stmt(tx, "digest_bump").Exec(key, a.Opener); err != nil {
				return err
			}
			if _, err := d.s.stmt(tx, "digest_val_add").Exec(key, a.Opener, n, m.Value); err != nil {
				return err
			}
			_, err = d.s.stmt(tx, "digest_member_add").Exec(key, m.ID, a.Opener, closesMs+coord.DigestGrace.Milliseconds())
			return err
		case err == nil: // its window has passed: it closes
			if _, err := d.s.stmt(tx, "digest_close").Exec(key, a.Opener); err != nil {
				return err
			}
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		closesMs = closes.UnixMilli()
		until := closesMs + coord.DigestGrace.Milliseconds()
		a = coord.Digest{Opener: m.ID, Execution: m.Execution, Opened: true, Closes: time.UnixMilli(closesMs).UTC()}
		if _, err := d.s.stmt(tx, "digest_insert").Exec(key, m.ID, m.Execution, closesMs, until); err != nil {
			return err
		}
		if _, err := d.s.stmt(tx, "digest_val_add").Exec(key, m.ID, 0, m.Value); err != nil {
			return err
		}
		_, err = d.s.stmt(tx, "digest_member_add").Exec(key, m.ID, m.ID, until)
		return err
	})
	if err != nil {
		return coord.Digest{}, fmt.Errorf("coord/sqlite: Digests.Join %q: %w", key, err)
	}
	return a, nil
}

// Take implements coord.Digests.
func (d *Digests) Take(ctx context.Context, key, opener string) ([][]byte, error) {
	if err := coord.CheckDigestKey(key, opener); err != nil {
		return nil, fmt.Errorf("coord/sqlite: Digests.Take: %w", err)
	}
	var vals [][]byte
	err := d.s.write(ctx, func(tx *sql.Tx) error {
		vals = nil
		if _, err := d.s.stmt(tx, "digest_close").Exec(key, opener); err != nil {
			return err
		}
		rows, err := d.s.stmt(tx, "digest_vals").Query(key, opener)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var v []byte
			if err := rows.Scan(&v); err != nil {
				return err
			}
			vals = append(vals, v)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("coord/sqlite: Digests.Take %q: %w", key, err)
	}
	return vals, nil
}

// Forget implements coord.Digests.
func (d *Digests) Forget(ctx context.Context, key, opener string) error {
	if err := coord.CheckDigestKey(key, opener); err != nil {
		return fmt.Errorf("coord/sqlite: Digests.Forget: %w", err)
	}
	err := d.s.write(ctx, func(tx *sql.Tx) error {
		if _, err := d.s.stmt(tx, "digest_close").Exec(key, opener); err != nil {
			return err
		}
		_, err := d.s.stmt(tx, "digest_forget").Exec(key, opener)
		return err
	})
	if err != nil {
		return fmt.Errorf("coord/sqlite: Digests.Forget %q: %w", key, err)
	}
	return nil
}
