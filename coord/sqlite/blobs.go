package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/rune-org/rune/coord"
)

// Blobs implements coord.Blobs on the Store's file: rows of coord_blob by
// execution and ref. A blob lives until Release, or until its execution's
// state expires (Options.Retain after it ended); blobs of an execution the
// Coordinator never started (the engine's workflow definitions) live until
// Release.
type Blobs struct{ s *Store }

var _ coord.Blobs = (*Blobs)(nil)

// Put implements coord.Blobs. Data already stored is not written again.
func (b *Blobs) Put(ctx context.Context, exec string, data []byte) (string, error) {
	if exec == "" {
		return "", errors.New("coord/sqlite: Put blob: empty execution id")
	}
	ref := coord.BlobRef(data)
	var n int
	if err := b.s.read("r_blob_has").QueryRowContext(ctx, exec, ref).Scan(&n); err != nil {
		return "", fmt.Errorf("coord/sqlite: Put blob %q exec %q: %w", ref, exec, err)
	}
	if n > 0 {
		return ref, nil
	}
	if data == nil {
		data = []byte{} // NOT NULL
	}
	err := b.s.write(ctx, func(tx *sql.Tx) error {
		_, err := b.s.stmt(tx, "blob_put").Exec(exec, ref, data)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("coord/sqlite: Put blob %q exec %q: %w", ref, exec, err)
	}
	return ref, nil
}

// Get implements coord.Blobs.
func (b *Blobs) Get(ctx context.Context, exec, ref string) ([]byte, error) {
	var data []byte
	err := b.s.read("r_blob_get").QueryRowContext(ctx, exec, ref).Scan(&data)
	if errNoRow(err) {
		return nil, fmt.Errorf("coord/sqlite: Get blob %q exec %q: %w", ref, exec, coord.ErrBlobNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("coord/sqlite: Get blob %q exec %q: %w", ref, exec, err)
	}
	if data == nil {
		data = []byte{}
	}
	return data, nil
}

// Release implements coord.Blobs.
func (b *Blobs) Release(ctx context.Context, exec string) error {
	err := b.s.write(ctx, func(tx *sql.Tx) error {
		_, err := b.s.stmt(tx, "blob_release").Exec(exec)
		return err
	})
	if err != nil {
		return fmt.Errorf("coord/sqlite: Release blobs exec %q: %w", exec, err)
	}
	return nil
}
