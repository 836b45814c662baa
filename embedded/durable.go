package embedded

import (
	"context"

	"github.com/rune-org/rune/broker"
	brokersqlite "github.com/rune-org/rune/broker/sqlite"
	coordsqlite "github.com/rune-org/rune/coord/sqlite"
)

// durable builds r's seams on opts.DB: the broker's tables and the
// coordination's share the file, each part's writes group-committed through
// the file's one writer.
func (r *Runtime) durable(opts Options, followOnly []broker.Topic) error {
	cs, err := coordsqlite.New(context.Background(), opts.DB, coordsqlite.Options{Logger: opts.Logger})
	if err != nil {
		return err
	}
	b, err := brokersqlite.New(opts.DB, brokersqlite.Options{Logger: opts.Logger, FollowOnly: followOnly})
	if err != nil {
		cs.Close()
		return err
	}
	r.Broker, r.Coord, r.Timers, r.Barriers, r.Effects = b, cs.Coordinator(), cs.Timers(), cs.Barriers(), cs.Effects()
	r.blobs = cs.Blobs()
	r.Limiter = cs.Limiter()
	r.Events = cs.Events()
	r.Digests = cs.Digests() // issue 36
	r.DeadLetters = sqliteDLQ{b}
	// The broker first: its Close waits for the handlers still publishing.
	r.closers = append(r.closers, b.Close, cs.Close)
	return nil
}

// sqliteDLQ is the SQLite broker's dead-letter queue as DeadLetters.
type sqliteDLQ struct{ b *brokersqlite.Broker }

func (q sqliteDLQ) List(ctx context.Context, limit int) ([]DeadLetter, int, error) {
	dls, n, err := q.b.DeadLetters(ctx, limit)
	out := make([]DeadLetter, len(dls))
	for i, d := range dls {
		out[i] = DeadLetter(d)
	}
	return out, n, err
}

func (q sqliteDLQ) Replay(ctx context.Context, ids []string) ([]string, error) {
	return q.b.Replay(ctx, ids, nil)
}

func (q sqliteDLQ) Purge(ctx context.Context) (int, error) { return q.b.PurgeDeadLetters(ctx) }
