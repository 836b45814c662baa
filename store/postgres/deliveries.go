package postgres

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rune-org/rune/store"
	"github.com/rune-org/rune/store/sqlfile"
)

//go:embed deliveries.sql
var deliveriesSQL string

var deliveryQueries = sqlfile.MustParse(deliveriesSQL)

func (s *Store) RecordHookDelivery(ctx context.Context, d *store.HookDelivery, keep int) error {
	return s.tx(ctx, "hook delivery of "+d.HookID, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, deliveryQueries["delivery_insert"], d.HookID, orNow(d.ReceivedAt), d.Status,
			d.Code, d.ExecutionID, d.EventID, d.Size).Scan(&d.Seq)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, deliveryQueries["delivery_prune"], d.HookID, max(keep, 1))
		return err
	})
}

func (s *Store) ListHookDeliveries(ctx context.Context, hookID string, limit int) ([]*store.HookDelivery, error) {
	rows, err := s.pool.Query(ctx, deliveryQueries["delivery_list"], hookID, max(limit, 1))
	if err != nil {
		return nil, fmt.Errorf("postgres: deliveries of hook %s: %w", hookID, err)
	}
	defer rows.Close()
	var out []*store.HookDelivery
	for rows.Next() {
		var d store.HookDelivery
		var at time.Time
		var status int32
		if err := rows.Scan(&d.Seq, &d.HookID, &at, &status, &d.Code, &d.ExecutionID, &d.EventID, &d.Size); err != nil {
			return nil, fmt.Errorf("postgres: deliveries of hook %s: %w", hookID, err)
		}
		d.ReceivedAt, d.Status = at.UTC(), int(status)
		out = append(out, &d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: deliveries of hook %s: %w", hookID, err)
	}
	return out, nil
}
