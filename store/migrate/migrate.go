// Package migrate applies a store's versioned SQL migrations at start-up.
//
// Migrations are embedded files named NNN_name.up.sql (NNN: the version,
// from 1 with no gaps). Each version runs in its own transaction together
// with the row that records it, so a crash leaves the database at a whole
// version; versions already recorded are skipped, so Run is idempotent. The
// Target serialises concurrent runs (PostgreSQL: an advisory lock).
package migrate

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Migration is one version's SQL.
type Migration struct {
	Version int
	Name    string // the file name
	SQL     string
}

// Target is a database to migrate.
type Target interface {
	// Lock holds off every other Run on the same database until unlock is
	// called.
	Lock(ctx context.Context) (unlock func(), err error)
	// Applied returns the versions recorded (creating the version table
	// when it is missing).
	Applied(ctx context.Context) ([]int, error)
	// Apply runs m.SQL and records m.Version in one transaction.
	Apply(ctx context.Context, m Migration) error
}

var fileName = regexp.MustCompile(`^(\d+)_[a-z0-9_]+\.up\.sql$`)

// Load reads the migrations in dir of fsys. Every file there must be named
// NNN_name.up.sql (or .down.sql, ignored); versions start at 1 and have no
// gaps or duplicates.
func Load(fsys fs.FS, dir string) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("migrate: read %s: %w", dir, err)
	}
	var ms []Migration
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || path.Ext(name) != ".sql" || strings.HasSuffix(name, ".down.sql") {
			continue
		}
		m := fileName.FindStringSubmatch(name)
		if m == nil {
			return nil, fmt.Errorf("migrate: %s: file name %q is not NNN_name.up.sql", dir, name)
		}
		v, err := strconv.Atoi(m[1])
		if err != nil {
			return nil, fmt.Errorf("migrate: %s: version of %q: %w", dir, name, err)
		}
		sql, err := fs.ReadFile(fsys, path.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("migrate: read %s: %w", name, err)
		}
		ms = append(ms, Migration{Version: v, Name: name, SQL: string(sql)})
	}
	slices.SortFunc(ms, func(a, b Migration) int { return a.Version - b.Version })
	for i, m := range ms {
		if i > 0 && ms[i-1].Version == m.Version {
			return nil, fmt.Errorf("migrate: %s: version %d twice (%s and %s)", dir, m.Version, ms[i-1].Name, m.Name)
		}
		if m.Version != i+1 {
			return nil, fmt.Errorf("migrate: %s: version %d missing (next is %s)", dir, i+1, m.Name)
		}
	}
	if len(ms) == 0 {
		return nil, fmt.Errorf("migrate: %s: no migrations", dir)
	}
	return ms, nil
}

// ErrNewer is returned when the database records a version this binary does
// not have: it was migrated by a newer release.
var ErrNewer = errors.New("database schema is newer than this binary")

// Run applies the migrations of ms that t has not recorded, in order, and
// returns the versions it applied.
func Run(ctx context.Context, t Target, ms []Migration) ([]int, error) {
	unlock, err := t.Lock(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrate: lock: %w", err)
	}
	defer unlock()
	applied, err := t.Applied(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrate: read applied versions: %w", err)
	}
	done := map[int]bool{}
	for _, v := range applied {
		done[v] = true
		if v > len(ms) {
			return nil, fmt.Errorf("migrate: %w: it has version %d, this binary knows up to %d", ErrNewer, v, len(ms))
		}
	}
	var ran []int
	for _, m := range ms {
		if done[m.Version] {
			continue
		}
		if err := t.Apply(ctx, m); err != nil {
			return ran, fmt.Errorf("migrate: %s: %w", m.Name, err)
		}
		ran = append(ran, m.Version)
	}
	return ran, nil
}
