package postgres

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/rune-org/rune/store"
	"github.com/rune-org/rune/store/sqlfile"
)

//go:embed children.sql
var childrenSQL string

var childQueries = sqlfile.MustParse(childrenSQL)

func scanChildLink(row pgx.CollectableRow) (*store.ChildLink, error) {
	var l store.ChildLink
	var chain []string
	if err := row.Scan(&l.ChildID, &l.ParentID, &l.ParentNode, &l.Wake, &chain, &l.CreatedAt); err != nil {
		return nil, err
	}
	l.Chain = chain
	l.CreatedAt = l.CreatedAt.UTC()
	return &l, nil
}

func (s *Store) LinkChild(ctx context.Context, l *store.ChildLink) (*store.ChildLink, bool, error) {
	if l.ChildID == "" || l.ParentID == "" {
		return nil, false, fmt.Errorf("%w: a child link needs ChildID and ParentID", store.ErrInvalid)
	}
	chain := l.Chain
	if chain == nil {
		chain = []string{}
	}
	tag, err := s.pool.Exec(ctx, childQueries["child_link"], l.ChildID, l.ParentID, l.ParentNode, l.Wake, chain, l.CreatedAt)
	if err != nil {
		return nil, false, fmt.Errorf("postgres: link child %s: %w", l.ChildID, err)
	}
	got, err := s.ParentOf(ctx, l.ChildID)
	return got, tag.RowsAffected() == 1, err
}

func (s *Store) ParentOf(ctx context.Context, id string) (*store.ChildLink, error) {
	rows, _ := s.pool.Query(ctx, childQueries["child_parent"], id)
	l, err := pgx.CollectExactlyOneRow(rows, scanChildLink)
	if err := got("parent of "+id, "child execution "+id, err); err != nil {
		return nil, err
	}
	return l, nil
}

func (s *Store) Children(ctx context.Context, id string, limit int) ([]*store.ChildLink, error) {
	if limit < 1 || limit > store.ListLimitMax {
		return nil, fmt.Errorf("%w: limit %d is not within 1 to %d", store.ErrInvalid, limit, store.ListLimitMax)
	}
	rows, _ := s.pool.Query(ctx, childQueries["child_children"], id, limit)
	out, err := pgx.CollectRows(rows, scanChildLink)
	if err != nil {
		return nil, fmt.Errorf("postgres: children of %s: %w", id, err)
	}
	return out, nil
}
