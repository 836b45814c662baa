package main

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/rune-org/rune/broker/amqp"
	"github.com/rune-org/rune/console"
	"github.com/rune-org/rune/embedded"
	"github.com/rune-org/rune/engine"
	"github.com/rune-org/rune/server"
	"github.com/rune-org/rune/store"
)

// withConsole serves the web console at / next to s's API (issue 16).
// dlq is nil for a runtime without a dead-letter queue (the page says so);
// secure marks the session cookie Secure (TLS, or an https public URL).
// depths is nil but on the distributed server (its queues and timers).
func withConsole(s *server.Server, st store.Store, eng *engine.Engine, dlq console.DeadLetters, mode string, secure bool, log *slog.Logger,
	depths func(context.Context) ([]console.Depth, error)) (http.Handler, error) {
	c, err := console.New(console.Config{API: s.Handler(), Store: st, Tokens: s, DeadLetters: dlq, Mode: mode, Logger: log, SecureCookie: secure,
		Validate: func(def []byte) error { _, err := eng.Compile(def); return err }, Depths: depths})
	if err != nil {
		return nil, err
	}
	return console.Mount(s.Handler(), c), nil
}

// consoleDLQ is the dead-letter queue for the console, through the same
// operations as `rune dlq`; each call connects as the administrator
// `rune dlq` does and disconnects (an operator's page, not a hot path).
type consoleDLQ struct {
	srv *servers
	log *slog.Logger
}

func (q consoleDLQ) with(ctx context.Context, f func(*amqp.Broker) error) error {
	b, err := q.srv.admin(ctx, q.log)
	if err != nil {
		return err
	}
	defer b.Close()
	return f(b)
}

func (q consoleDLQ) List(ctx context.Context, limit int) (out []console.DeadLetter, total int, err error) {
	err = q.with(ctx, func(b *amqp.Broker) error {
		dls, n, err := b.DeadLetters(ctx, limit)
		for _, d := range dls {
			out = append(out, console.DeadLetter{ID: d.ID, ExecutionID: d.Key, Topic: string(d.Topic), Reason: d.Reason, At: d.At, Body: d.Body})
		}
		total = n
		return err
	})
	return out, total, err
}

func (q consoleDLQ) Replay(ctx context.Context, ids []string) (done []string, err error) {
	err = q.with(ctx, func(b *amqp.Broker) error {
		done, err = b.Replay(ctx, ids, nil)
		return err
	})
	return done, err
}

func (q consoleDLQ) Purge(ctx context.Context) (n int, err error) {
	err = q.with(ctx, func(b *amqp.Broker) error {
		n, err = b.PurgeDeadLetters(ctx)
		return err
	})
	return n, err
}

// embeddedDLQ is the embedded default's dead-letter queue, in its runtime
// file, for the console.
type embeddedDLQ struct{ q embedded.DeadLetters }

func (q embeddedDLQ) List(ctx context.Context, limit int) ([]console.DeadLetter, int, error) {
	dls, n, err := q.q.List(ctx, limit)
	out := make([]console.DeadLetter, 0, len(dls))
	for _, d := range dls {
		out = append(out, console.DeadLetter{ID: d.ID, ExecutionID: d.Key, Topic: string(d.Topic), Reason: d.Reason, At: d.At, Body: d.Body})
	}
	return out, n, err
}

func (q embeddedDLQ) Replay(ctx context.Context, ids []string) ([]string, error) {
	return q.q.Replay(ctx, ids)
}

func (q embeddedDLQ) Purge(ctx context.Context) (int, error) { return q.q.Purge(ctx) }
