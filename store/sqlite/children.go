package sqlite

import (
	"context"
	"database/sql"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/rune-org/rune/store"
	"github.com/rune-org/rune/store/sqlfile"
)

//go:embed children.sql
var childrenSQL string

var childQueries = sqlfile.MustParse(childrenSQL)

func scanChildLink(s scanner) (*store.ChildLink, error) {
	var l store.ChildLink
	var chain string
	var created int64
	if err := s.Scan(&l.ChildID, &l.ParentID, &l.ParentNode, &l.Wake, &chain, &created); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(chain), &l.Chain); err != nil {
		return nil, fmt.Errorf("child %s: chain: %w", l.ChildID, err)
	}
	l.CreatedAt = timeOf(created)
	return &l, nil
}

func (s *Store) LinkChild(ctx context.Context, l *store.ChildLink) (*store.ChildLink, bool, error) {
	if l.ChildID == "" || l.ParentID == "" {
		return nil, false, fmt.Errorf("%w: a child link needs ChildID and ParentID", store.ErrInvalid)
	}
	chain, err := json.Marshal(l.Chain)
	if err != nil {
		return nil, false, err
	}
	if l.Chain == nil {
		chain = []byte("[]")
	}
	var linked bool
	err = s.tx(ctx, "link child "+l.ChildID, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, childQueries["child_link"], l.ChildID, l.ParentID, l.ParentNode, l.Wake, string(chain), micros(l.CreatedAt))
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		linked = n == 1
		return err
	})
	if err != nil {
		return nil, false, err
	}
	got, err := s.ParentOf(ctx, l.ChildID)
	return got, linked, err
}

func (s *Store) ParentOf(ctx context.Context, id string) (*store.ChildLink, error) {
	l, err := scanChildLink(s.r.QueryRowContext(ctx, childQueries["child_parent"], id))
	if err := got("parent of "+id, "child execution "+id, err); err != nil {
		return nil, err
	}
	return l, nil
}

func (s *Store) Children(ctx context.Context, id string, limit int) ([]*store.ChildLink, error) {
	if limit < 1 || limit > store.ListLimitMax {
		return nil, fmt.Errorf("%w: limit %d is not within 1 to %d", store.ErrInvalid, limit, store.ListLimitMax)
	}
	rows, err := s.r.QueryContext(ctx, childQueries["child_children"], id, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: children of %s: %w", id, err)
	}
	defer rows.Close()
	var out []*store.ChildLink
	for rows.Next() {
		l, err := scanChildLink(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	if err := rows.Err(); err != nil && !errors.Is(err, context.Canceled) {
		return nil, err
	}
	return out, rows.Err()
}
