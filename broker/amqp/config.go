package amqp

import (
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"github.com/rune-org/rune/broker/sign"
)

// Roles of the processes sharing one RabbitMQ (RFC 001 §10.3). A role decides
// which part of the topology a broker declares, and PermissionsFor gives the
// RabbitMQ permissions that let it do its work and nothing else.
const (
	// RoleWorker runs nodes: it consumes workflow.execution and
	// workflow.timeout.process and publishes executions (also delayed),
	// statuses, completions, timeouts and dead letters. It declares the whole
	// topology. It is the default role.
	RoleWorker = "worker"
	// RoleMaster starts executions and watches them: it publishes to
	// workflow.execution, consumes workflow.node.status and
	// workflow.completion, and follows executions. It cannot consume
	// workflow.execution, so it does not declare that queue (RabbitMQ requires
	// read access to declare a queue with a dead-letter exchange): a worker,
	// or Setup with an administrator's URL, declares it.
	RoleMaster = "master"
	// RoleScheduler fires due timers (rune scheduler): it publishes
	// executions, statuses, completions and (delayed) timeouts, and consumes
	// nothing. It declares only the exchanges it publishes to; workers
	// declare the queues.
	RoleScheduler = "scheduler"
	// RoleAdmin declares the whole topology and may do everything; Setup and
	// single-user installations (and tests) use it.
	RoleAdmin = "admin"
)

// Queue types of Config.QueueType.
const (
	QueueClassic = "classic"
	QueueQuorum  = "quorum"
)

// Config configures a Broker. Only URL is required; every other field has the
// default its comment states.
type Config struct {
	// URL is the AMQP URI, e.g. "amqp://user:pass@host:5672/vhost", or
	// several separated by commas, one per node of a RabbitMQ cluster
	// ("amqp://u:p@h1:5672/v,amqp://u:p@h2:5672/v"). Required. Each
	// connection goes to the first node that answers, and after a lost
	// connection the reconnects try the nodes in turn, starting with the one
	// after the node lost. A comma inside a URI (in a password) must be
	// written %2C.
	URL string
	// Prefix is prepended to the name of every queue and exchange this broker
	// declares or uses. Default "" (the names of RFC 001 §8 as they are); tests
	// use a per-test prefix so they never see each other's messages.
	Prefix string
	// Role is RoleWorker, RoleMaster, RoleScheduler or RoleAdmin; it selects the topology
	// declared (see the roles). Default RoleWorker.
	Role string
	// Logger receives connection, dead-lettering and redelivery logs.
	// Default slog.Default().
	Logger *slog.Logger
	// ReconnectMin is the first pause before reconnecting after the
	// connection (or a channel) was lost; each failed attempt doubles it up
	// to ReconnectMax. Defaults 100ms and 10s.
	ReconnectMin time.Duration
	ReconnectMax time.Duration
	// PublishChannels is how many confirm-mode channels publishes are spread
	// over; messages with the same Key always use the same channel, so they
	// reach their queue in publish order. Default 1: with batches
	// (MessageBatch), one channel gathers what two would split, so RabbitMQ
	// gets half as many, twice as large messages, and its queues, most of
	// all the persistent execution queue, do less per node (docs/benchmarks.md,
	// round 12: unfused +24 %, fused +18 % on 2 cores). A channel's process
	// in RabbitMQ works per AMQP message, a batch, so one channel is far
	// from being the bottleneck at these rates; more are for a machine
	// where it becomes one.
	PublishChannels int
	// MessageBatch is how many execution, status or completion messages
	// one AMQP message may carry. While a publishing channel waits for the
	// confirm of its last batch, the messages published on it queue up and
	// then go out together (batch.go):
	// RabbitMQ's work is mostly per AMQP message (docs/benchmarks.md, round
	// 11). A message published while nothing waits goes out at once, on its
	// own. Default 32. 1 publishes every message on its own: do that while
	// processes of a Rune before batches still consume, since they cannot
	// read a batch.
	MessageBatch int
	// Heartbeat is the AMQP heartbeat interval, which bounds how long a dead
	// TCP connection goes unnoticed. Default 10s.
	Heartbeat time.Duration
	// DialTimeout bounds one connection attempt (TCP and AMQP handshake).
	// Default 10s.
	DialTimeout time.Duration
	// RedeliveryPause is how long a consumer holds a message whose handler
	// failed before returning it to its queue, so a failing handler never
	// spins in a hot loop. Default 500ms.
	RedeliveryPause time.Duration
	// FollowExpiry is how long a follower's queue outlives a lost connection:
	// a follower that reconnects within it loses nothing. Default 1m.
	FollowExpiry time.Duration
	// Name is shown as the connection name in RabbitMQ's management tools.
	// Default "rune".
	Name string
	// Signing, when set, signs every message this broker publishes
	// (HMAC-SHA256 over topic, id, key and body; key id and signature in
	// headers x-rune-key-id and x-rune-signature) and dead-letters every
	// consumed message whose signature is missing or wrong, before it is
	// decoded; followers skip such messages. Default nil: messages are
	// neither signed nor checked. All processes of a deployment must share
	// a key (sign.EnvVar).
	Signing *sign.Keyring
	// ExecutionQueues is how many execution queues there are (see the
	// topology in topology.go): messages go to the queue of their execution
	// id, and Consume(broker.Execution) reads all of them, with at least
	// one handler each. Default 1 (the queue workflow.execution alone). All
	// processes of a deployment must agree on it; lowering it strands the
	// messages of the queues dropped.
	ExecutionQueues int
	// QueueType is QueueClassic or QueueQuorum, the type of the durable
	// queues Rune declares. Default QueueClassic. A queue cannot change type
	// in place: switching needs new queues (another Prefix, or the old ones
	// drained and deleted).
	QueueType string
}

func (c Config) withDefaults() (Config, error) {
	if c.URL == "" {
		return c, fmt.Errorf("amqp broker: Config.URL is required")
	}
	if _, err := splitURLs(c.URL); err != nil {
		return c, err
	}
	switch c.Role {
	case "":
		c.Role = RoleWorker
	case RoleWorker, RoleMaster, RoleScheduler, RoleAdmin:
	default:
		return c, fmt.Errorf("amqp broker: unknown role %q (want %q, %q, %q or %q)", c.Role, RoleWorker, RoleMaster, RoleScheduler, RoleAdmin)
	}
	switch c.QueueType {
	case "":
		c.QueueType = QueueClassic
	case QueueClassic, QueueQuorum:
	default:
		return c, fmt.Errorf("amqp broker: Config.QueueType %q: want %q or %q", c.QueueType, QueueClassic, QueueQuorum)
	}
	if c.ExecutionQueues < 0 {
		return c, fmt.Errorf("amqp broker: Config.ExecutionQueues is %d, want at least 1", c.ExecutionQueues)
	}
	c.ExecutionQueues = max(c.ExecutionQueues, 1)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.ReconnectMin <= 0 {
		c.ReconnectMin = 100 * time.Millisecond
	}
	if c.ReconnectMax <= 0 {
		c.ReconnectMax = 10 * time.Second
	}
	if c.ReconnectMax < c.ReconnectMin {
		c.ReconnectMax = c.ReconnectMin
	}
	if c.MessageBatch < 0 {
		return c, fmt.Errorf("amqp broker: Config.MessageBatch is %d, want at least 1 (1: no batches)", c.MessageBatch)
	}
	if c.MessageBatch == 0 {
		c.MessageBatch = 32
	}
	if c.PublishChannels <= 0 {
		c.PublishChannels = 1
	}
	if c.Heartbeat <= 0 {
		c.Heartbeat = 10 * time.Second
	}
	if c.DialTimeout <= 0 {
		c.DialTimeout = 10 * time.Second
	}
	if c.RedeliveryPause <= 0 {
		c.RedeliveryPause = 500 * time.Millisecond
	}
	if c.FollowExpiry <= 0 {
		c.FollowExpiry = time.Minute
	}
	if c.Name == "" {
		c.Name = "rune"
	}
	return c, nil
}

// PermissionsFor returns the RabbitMQ permission regexes (configure, write,
// read, as `rabbitmqctl set_permissions` takes them) for role under prefix,
// granting exactly what RFC 001 §10.3 lists:
//
//   - worker: read and write workflow.execution, write workflow.node.status
//     and workflow.completion; plus the timeout queues of RFC 005 §5 and
//     writing dead letters.
//   - master: write workflow.execution, read workflow.node.status and
//     workflow.completion (and its own follower queues); plus writing dead
//     letters, and the trigger's status (write workflow.events). It cannot
//     read workflow.execution.
//   - scheduler: write workflow.execution (resumed branches), statuses and
//     completions (workflow.events) and delayed timeouts (workflow.timeout.x
//     through its delay queues). It reads no queue but
//     workflow.completion.receipts.
//
// Workers and masters also declare workflow.completion.receipts, and every
// role may read it (Broker.CompletionRouted; never acknowledged, so reading
// it takes nothing from anyone).
//
// In RabbitMQ publishing needs write on the exchange, consuming read on the
// queue, binding write on the queue and read on the exchange, and declaring a
// queue with a dead-letter exchange read on the queue and write on that
// exchange; the regexes cover what each role declares (see Role) and no more.
// Nobody but an administrator reads workflow.dlq. Role "admin" gets everything
// under prefix; an unknown role gets nothing ("^$").
func PermissionsFor(role, prefix string) (configure, write, read string) {
	n := newNames(prefix)
	q := regexp.QuoteMeta
	alt := func(names ...string) string { return "^(" + strings.Join(names, "|") + ")$" }
	digits := "[0-9]+"
	// The execution queues and their delay queues, however many there are
	// (Config.ExecutionQueues).
	exec := q(n.execution) + "(" + q(executionShard) + digits + ")?"
	execRetry := exec + q(".retry.") + digits
	timeoutDelay := q(n.timeoutPrefix) + digits
	follow := q(n.followPrefix) + ".+"
	switch role {
	case RoleWorker:
		all := []string{q(n.execX), exec, execRetry, q(n.eventsX), q(n.status), q(n.completion), q(n.receipts),
			q(n.timeoutX), timeoutDelay, q(n.timeoutProcess), q(n.dlx), q(n.dlq)}
		configure = alt(all...)
		write = alt(all...)
		// workflow.completion.receipts: read (never acknowledged) by
		// CompletionRouted.
		read = alt(q(n.execX), exec, execRetry, q(n.eventsX), q(n.receipts),
			q(n.timeoutX), timeoutDelay, q(n.timeoutProcess), q(n.dlx))
	case RoleMaster:
		configure = alt(q(n.execX), q(n.eventsX), q(n.status), q(n.completion), q(n.receipts), q(n.dlx), q(n.dlq), follow)
		// workflow.events: the trigger's status (and the completion of a
		// trigger without successors) is the master's to publish.
		write = alt(q(n.execX), q(n.eventsX), q(n.status), q(n.completion), q(n.receipts), q(n.dlx), q(n.dlq), follow)
		read = alt(q(n.eventsX), q(n.status), q(n.completion), q(n.dlx), follow)
	case RoleScheduler:
		// Exchanges it declares; delay queues of timeouts (and of retries,
		// should a resumed branch ever be held back), which it declares,
		// binds (write on the queue, read on the exchange) and whose
		// dead-letter exchange needs read on the queue.
		configure = alt(q(n.execX), q(n.eventsX), q(n.dlx), q(n.timeoutX), timeoutDelay, execRetry)
		write = alt(q(n.execX), q(n.eventsX), q(n.dlx), q(n.timeoutX), timeoutDelay, execRetry)
		read = alt(q(n.execX), q(n.timeoutX), timeoutDelay, execRetry, q(n.receipts))
	case RoleAdmin:
		all := "^" + q(prefix) + ".*$"
		return all, all, all
	default:
		return "^$", "^$", "^$"
	}
	return configure, write, read
}

// splitURLs splits Config.URL into its AMQP URIs.
func splitURLs(list string) ([]string, error) {
	parts := strings.Split(list, ",")
	for i, p := range parts {
		p = strings.TrimSpace(p)
		if !strings.HasPrefix(p, "amqp://") && !strings.HasPrefix(p, "amqps://") {
			return nil, fmt.Errorf("amqp broker: Config.URL: URI %d of %d does not start with amqp:// or amqps:// (several URIs are separated by commas; a comma inside one is written %%2C)", i+1, len(parts))
		}
		parts[i] = p
	}
	return parts, nil
}
