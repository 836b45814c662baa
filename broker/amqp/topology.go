package amqp

import (
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"strconv"
	"strings"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/rune-org/rune/broker"
)

// The topology (RFC 001 §8, RFC 005 §5), every name carrying Config.Prefix:
//
//	exchange workflow.execution.x (direct)
//	  "workflow.execution"             → queue workflow.execution
//	                                      durable, TTL 24h, max-priority 10, DLX workflow.execution.dlx
//	  "workflow.execution.retry.<ms>"  → queue workflow.execution.retry.<ms> (one per delay)
//	                                      durable, TTL <ms>, expires when unused,
//	                                      dead-letters to workflow.execution.x "workflow.execution"
//	exchange workflow.events (topic)
//	  "status.#"                       → queue workflow.node.status
//	                                      non-durable, TTL 1h, max-priority 10
//	  "completion.#"                   → queue workflow.completion
//	                                      durable, TTL 7 days, max-priority 10
//	  "receipt" (a completion's BCC)   → queue workflow.completion.receipts
//	                                      non-durable, TTL 30 s, at most 10,000
//	                                      (see CompletionRouted)
//	  "status.<key>", "completion.<key>" → queue workflow.follow.<random> (one per Follow)
//	exchange workflow.timeout.x (direct)
//	  "workflow.timeout.process"       → queue workflow.timeout.process (durable)
//	  "workflow.timeout.<ms>"          → queue workflow.timeout.<ms> (one per delay)
//	                                      durable, TTL <ms>, expires when unused,
//	                                      dead-letters to workflow.timeout.x "workflow.timeout.process"
//	exchange workflow.execution.dlx (fanout) → queue workflow.dlq (durable)
//
// With Config.ExecutionQueues n > 1 there are n execution queues,
// workflow.execution and workflow.execution.shard.<i> (i = 1..n-1), each
// bound to workflow.execution.x with its own name as routing key; an
// execution message goes to the queue of its execution id (FNV-1a modulo n,
// so one execution's messages stay in one queue, in order), its retries
// through per-queue delay queues (<queue>.retry.<ms>, which dead-letter
// back to that queue), and every worker consumes all n queues. One queue is
// one Erlang process, one core at most: n queues let RabbitMQ use n cores
// (and, on a cluster, n nodes).
//
// With Config.QueueType "quorum" the durable queues (execution, completion,
// timeout.process, dlq and the delay queues) are quorum queues: replicated
// (Raft), without priorities (x-max-priority is not sent; RabbitMQ 3.10 to
// 3.12 have none for quorum queues, 3.13 two levels) and without
// x-queue-version. workflow.node.status stays classic: it is not durable.
// docs/scaling.md says what else changes.
//
// Publishing goes through named exchanges, never the default one, because
// RabbitMQ grants publishing per exchange: this is what lets PermissionsFor
// give the master "write workflow.execution" without anything else.
//
// One queue per distinct delay is what keeps mixed delays from blocking each
// other: a queue's messages all share one TTL, so they expire in arrival
// order and a 125 s retry never sits in front of a 5 s one.

// names holds the prefixed names of the topology.
type names struct {
	prefix         string
	execX          string
	execution      string
	eventsX        string
	status         string
	completion     string
	receipts       string
	timeoutX       string
	timeoutPrefix  string // + <ms>
	timeoutProcess string
	dlx            string
	dlq            string
	followPrefix   string // + random
	// execQueues are the execution queues: execution, then
	// execution.shard.<i> (Config.ExecutionQueues).
	execQueues []string
	quorum     bool // Config.QueueType is QueueQuorum
}

// executionShard is what comes between execution and the shard number in an
// execution queue's name.
const executionShard = ".shard."

func newNames(prefix string) names {
	return names{
		prefix:         prefix,
		execX:          prefix + "workflow.execution.x",
		execution:      prefix + "workflow.execution",
		eventsX:        prefix + "workflow.events",
		status:         prefix + "workflow.node.status",
		completion:     prefix + "workflow.completion",
		receipts:       prefix + "workflow.completion.receipts",
		timeoutX:       prefix + "workflow.timeout.x",
		timeoutPrefix:  prefix + "workflow.timeout.",
		timeoutProcess: prefix + "workflow.timeout.process",
		dlx:            prefix + "workflow.execution.dlx",
		dlq:            prefix + "workflow.dlq",
		followPrefix:   prefix + "workflow.follow.",
		execQueues:     []string{prefix + "workflow.execution"},
	}
}

// sharded returns n with queues execution queues (at least 1), quorum
// queues when quorum.
func (n names) sharded(queues int, quorum bool) names {
	n.execQueues = []string{n.execution}
	for i := 1; i < queues; i++ {
		n.execQueues = append(n.execQueues, n.execution+executionShard+strconv.Itoa(i))
	}
	n.quorum = quorum
	return n
}

// priority is the AMQP priority of m (issue 35): an execution message's
// broker.ExecutionPriority (1 … 10, 5 by default), which the classic execution
// queues (x-max-priority 10) deliver highest first; 0 on other topics and
// on quorum queues, which have no priorities here.
func (n names) priority(m *broker.Message) uint8 {
	if m.Topic != broker.Execution || n.quorum {
		return 0
	}
	return uint8(min(broker.ExecutionPriority(m), maxPriority))
}

// executionQueue is the execution queue of the execution whose id is key.
func (n names) executionQueue(key string) string {
	if len(n.execQueues) == 1 {
		return n.execution
	}
	h := fnv.New32a()
	h.Write([]byte(key))
	return n.execQueues[h.Sum32()%uint32(len(n.execQueues))]
}

// rawKey is the execution id of a raw execution message that decodes, so
// that PublishRaw sends it to its execution's queue; "" otherwise (and
// with one execution queue, where it does not matter).
func (n names) rawKey(topic broker.Topic, body []byte) string {
	if topic != broker.Execution || len(n.execQueues) == 1 {
		return ""
	}
	v, err := broker.Decode(topic, body)
	if err != nil {
		return ""
	}
	_, key := broker.IDs(v)
	return key
}

// queuesFor are the queues Consume reads for topic: the execution queues,
// or the one queue of queueFor.
func (n names) queuesFor(topic broker.Topic) ([]string, error) {
	if topic == broker.Execution {
		return n.execQueues, nil
	}
	q, err := n.queueFor(topic)
	return []string{q}, err
}

// Queue arguments of RFC 001 §8.
const (
	executionTTL  = 24 * time.Hour
	statusTTL     = time.Hour
	completionTTL = 7 * 24 * time.Hour
	maxPriority   = 10
	headerReason  = "x-rune-reason"
	headerTopic   = "x-rune-topic"
	headerSeq     = "x-rune-seq"
	// headerFirst marks broker.Message.First (firstMark).
	headerFirst = "x-rune-first"
	// headerTraceparent carries broker.Message.Trace (W3C trace context).
	headerTraceparent = "traceparent"
	contentType       = "application/json"
	maxDelay          = time.Duration(1<<32-1) * time.Millisecond // RabbitMQ's TTL limit
	delayLease        = 5 * time.Minute
	routingKeyMax     = 255
	statusRKPrefix    = "status."
	complRKPrefix     = "completion."
	// receiptKey is the BCC routing key of every completion: RabbitMQ
	// routes the completion to workflow.completion.receipts in the same
	// step as to workflow.completion, and strips the BCC header, so
	// consumers see the same message.
	receiptKey = "receipt"
	// receiptTTL and receiptMax bound what the receipts queue holds: a
	// replay must come within receiptTTL of the first publish to be told by
	// it (a closed connection's or a killed worker's redelivery comes
	// within seconds).
	receiptTTL = 30 * time.Second
	receiptMax = 10000
)

func executionArgs(n names) amqp091.Table {
	return amqp091.Table{
		"x-message-ttl":          executionTTL.Milliseconds(),
		"x-max-priority":         int32(maxPriority),
		"x-dead-letter-exchange": n.dlx,
	}
}

func statusArgs() amqp091.Table {
	return amqp091.Table{"x-message-ttl": statusTTL.Milliseconds(), "x-max-priority": int32(maxPriority)}
}

// QueueArgs returns the arguments that workflow.execution (classic, without
// its dead-letter exchange) and workflow.node.status are declared with, and
// the routing-key prefix of statuses: a benchmark of bare RabbitMQ that
// mimics Rune's traffic (internal/bench's raw ceiling) declares its queues
// with them, so that they follow this topology.
func QueueArgs() (execution, status amqp091.Table, statusKeyPrefix string) {
	execution = executionArgs(names{})
	delete(execution, "x-dead-letter-exchange")
	return versioned(execution), versioned(statusArgs()), statusRKPrefix
}

// queueFor is the queue Consume reads for topic.
func (n names) queueFor(topic broker.Topic) (string, error) {
	switch topic {
	case broker.Execution:
		return n.execution, nil
	case broker.Status:
		return n.status, nil
	case broker.Completion:
		return n.completion, nil
	case broker.Timeout:
		return n.timeoutProcess, nil
	case broker.DeadLetter:
		return n.dlq, nil
	}
	return "", fmt.Errorf("amqp broker: unknown topic %q", topic)
}

// route is where a message of topic with key and delay is published.
// delayQueue is set when the message goes to a per-delay queue that must be
// declared first.
type route struct {
	exchange   string
	key        string
	delayQueue *delayQueue
}

// delayQueue is a per-delay queue: messages sit in it for ttl, then RabbitMQ
// dead-letters them to dlx with routing key dlk.
type delayQueue struct {
	name     string
	exchange string // bound to this exchange with routing key name
	ttl      time.Duration
	dlk      string
}

func (d *delayQueue) args() amqp091.Table {
	ttl := d.ttl.Milliseconds()
	return amqp091.Table{
		"x-message-ttl":             ttl,
		"x-dead-letter-exchange":    d.exchange,
		"x-dead-letter-routing-key": d.dlk,
		// Unused delay queues vanish. RabbitMQ counts a redeclaration as use
		// but not a publish, so the queue must outlive its last message
		// (ttl) after the last redeclaration (at most delayLease ago).
		"x-expires": ttl + (2 * delayLease).Milliseconds(),
	}
}

func (n names) routeFor(m *broker.Message) (route, error) {
	switch m.Topic {
	case broker.Execution:
		if m.Delay > 0 {
			d, err := roundDelay(m.Delay)
			if err != nil {
				return route{}, err
			}
			q := n.executionQueue(m.Key)
			name := q + ".retry." + strconv.FormatInt(d.Milliseconds(), 10)
			return route{exchange: n.execX, key: name, delayQueue: &delayQueue{name: name, exchange: n.execX, ttl: d, dlk: q}}, nil
		}
		return route{exchange: n.execX, key: n.executionQueue(m.Key)}, nil
	case broker.Timeout:
		if m.Delay > 0 {
			d, err := roundDelay(m.Delay)
			if err != nil {
				return route{}, err
			}
			name := n.timeoutPrefix + strconv.FormatInt(d.Milliseconds(), 10)
			return route{exchange: n.timeoutX, key: name, delayQueue: &delayQueue{name: name, exchange: n.timeoutX, ttl: d, dlk: n.timeoutProcess}}, nil
		}
		return route{exchange: n.timeoutX, key: n.timeoutProcess}, nil
	case broker.Status, broker.Completion:
		p := statusRKPrefix
		if m.Topic == broker.Completion {
			p = complRKPrefix
		}
		if len(p)+len(m.Key) > routingKeyMax {
			return route{}, fmt.Errorf("amqp broker: message %q on %s: key of %d bytes is too long for a routing key", m.ID, m.Topic, len(m.Key))
		}
		return route{exchange: n.eventsX, key: p + m.Key}, nil
	}
	return route{}, fmt.Errorf("amqp broker: message %q: cannot publish to topic %q", m.ID, m.Topic)
}

// roundDelay rounds d up to whole milliseconds and then up to three
// significant digits, so that arbitrary delays (jitter, computed deadlines)
// share a bounded number of delay queues while never arriving early.
func roundDelay(d time.Duration) (time.Duration, error) {
	if d > maxDelay {
		return 0, fmt.Errorf("amqp broker: delay %v exceeds RabbitMQ's limit of %v", d, maxDelay)
	}
	ms := int64((d + time.Millisecond - 1) / time.Millisecond)
	step := int64(1)
	for v := ms; v >= 1000; v /= 10 {
		step *= 10
	}
	ms = (ms + step - 1) / step * step
	return min(time.Duration(ms)*time.Millisecond, maxDelay), nil
}

// topicOfQueue maps a (prefixed) queue name to the topic whose messages it
// holds, for dead letters that arrive without our headers (x-death only).
func (n names) topicOfQueue(q string) broker.Topic {
	switch {
	case q == n.execution || strings.HasPrefix(q, n.execution+".retry.") || strings.HasPrefix(q, n.execution+executionShard):
		return broker.Execution
	case q == n.status:
		return broker.Status
	case q == n.completion:
		return broker.Completion
	case strings.HasPrefix(q, n.timeoutPrefix):
		return broker.Timeout
	}
	return ""
}

// queueVersion is the classic queue storage version of the queues Rune
// declares. Version 2 (RabbitMQ 3.10 and later) confirms a persistent
// message in 0.45 ms rather than 0.70 ms on the benchmark machine and carries
// 10–30 % more of Rune's messages a second (docs/benchmarks.md).
const queueVersion = 2

// versioned returns args with the queue version added.
func versioned(args amqp091.Table) amqp091.Table {
	v := amqp091.Table{"x-queue-version": int32(queueVersion)}
	for k, a := range args {
		v[k] = a
	}
	return v
}

// quorumArgs returns args for a quorum queue: x-queue-type quorum, and no
// x-max-priority (see the topology above). A queue that dead-letters does it
// at least once (RabbitMQ 3.10+; quorum queues default to at most once,
// which could lose a delayed retry or timeout to a node failure), which
// needs overflow reject-publish.
func quorumArgs(args amqp091.Table) amqp091.Table {
	q := amqp091.Table{"x-queue-type": QueueQuorum}
	for k, a := range args {
		if k != "x-max-priority" {
			q[k] = a
		}
	}
	if _, ok := q["x-dead-letter-exchange"]; ok {
		q["x-dead-letter-strategy"] = "at-least-once"
		q["x-overflow"] = "reject-publish"
	}
	return q
}

// declarer declares queues on conn, reopening its channel after a refusal
// (RabbitMQ closes the channel of a failed declaration).
type declarer struct {
	conn   *amqp091.Connection
	ch     *amqp091.Channel
	log    *slog.Logger
	quorum bool // durable queues are quorum queues (names.quorum)
}

func (d *declarer) channel() (*amqp091.Channel, error) {
	if d.ch == nil || d.ch.IsClosed() {
		ch, err := d.conn.Channel()
		if err != nil {
			return nil, fmt.Errorf("open channel: %w", err)
		}
		d.ch = ch
	}
	return d.ch, nil
}

func (d *declarer) close() {
	if d.ch != nil {
		_ = d.ch.Close()
	}
}

// queue declares queue name with args and queueVersion, and binds it to
// each (exchange, routing key) of binds. A queue that already exists with
// another version (declared by an earlier Rune) cannot change in place: it
// is kept as it is, with a warning saying how to move it.
func (d *declarer) queue(name string, durable bool, args amqp091.Table, binds ...[2]string) error {
	ch, err := d.channel()
	if err != nil {
		return err
	}
	if d.quorum && durable {
		_, err = ch.QueueDeclare(name, durable, false, false, false, quorumArgs(args))
	} else {
		_, err = ch.QueueDeclare(name, durable, false, false, false, versioned(args))
	}
	var ae *amqp091.Error
	if errors.As(err, &ae) && ae.Code == amqp091.PreconditionFailed && strings.Contains(ae.Reason, "x-queue-version") {
		d.log.Warn("amqp broker: queue was declared without x-queue-version 2 (by an earlier Rune); keeping it as it is, but unless a policy sets queue-version 2 for it, it runs as the slower version 1: see docs/operations.md, \"Queue version\"",
			"queue", name)
		if ch, err = d.channel(); err != nil {
			return err
		}
		_, err = ch.QueueDeclare(name, durable, false, false, false, args)
	}
	if err != nil {
		return fmt.Errorf("declare queue %s: %w", name, err)
	}
	for _, b := range binds {
		if err := ch.QueueBind(name, b[1], b[0], false, nil); err != nil {
			return fmt.Errorf("bind queue %s to exchange %s with key %q: %w", name, b[0], b[1], err)
		}
	}
	return nil
}

// declare declares the static topology role needs. Every declaration is
// idempotent: it runs at start-up and after every reconnect.
func (n names) declare(d *declarer, role string) error {
	type exchange struct{ name, kind string }
	type queue struct {
		name    string
		durable bool
		args    amqp091.Table
		bind    [][2]string // exchange, routing key
	}
	exchanges := []exchange{
		{n.execX, amqp091.ExchangeDirect},
		{n.eventsX, amqp091.ExchangeTopic},
		{n.dlx, amqp091.ExchangeFanout},
	}
	queues := []queue{
		{n.status, false, statusArgs(),
			[][2]string{{n.eventsX, statusRKPrefix + "#"}}},
		{n.completion, true, amqp091.Table{"x-message-ttl": completionTTL.Milliseconds(), "x-max-priority": int32(maxPriority)},
			[][2]string{{n.eventsX, complRKPrefix + "#"}}},
		{n.dlq, true, nil, [][2]string{{n.dlx, ""}}},
		{n.receipts, false, amqp091.Table{"x-message-ttl": receiptTTL.Milliseconds(), "x-max-length": int32(receiptMax)},
			[][2]string{{n.eventsX, receiptKey}}},
	}
	if role == RoleScheduler {
		// It publishes, and consumes nothing: the exchanges are all it needs.
		exchanges = append(exchanges, exchange{n.timeoutX, amqp091.ExchangeDirect})
		queues = nil
	}
	if role != RoleMaster && role != RoleScheduler {
		exchanges = append(exchanges, exchange{n.timeoutX, amqp091.ExchangeDirect})
		queues = append(queues,
			queue{n.timeoutProcess, true, nil, [][2]string{{n.timeoutX, n.timeoutProcess}}},
		)
		for _, q := range n.execQueues {
			queues = append(queues, queue{q, true, executionArgs(n), [][2]string{{n.execX, q}}})
		}
	}
	ch, err := d.channel()
	if err != nil {
		return err
	}
	for _, x := range exchanges {
		if err := ch.ExchangeDeclare(x.name, x.kind, true, false, false, false, nil); err != nil {
			return fmt.Errorf("declare exchange %s: %w", x.name, err)
		}
	}
	for _, q := range queues {
		if err := d.queue(q.name, q.durable, q.args, q.bind...); err != nil {
			return err
		}
	}
	return nil
}

// declareDelay declares a per-delay queue and its binding.
func declareDelay(dc *declarer, d *delayQueue) error {
	return dc.queue(d.name, true, d.args(), [2]string{d.exchange, d.name})
}
