package testinfra

import (
	"bytes"
	"fmt"
	"net/url"
	"os/exec"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// Rabbitmqctl runs rabbitmqctl -q args, failing t on error. It skips t (or
// fails it under CI=true) when rabbitmqctl is not installed.
func Rabbitmqctl(t testing.TB, args ...string) {
	t.Helper()
	RequireCommand(t, "rabbitmqctl")
	if out, err := exec.Command("rabbitmqctl", append([]string{"-q"}, args...)...).CombinedOutput(); err != nil {
		t.Fatalf("rabbitmqctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// OwnVhost creates a RabbitMQ virtual host for t (deleted when t ends) on
// which the URL's user may do everything, and returns the AMQP URL on it.
// close_all_connections -p then closes this test's connections and no one
// else's, and the firehose (Spy) sees this test's messages only.
func OwnVhost(t testing.TB, vhost string) string {
	t.Helper()
	u, err := url.Parse(AMQPURL(t))
	if err != nil {
		t.Fatal(err)
	}
	user := "guest"
	if u.User != nil {
		user = u.User.Username()
	}
	Rabbitmqctl(t, "add_vhost", vhost)
	t.Cleanup(func() {
		_ = exec.Command("rabbitmqctl", "-q", "delete_vhost", vhost).Run()
	})
	Rabbitmqctl(t, "set_permissions", "-p", vhost, user, ".*", ".*", ".*")
	u.Path = "/" + vhost
	return u.String()
}

// Spy reads RabbitMQ's firehose: a copy of every message published in a
// virtual host, to any exchange (the default one included), with its
// routing key, headers and body. The vhost needs tracing on
// (Rabbitmqctl(t, "trace_on", "-p", vhost)); the spy sees what is published
// after NewSpy returns.
type Spy struct {
	deliveries <-chan amqp091.Delivery
	wire       bytes.Buffer
	n          int
}

// NewSpy binds a private queue to amq.rabbitmq.trace on amqpURL's vhost;
// it is deleted when t ends.
func NewSpy(t testing.TB, amqpURL string) *Spy {
	t.Helper()
	conn, err := amqp091.Dial(amqpURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	q, err := ch.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind(q.Name, "publish.#", "amq.rabbitmq.trace", false, nil); err != nil {
		t.Fatal(err)
	}
	deliveries, err := ch.Consume(q.Name, "", true, true, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &Spy{deliveries: deliveries}
}

// Until records every copy, one line each ("publish.<exchange> headers
// body"), until done is true of one, and reports whether that happened
// within timeout. The trace headers name the original exchange
// (exchange_name) and routing keys (routing_keys).
func (s *Spy) Until(timeout time.Duration, done func(amqp091.Delivery) bool) bool {
	deadline := time.After(timeout)
	for {
		select {
		case d, ok := <-s.deliveries:
			if !ok {
				return false
			}
			s.n++
			fmt.Fprintf(&s.wire, "%s %v %s\n", d.RoutingKey, d.Headers, d.Body)
			if done(d) {
				return true
			}
		case <-deadline:
			return false
		}
	}
}

// Wire is every copy recorded so far, one per line.
func (s *Spy) Wire() []byte { return s.wire.Bytes() }

// Len is how many copies were recorded.
func (s *Spy) Len() int { return s.n }
