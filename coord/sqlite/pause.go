package sqlite

import (
	"context"
	"database/sql"
	"fmt"
)

// SetPaused implements coord.Pauses.
func (c *Coordinator) SetPaused(ctx context.Context, exec string, paused bool) error {
	q := "paused_clear"
	if paused {
		q = "paused_set"
	}
	err := c.s.write(ctx, func(tx *sql.Tx) error {
		_, err := c.s.stmt(tx, q).Exec(exec)
		return err
	})
	if err != nil {
		return fmt.Errorf("coord/sqlite: SetPaused exec %q: %w", exec, err)
	}
	return nil
}

// Paused implements coord.Pauses.
func (c *Coordinator) Paused(ctx context.Context, exec string) (bool, error) {
	var n int
	if err := c.s.read("r_paused").QueryRowContext(ctx, exec).Scan(&n); err != nil {
		return false, fmt.Errorf("coord/sqlite: Paused exec %q: %w", exec, err)
	}
	return n > 0, nil
}
