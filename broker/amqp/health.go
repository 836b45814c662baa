package amqp

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Ping reports whether the broker is connected to RabbitMQ now: both its
// connections are up (it waits for a reconnect until ctx is done). Health
// checks (/readyz) call it.
func (b *Broker) Ping(ctx context.Context) error {
	for _, l := range []*link{b.pub, b.sub} {
		if _, _, err := l.get(ctx); err != nil {
			return fmt.Errorf("amqp broker: %s connection to %s is down: %w", l.name, b.redactedURL, err)
		}
	}
	return nil
}

// QueueDepths returns the messages ready in each of Rune's fixed queues
// (every execution queue among them), by
// name without Config.Prefix (the delay queues and followers' queues are
// left out: they are many, and short-lived). It declares the queues
// passively, so it never creates one; a queue that does not exist is left
// out. Metrics sample it every few seconds.
func (b *Broker) QueueDepths(ctx context.Context) (map[string]int, error) {
	n := b.n
	out := map[string]int{}
	var errs []error
	for _, q := range append([]string{n.status, n.completion, n.timeoutProcess, n.dlq}, n.execQueues...) {
		ch, _, err := b.sub.channel(ctx)
		if err != nil {
			return out, err
		}
		// One channel per queue: a passive declare of a missing queue
		// closes its channel.
		st, err := ch.QueueDeclarePassive(q, true, false, false, false, nil)
		_ = ch.Close()
		switch {
		case err == nil:
			out[strings.TrimPrefix(q, n.prefix)] = st.Messages
		case !isNotFound(err):
			errs = append(errs, fmt.Errorf("queue %s: %w", q, err))
		}
	}
	return out, errors.Join(errs...)
}
