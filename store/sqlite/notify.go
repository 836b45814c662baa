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

//go:embed notify.sql
var notifySQL string

var notifyQueries = sqlfile.MustParse(notifySQL)

func scanSend(s scanner) (*store.Send, error) {
	var x store.Send
	var sent int64
	if err := s.Scan(&x.Credential, &x.MessageID, &x.ExecutionID, &x.NodeID, &x.Branch, &x.Channel, &x.Status, &sent, &x.WorkflowID); err != nil {
		return nil, err
	}
	x.SentAt = timeOf(sent)
	return &x, nil
}

func scanSendStatus(s scanner) (store.SendStatus, error) {
	var st store.SendStatus
	var at int64
	err := s.Scan(&st.Status, &st.ProviderStatus, &at)
	st.At = timeOf(at)
	return st, err
}

func (s *Store) RecordSends(ctx context.Context, sends []store.Send) error {
	if len(sends) == 0 {
		return nil
	}
	return s.tx(ctx, "record sends", func(tx *sql.Tx) error {
		for _, x := range sends {
			res, err := tx.ExecContext(ctx, notifyQueries["send_insert"], x.Credential, x.MessageID, x.ExecutionID, x.NodeID,
				x.Branch, x.Channel, x.Status, micros(x.SentAt), x.WorkflowID)
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n == 0 {
				continue
			}
			// Callbacks that came before the send: their events now.
			early, err := queryAll(ctx, tx, scanSendStatus, notifyQueries["send_status_list"], x.Credential, x.MessageID)
			if err != nil {
				return err
			}
			for _, e := range store.EarlyStatusEvents(x, early) {
				if _, err := insertEvent(ctx, tx.StmtContext(ctx, s.hot["event_insert"]), "", e); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

func (s *Store) AddSendStatus(ctx context.Context, credential, messageID string, st store.SendStatus) (*store.Send, error) {
	st.At = orNow(st.At)
	var send *store.Send
	err := s.tx(ctx, "add send status", func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, notifyQueries["send_status_insert"], credential, messageID, st.Status, st.ProviderStatus, micros(st.At)); err != nil {
			return err
		}
		x, err := scanSend(tx.QueryRowContext(ctx, notifyQueries["send_get"], credential, messageID))
		if errors.Is(err, sql.ErrNoRows) {
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
		if _, err := insertEvent(ctx, tx.StmtContext(ctx, s.hot["event_insert"]), "",
			store.Event{ExecutionID: x.ExecutionID, Kind: "send.status", Body: body, At: st.At}); err != nil {
			return err
		}
		send = x
		return nil
	})
	return send, err
}

// sendHistory is x's status recorded with it, then its callbacks.
func sendHistory(ctx context.Context, q querier, x *store.Send) ([]store.SendStatus, error) {
	later, err := queryAll(ctx, q, scanSendStatus, notifyQueries["send_status_list"], x.Credential, x.MessageID)
	if err != nil {
		return nil, err
	}
	return append([]store.SendStatus{{Status: x.Status, At: x.SentAt}}, later...), nil
}

func (s *Store) ListSends(ctx context.Context, executionID string) ([]*store.Send, error) {
	sends, err := queryAll(ctx, s.r, scanSend, notifyQueries["send_list"], executionID)
	if err != nil {
		return nil, fmt.Errorf("sqlite: sends of %s: %w", executionID, err)
	}
	for _, x := range sends {
		if x.History, err = sendHistory(ctx, s.r, x); err != nil {
			return nil, fmt.Errorf("sqlite: sends of %s: %w", executionID, err)
		}
		store.FinishSend(x)
	}
	return sends, nil
}
