package postgres

import (
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

//go:embed templates.sql
var templatesSQL string

var templateQueries = sqlfile.MustParse(templatesSQL)

func scanTemplate(row pgx.CollectableRow) (*store.Template, error) {
	var t store.Template
	if err := row.Scan(&t.Name, &t.Version, &t.Subject, &t.Text, &t.HTML, &t.Body, &t.Layout, &t.CreatedAt, &t.DeletedAt); err != nil {
		return nil, err
	}
	t.CreatedAt, t.DeletedAt = t.CreatedAt.UTC(), utc(t.DeletedAt)
	return &t, nil
}

func (s *Store) PutTemplate(ctx context.Context, in store.TemplateInput) (*store.Template, error) {
	if in.Name == "" {
		return nil, fmt.Errorf("template name: %w", store.ErrInvalid)
	}
	t := &store.Template{Name: in.Name, Subject: in.Subject, Text: in.Text, HTML: in.HTML, Body: in.Body,
		Layout: in.Layout, CreatedAt: orNow(in.At)}
	err := s.tx(ctx, "put template "+in.Name, func(tx pgx.Tx) error {
		// The head row exists before it is locked: concurrent puts of a
		// new name take turns on it and get distinct versions.
		if _, err := tx.Exec(ctx, templateQueries["template_head_ensure"], in.Name); err != nil {
			return err
		}
		var latest int
		var deleted *time.Time
		if err := tx.QueryRow(ctx, templateQueries["template_head_lock"], in.Name).Scan(&latest, &deleted); err != nil {
			return err
		}
		t.Version = latest + 1
		if _, err := tx.Exec(ctx, templateQueries["template_head_put"], in.Name, t.Version); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, templateQueries["template_insert"], t.Name, t.Version, t.Subject, t.Text, t.HTML,
			t.Body, t.Layout, t.CreatedAt)
		return err
	})
	if err != nil {
		return nil, err
	}
	return t, nil
}

func (s *Store) GetTemplate(ctx context.Context, name string, version int) (*store.Template, error) {
	if version == 0 {
		var deleted *time.Time
		err := s.pool.QueryRow(ctx, templateQueries["template_head"], name).Scan(&version, &deleted)
		if err := sqlstore.Got("postgres", "get template "+name, "template "+name, errors.Is(err, pgx.ErrNoRows) || deleted != nil || version == 0, err); err != nil {
			return nil, err
		}
	}
	rows, _ := s.pool.Query(ctx, templateQueries["template_get"], name, version)
	t, err := pgx.CollectExactlyOneRow(rows, scanTemplate)
	if err := got("get template "+name, fmt.Sprintf("template %s version %d", name, version), err); err != nil {
		return nil, err
	}
	return t, nil
}

func (s *Store) TemplateAt(ctx context.Context, name string, at time.Time) (*store.Template, error) {
	rows, _ := s.pool.Query(ctx, templateQueries["template_at"], name, at)
	t, err := pgx.CollectExactlyOneRow(rows, scanTemplate)
	what := fmt.Sprintf("template %s at %s", name, at.UTC().Format(time.RFC3339Nano))
	if err := sqlstore.Got("postgres", "get "+what, what, errors.Is(err, pgx.ErrNoRows) || (err == nil && t.DeletedAt != nil), err); err != nil {
		return nil, err
	}
	return t, nil
}

func (s *Store) ListTemplates(ctx context.Context) ([]*store.Template, error) {
	rows, _ := s.pool.Query(ctx, templateQueries["template_list"])
	out, err := pgx.CollectRows(rows, scanTemplate)
	if err != nil {
		return nil, fmt.Errorf("postgres: list templates: %w", err)
	}
	return out, nil
}

func (s *Store) ListTemplateVersions(ctx context.Context, name string) ([]*store.Template, error) {
	rows, _ := s.pool.Query(ctx, templateQueries["template_versions"], name)
	out, err := pgx.CollectRows(rows, scanTemplate)
	if err != nil {
		return nil, fmt.Errorf("postgres: versions of template %s: %w", name, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("template %s: %w", name, store.ErrNotFound)
	}
	return out, nil
}

func (s *Store) DeleteTemplate(ctx context.Context, name string, at time.Time) error {
	at = orNow(at)
	return s.tx(ctx, "delete template "+name, func(tx pgx.Tx) error {
		var latest int
		err := tx.QueryRow(ctx, templateQueries["template_delete"], name, at).Scan(&latest)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("template %s: %w", name, store.ErrNotFound)
		}
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, templateQueries["template_deletion_insert"], name, latest, at)
		return err
	})
}
