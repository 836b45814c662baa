package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rune-org/rune/broker"
	"github.com/rune-org/rune/broker/amqp"
	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/workflow"
)

const dlqUsage = `Usage: rune dlq list [--limit N] [--json]
       rune dlq show ID [--json]
       rune dlq replay ID... [--workflow FIXED.json]
       rune dlq purge --yes
       (each with --amqp URL [--prefix P])

Reads the dead-letter queue (workflow.dlq): messages a worker could never
handle, with the reason and the topic they came from. list and show take
nothing away. replay publishes each message again to its topic, unchanged
(or with the workflow definition of --workflow), and removes it from the
queue once RabbitMQ confirmed the publish. purge deletes every message.
Reading workflow.dlq needs an administrator's URL (docs/operations.md).
`

// cmdDLQ lists, shows, replays and purges dead letters.
func cmdDLQ(ctx context.Context, env *cliEnv, args []string) error {
	fs := flag.NewFlagSet("dlq", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	var srv servers
	srv.flags(fs, env, false)
	limit := fs.Int("limit", 100, "list: show at most this many messages, oldest first (0: all)")
	asJSON := fs.Bool("json", false, "list, show: print JSON (one object per message)")
	fixed := fs.String("workflow", "", "replay: give the messages this workflow definition (a fixed version of theirs) before publishing them")
	yes := fs.Bool("yes", false, "purge: really delete every dead letter")
	fs.Usage = func() {
		fmt.Fprint(env.stderr, dlqUsage)
		fs.PrintDefaults()
	}
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usagef("want a subcommand: list, show, replay or purge (see rune dlq -h)")
	}
	sub, ids := pos[0], pos[1:]
	switch {
	case sub != "list" && sub != "show" && sub != "replay" && sub != "purge":
		return usagef("unknown subcommand %q: want list, show, replay or purge", sub)
	case (sub == "list" || sub == "purge") && len(ids) > 0:
		return usagef("%s takes no message ids, got %d", sub, len(ids))
	case sub == "show" && len(ids) != 1:
		return usagef("show takes exactly one message id, got %d", len(ids))
	case sub == "replay" && len(ids) == 0:
		return usagef("replay takes one or more message ids (see rune dlq list)")
	case sub == "purge" && !*yes:
		return usagef("purge deletes every dead letter for good: add --yes")
	case *fixed != "" && sub != "replay":
		return usagef("--workflow is for replay")
	}
	if err := srv.check(false); err != nil {
		return err
	}
	var fix func(broker.Message) (broker.Message, error)
	if *fixed != "" {
		if fix, err = withDefinition(*fixed); err != nil {
			return err
		}
	}
	b, err := srv.admin(ctx, cliLogger(env))
	if err != nil {
		return err
	}
	defer b.Close()
	switch sub {
	case "list":
		dls, total, err := b.DeadLetters(ctx, *limit)
		if err != nil {
			return err
		}
		return printDeadLetters(env, dls, total, *asJSON)
	case "show":
		dls, _, err := b.DeadLetters(ctx, 0)
		if err != nil {
			return err
		}
		for _, d := range dls {
			if d.ID == ids[0] {
				return showDeadLetter(env, d, *asJSON)
			}
		}
		return fmt.Errorf("message %s is not in the dead-letter queue (see rune dlq list)", ids[0])
	case "replay":
		done, err := b.Replay(ctx, ids, fix)
		for _, id := range done {
			fmt.Fprintf(env.stdout, "replayed %s\n", id)
		}
		return err
	default: // purge
		n, err := b.PurgeDeadLetters(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintf(env.stdout, "purged %d dead letter(s)\n", n)
		return nil
	}
}

// admin connects to RabbitMQ as an administrator: only administrators read
// workflow.dlq (RFC 001 §10.3).
func (s *servers) admin(ctx context.Context, log *slog.Logger) (*amqp.Broker, error) {
	prefix := ""
	if s.prefix != "" {
		prefix = s.prefix + "." // as distributed.Connect names queues
	}
	b, err := amqp.New(ctx, amqp.Config{URL: s.amqpURL, Prefix: prefix, Role: amqp.RoleAdmin, Logger: log, Name: "rune dlq"})
	if err != nil {
		return nil, fmt.Errorf("connect to RabbitMQ: %w (is it running? check the AMQP URL; reading dead letters needs an administrator)", err)
	}
	return b, nil
}

// dlqEntry is a dead letter in --json output.
type dlqEntry struct {
	ID          string          `json:"id"`
	ExecutionID string          `json:"execution_id"`
	Topic       string          `json:"topic"`
	Reason      string          `json:"reason"`
	PublishedAt *time.Time      `json:"published_at,omitempty"`
	Message     json.RawMessage `json:"message,omitempty"`
	// Raw is the body when it is not JSON.
	Raw string `json:"raw,omitempty"`
}

func entryOf(d amqp.DeadLetter, withBody bool) dlqEntry {
	e := dlqEntry{ID: d.ID, ExecutionID: d.Key, Topic: string(d.Topic), Reason: d.Reason}
	if !d.At.IsZero() {
		at := d.At.UTC()
		e.PublishedAt = &at
	}
	if withBody {
		if json.Valid(d.Body) {
			e.Message = d.Body
		} else {
			e.Raw = string(d.Body)
		}
	}
	return e
}

func printDeadLetters(env *cliEnv, dls []amqp.DeadLetter, total int, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(env.stdout)
		for _, d := range dls {
			if err := enc.Encode(entryOf(d, false)); err != nil {
				return err
			}
		}
		return nil
	}
	fmt.Fprintf(env.stdout, "%d dead letter(s)", total)
	if len(dls) < total {
		fmt.Fprintf(env.stdout, ", the oldest %d shown (--limit)", len(dls))
	}
	fmt.Fprintln(env.stdout)
	if len(dls) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(env.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tEXECUTION\tTOPIC\tPUBLISHED\tREASON")
	for _, d := range dls {
		at := "-"
		if !d.At.IsZero() {
			at = d.At.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", d.ID, d.Key, d.Topic, at, oneLine(d.Reason, 240))
	}
	return tw.Flush()
}

func showDeadLetter(env *cliEnv, d amqp.DeadLetter, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(env.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(entryOf(d, true))
	}
	e := entryOf(d, false)
	fmt.Fprintf(env.stdout, "id:         %s\nexecution:  %s\ntopic:      %s\n", e.ID, e.ExecutionID, e.Topic)
	if e.PublishedAt != nil {
		fmt.Fprintf(env.stdout, "published:  %s\n", e.PublishedAt.Format(time.RFC3339Nano))
	}
	fmt.Fprintf(env.stdout, "reason:     %s\nmessage:\n", e.Reason)
	var pretty bytes.Buffer
	if json.Indent(&pretty, d.Body, "  ", "  ") == nil {
		fmt.Fprintf(env.stdout, "  %s\n", pretty.Bytes())
	} else {
		fmt.Fprintf(env.stdout, "  %q\n", d.Body)
	}
	return nil
}

// oneLine shortens s to one line of at most n runes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// withDefinition reads a fixed workflow definition and returns what gives
// it to a replayed message (an execution message, or the one a barrier
// timeout carries). The workers validate it as they would any message; here
// it must be JSON with the message's node, so that an operator who picked
// the wrong file hears so before anything is published.
func withDefinition(path string) (func(broker.Message) (broker.Message, error), error) {
	raw, err := readFileLimited(path, workflow.MaxDefinitionSize)
	if err != nil {
		return nil, usagef("--workflow: %v", err)
	}
	var def workflow.Definition
	if err := json.Unmarshal(raw, &def); err != nil {
		return nil, usagef("--workflow %s: not a workflow definition: %v", path, err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, raw); err != nil {
		return nil, usagef("--workflow %s: %v", path, err)
	}
	give := func(m *message.NodeExecution) (*message.NodeExecution, error) {
		if m == nil {
			return nil, nil
		}
		found := false
		for _, n := range def.Nodes {
			found = found || n.ID == m.CurrentNode
		}
		if !found {
			return nil, fmt.Errorf("--workflow %s has no node %q, the node the message runs", path, m.CurrentNode)
		}
		c := *m
		c.WorkflowDefinition = compact.Bytes()
		c.DefinitionRef = "" // the given definition replaces one that may be gone
		return &c, nil
	}
	return func(m broker.Message) (broker.Message, error) {
		switch b := m.Body.(type) {
		case *message.NodeExecution:
			c, err := give(b)
			if err != nil {
				return m, err
			}
			m.Body = c
		case *message.Timeout:
			c, err := give(b.Message)
			if err != nil {
				return m, err
			}
			t := *b
			t.Message = c
			m.Body = &t
		}
		return m, nil
	}, nil
}
