package memory

import (
	"context"
	"slices"
	"sync"

	"github.com/rune-org/rune/broker"
)

// follower buffers the messages of one Follow call. Publishers append to buf
// and never block; one goroutine per follower moves buf to the channel.
type follower struct {
	mu     sync.Mutex
	buf    []broker.Message
	notify chan struct{} // something was appended to buf
	out    chan broker.Message
}

// Follow returns the Status and Completion messages with Key key published
// after Follow returns, in publish order, until ctx is done; then the channel
// closes (it also closes when the broker does). Messages still go to their
// queues as well: following consumes nothing.
//
// Publishers never wait for a follower: each follower has an unbounded
// buffer, so one that stops draining its channel without cancelling ctx grows
// in memory by every message of its key until ctx is done. Followers are for
// live views of one execution, whose message count is bounded.
func (b *Broker) Follow(ctx context.Context, key string) (<-chan broker.Message, error) {
	if b.isClosed() {
		return nil, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f := &follower{notify: make(chan struct{}, 1), out: make(chan broker.Message, 64)}
	b.followMu.Lock()
	b.followers[key] = append(b.followers[key], f)
	b.nfollow.Add(1)
	b.followMu.Unlock()
	go func() {
		defer close(f.out)
		defer b.unfollow(key, f)
		f.pump(ctx.Done(), b.closeCtx.Done())
	}()
	return f.out, nil
}

func (b *Broker) unfollow(key string, f *follower) {
	b.followMu.Lock()
	defer b.followMu.Unlock()
	fs := slices.DeleteFunc(b.followers[key], func(g *follower) bool { return g == f })
	if len(fs) == 0 {
		delete(b.followers, key)
	} else {
		b.followers[key] = fs
	}
	b.nfollow.Add(-1)
}

// notifyFollowers hands m to every follower of its key.
func (b *Broker) notifyFollowers(m broker.Message) {
	m.Delay = 0
	b.followMu.Lock()
	defer b.followMu.Unlock()
	fs := b.followers[m.Key]
	if len(fs) == 0 {
		return
	}
	ms := broker.Unbatch(m) // a hop's statuses, one at a time
	for _, f := range fs {
		f.mu.Lock()
		f.buf = append(f.buf, ms...)
		f.mu.Unlock()
		select {
		case f.notify <- struct{}{}:
		default:
		}
	}
}

// pump sends buffered messages to out until ctx or closed is done.
func (f *follower) pump(ctx, closed <-chan struct{}) {
	var batch []broker.Message
	for {
		clear(batch)
		f.mu.Lock()
		batch, f.buf = f.buf, batch[:0]
		f.mu.Unlock()
		for _, m := range batch {
			select {
			case f.out <- m:
			case <-ctx:
				return
			case <-closed:
				return
			}
		}
		if len(batch) > 0 {
			continue
		}
		select {
		case <-f.notify:
		case <-ctx:
			return
		case <-closed:
			return
		}
	}
}
