package postgres

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/rune-org/rune/store"
	"github.com/rune-org/rune/store/sqlfile"
)

//go:embed notify.sql
var notifySQL string

var notifyQueries = sqlfile.MustParse(notifySQL)

func scanSend(row pgx.CollectableRow) (*store.Send, error) {
	var x store.Send
	if err := row.Scan(&x.Credential, &x.MessageID, &x.ExecutionID, &x.NodeID, &x.Branch, &x.Channel, &x.Status, &x.SentAt, &x.WorkflowID); err != nil {
		return nil, err
	}
	x.SentAt = x.SentAt.UTC()
	return &x, nil
}

func scanSendStatus(row pgx.CollectableRow) (store.SendStatus, error) {
	var st store.SendStatus
	err := row.Scan(&st.Status, &st.ProviderStatus, &st.At)
	st.At = st.At.UTC()
	return st, err
}

func (s *Store) RecordSends(ctx context.Context, sends []store.Send) error {
	if len(sends) == 0 {
		return nil
	}
	return s.tx(ctx, "record sends", func(tx pgx.Tx) error {
		var events []store.Event
		for _, x := range sends {
			tag, err := tx.Exec(ctx, notifyQueries["send_insert"], x.Credential, x.MessageID, x.ExecutionID, x.NodeID, x.Branch, x.Channel, x.Status, store.Micro(x.SentAt), x.WorkflowID)
			if err != nil {
				return err
			}
			if tag.RowsAffected() == 0 {
				continue
			}
			// Callbacks that came before the send: their events now.
			rows, _ := tx.Query(ctx, notifyQueries["send_status_list"], x.Credential, x.MessageID)
			early, err := pgx.CollectRows(rows, scanSendStatus)
			if err != nil {
				return err
			}
			events = append(events, store.EarlyStatusEvents(x, early)...)
		}
		if len(events) == 0 {
			return nil
		}
		// The event lock last: held only to the commit (queueEvents).
		return insertEvents(ctx, tx, events, nil)
	})
}

// querier is a pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// sendHistory is x's status recorded with it, then its callbacks.
func sendHistory(ctx context.Context, q querier, x *store.Send) ([]store.SendStatus, error) {
	rows, _ := q.Query(ctx, notifyQueries["send_status_list"], x.Credential, x.MessageID)
	later, err := pgx.CollectRows(rows, scanSendStatus)
	if err != nil {
		return nil, err
	}
	return append([]store.SendStatus{{Status: x.Status, At: x.SentAt}}, later...), nil
}

func (s *Store) AddSendStatus(ctx context.Context, credential, messageID string, st store.SendStatus) (*store.Send, error) {
	st.At = orNow(st.At)
	var send *store.Send
	err := s.tx(ctx, "add send status", func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, notifyQueries["send_status_insert"], credential, messageID, st.Status, st.ProviderStatus, st.At); err != nil {
			return err
		}
		rows, _ := tx.Query(ctx, notifyQueries["send_get"], credential, messageID)
		x, err := pgx.CollectExactlyOneRow(rows, scanSend)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		if x.History, err = sendHistory(ctx, tx, x); err != nil {
			return err
		}
		store.FinishSend(x)
		body, _ := json.Marshal(store.SendStatusEvent{WorkflowID: x.WorkflowID, ExecutionID: x.ExecutionID, NodeID: x.NodeID, Branch: x.Branch,
			Credential: credential, MessageID: messageID, Channel: x.Channel, Status: st.Status, ProviderStatus: st.ProviderStatus, At: st.At})
		send = x
		// The event lock last: held only to the commit (queueEvents).
		return insertEvents(ctx, tx, []store.Event{{ExecutionID: x.ExecutionID, Kind: "send.status", Body: body, At: st.At}}, nil)
	})
	return send, err
}

func (s *Store) ListSends(ctx context.Context, executionID string) ([]*store.Send, error) {
	rows, _ := s.pool.Query(ctx, notifyQueries["send_list"], executionID)
	sends, err := pgx.CollectRows(rows, scanSend)
	if err != nil {
		return nil, fmt.Errorf("postgres: sends of %s: %w", executionID, err)
	}
	for _, x := range sends {
		if x.History, err = sendHistory(ctx, s.pool, x); err != nil {
			return nil, fmt.Errorf("postgres: sends of %s: %w", executionID, err)
		}
		store.FinishSend(x)
	}
	return sends, nil
}
