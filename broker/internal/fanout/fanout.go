// Package fanout hands a broker's Status and Completion messages to the
// followers of their Key (broker.Broker.Follow) in process. The memory and
// SQLite brokers share it: one process publishes and follows.
package fanout

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/rune-org/rune/broker"
)

// Hub is the set of followers of one broker. It is safe for concurrent use.
type Hub struct {
	closed <-chan struct{}

	mu        sync.Mutex
	followers map[string][]*follower
	// n lets publishers skip mu when nobody follows.
	n atomic.Int32
}

// New returns a hub whose follower channels close when closed is.
func New(closed <-chan struct{}) *Hub {
	return &Hub{closed: closed, followers: make(map[string][]*follower)}
}

// follower buffers the messages of one Follow call. Publishers append to buf
// and never block; one goroutine per follower moves buf to the channel.
type follower struct {
	mu     sync.Mutex
	buf    []broker.Message
	notify chan struct{} // something was appended to buf
	out    chan broker.Message
}

// Follow returns the messages with Key key that Notify receives after Follow
// returns, in Notify's order, until ctx is done or the hub's closed channel
// is; then the channel closes.
//
// Notify never waits for a follower: each follower has an unbounded buffer,
// so one that stops draining its channel without cancelling ctx grows in
// memory by every message of its key until ctx is done. Followers are for
// live views of one execution, whose message count is bounded.
func (h *Hub) Follow(ctx context.Context, key string) <-chan broker.Message {
	f := &follower{notify: make(chan struct{}, 1), out: make(chan broker.Message, 64)}
	h.mu.Lock()
	h.followers[key] = append(h.followers[key], f)
	h.n.Add(1)
	h.mu.Unlock()
	go func() {
		defer close(f.out)
		defer h.unfollow(key, f)
		f.pump(ctx.Done(), h.closed)
	}()
	return f.out
}

func (h *Hub) unfollow(key string, f *follower) {
	h.mu.Lock()
	defer h.mu.Unlock()
	fs := slices.DeleteFunc(h.followers[key], func(g *follower) bool { return g == f })
	if len(fs) == 0 {
		delete(h.followers, key)
	} else {
		h.followers[key] = fs
	}
	h.n.Add(-1)
}

// Notify hands m to every follower of its key when it is a Status or
// Completion message; a batch of statuses arrives one status at a time
// (broker.Unbatch). It returns at once.
func (h *Hub) Notify(m broker.Message) {
	if (m.Topic != broker.Status && m.Topic != broker.Completion) || h.n.Load() == 0 {
		return
	}
	m.Delay = 0
	h.mu.Lock()
	defer h.mu.Unlock()
	fs := h.followers[m.Key]
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
