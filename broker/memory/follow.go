package memory

import (
	"context"

	"github.com/rune-org/rune/broker"
)

// Follow returns the Status and Completion messages with Key key published
// after Follow returns, in publish order, until ctx is done; then the channel
// closes (it also closes when the broker does). Messages still go to their
// queues as well: following consumes nothing.
//
// Publishers never wait for a follower: each follower has an unbounded
// buffer, so one that stops draining its channel without cancelling ctx
// grows in memory by every message of its key until ctx is done. Followers
// are for live views of one execution, whose message count is bounded.
func (b *Broker) Follow(ctx context.Context, key string) (<-chan broker.Message, error) {
	if b.isClosed() {
		return nil, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return b.hub.Follow(ctx, key), nil
}
