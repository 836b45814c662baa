package amqp

import (
	"context"
	"errors"
	"fmt"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// DeleteTopology deletes the queues and exchanges this broker declared (the
// fixed ones and every delay queue it used), messages included, over a
// connection of its own; b may be closed. Tests and benchmarks that use a
// prefix of their own call it so that RabbitMQ does not fill up with
// prefixes nobody uses. Follow queues expire by themselves.
func (b *Broker) DeleteTopology(ctx context.Context) error {
	var conn *amqp091.Connection
	var dialErrs []error
	for _, u := range b.urls {
		c, err := amqp091.DialConfig(u, amqp091.Config{Dial: amqp091.DefaultDial(b.cfg.DialTimeout)})
		if err == nil {
			conn = c
			break
		}
		dialErrs = append(dialErrs, err)
	}
	if conn == nil {
		return fmt.Errorf("amqp broker: delete topology: %w", errors.Join(dialErrs...))
	}
	defer conn.Close()
	n := b.n
	b.delayMu.Lock()
	queues := append([]string{n.status, n.completion, n.receipts, n.timeoutProcess, n.dlq}, n.execQueues...)
	for q := range b.declared {
		queues = append(queues, q)
	}
	b.delayMu.Unlock()
	var errs []error
	// One channel per delete: a failed delete closes its channel.
	for _, q := range queues {
		ch, err := conn.Channel()
		if err != nil {
			return errors.Join(append(errs, err)...)
		}
		if _, err := ch.QueueDelete(q, false, false, false); err != nil {
			var ae *amqp091.Error
			if !errors.As(err, &ae) || ae.Code != amqp091.NotFound {
				errs = append(errs, fmt.Errorf("delete queue %s: %w", q, err))
			}
		}
		_ = ch.Close()
	}
	for _, x := range []string{n.execX, n.eventsX, n.timeoutX, n.dlx} {
		ch, err := conn.Channel()
		if err != nil {
			return errors.Join(append(errs, err)...)
		}
		_ = ch.ExchangeDelete(x, false, false)
		_ = ch.Close()
	}
	return errors.Join(errs...)
}
