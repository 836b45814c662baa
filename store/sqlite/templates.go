package sqlite

import (
	"context"
	"database/sql"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/rune-org/rune/store"
	"github.com/rune-org/rune/store/internal/sqlstore"
	"github.com/rune-org/rune/store/sqlfile"
)

//go:embed templates.sql
var templatesSQL string

var templateQueries = sqlfile.MustParse(templatesSQL)

func scanTemplate(r scanner) (*store.Template, error) {
	var t store.Template
	var created int64
	var deleted sql.NullInt64
	if err := r.Scan(&t.Name, &t.Version, &t.Subject, &t.Text, &t.HTML, &t.Body, &t.Layout, &created, &deleted); err != nil {
		return nil, err
	}
	t.CreatedAt, t.DeletedAt = timeOf(created), timePtrOf(deleted)
	return &t, nil
}

func (s *Store) PutTemplate(ctx context.Context, in store.TemplateInput) (*store.Template, error) {
	if in.Name == "" {
		return nil, fmt.Errorf("template name: %w", store.ErrInvalid)
	}
	t := &store.Template{Name: in.Name, Subject: in.Subject, Text: in.Text, HTML: in.HTML, Body: in.Body,
		Layout: in.Layout, CreatedAt: orNow(in.At)}
	err := s.tx(ctx, "put template "+in.Name, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, templateQueries["template_head_ensure"], in.Name); err != nil {
			return err
		}
		var latest int
		var deleted sql.NullInt64
		if err := tx.QueryRowContext(ctx, templateQueries["template_head"], in.Name).Scan(&latest, &deleted); err != nil {
			return err
		}
		t.Version = latest + 1
		if _, err := tx.ExecContext(ctx, templateQueries["template_head_put"], in.Name, t.Version); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, templateQueries["template_insert"], t.Name, t.Version, t.Subject, t.Text, t.HTML,
			t.Body, t.Layout, micros(t.CreatedAt))
		return err
	})
	if err != nil {
		return nil, err
	}
	return t, nil
}

func (s *Store) GetTemplate(ctx context.Context, name string, version int) (*store.Template, error) {
	if version == 0 {
		var deleted sql.NullInt64
		err := s.r.QueryRowContext(ctx, templateQueries["template_head"], name).Scan(&version, &deleted)
		if err := sqlstore.Got("sqlite", "get template "+name, "template "+name, errors.Is(err, sql.ErrNoRows) || deleted.Valid || version == 0, err); err != nil {
			return nil, err
		}
	}
	t, err := scanTemplate(s.r.QueryRowContext(ctx, templateQueries["template_get"], name, version))
	if err := got("get template "+name, fmt.Sprintf("template %s version %d", name, version), err); err != nil {
		return nil, err
	}
	return t, nil
}

func (s *Store) TemplateAt(ctx context.Context, name string, at time.Time) (*store.Template, error) {
	t, err := scanTemplate(s.r.QueryRowContext(ctx, templateQueries["template_at"], name, micros(at)))
	what := fmt.Sprintf("template %s at %s", name, at.UTC().Format(time.RFC3339Nano))
	if err := sqlstore.Got("sqlite", "get "+what, what, errors.Is(err, sql.ErrNoRows) || (err == nil && t.DeletedAt != nil), err); err != nil {
		return nil, err
	}
	return t, nil
}

func (s *Store) ListTemplates(ctx context.Context) ([]*store.Template, error) {
	out, err := queryAll(ctx, s.r, scanTemplate, templateQueries["template_list"])
	if err != nil {
		return nil, fmt.Errorf("sqlite: list templates: %w", err)
	}
	return out, nil
}

func (s *Store) ListTemplateVersions(ctx context.Context, name string) ([]*store.Template, error) {
	out, err := queryAll(ctx, s.r, scanTemplate, templateQueries["template_versions"], name)
	if err != nil {
		return nil, fmt.Errorf("sqlite: versions of template %s: %w", name, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("template %s: %w", name, store.ErrNotFound)
	}
	return out, nil
}

func (s *Store) DeleteTemplate(ctx context.Context, name string, at time.Time) error {
	at = orNow(at)
	return s.tx(ctx, "delete template "+name, func(tx *sql.Tx) error {
		var latest int
		err := tx.QueryRowContext(ctx, templateQueries["template_delete"], name, micros(at)).Scan(&latest)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("template %s: %w", name, store.ErrNotFound)
		}
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, templateQueries["template_deletion_insert"], name, latest, micros(at))
		return err
	})
}
