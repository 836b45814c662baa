package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"strconv"
)

// cmdEvents is `rune events send EVENT KEY --data JSON` and `rune events
// approvals` / `approve` / `reject` (issue 34).
func cmdEvents(ctx context.Context, env *cliEnv, args []string) error {
	fs := flag.NewFlagSet("events", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	var c apiClient
	c.flags(fs, env)
	data := fs.String("data", "", `send: the event's data, any JSON value, e.g. {"amount": 12}`)
	idem := fs.String("idempotency-key", "", "send: a key that makes sending again match no wait twice")
	comment := fs.String("comment", "", "approve, reject: a comment recorded in the event's data")
	asJSON := fs.Bool("json", false, "print the API's JSON answer")
	fs.Usage = func() {
		fmt.Fprintln(env.stderr, `Usage: rune events send EVENT KEY [--data JSON] [--idempotency-key K]
       rune events approvals [--json]
       rune events approve|reject EXECUTION NODE [--comment TEXT]
          [--server URL] [--token T]

Sends an event to the wait_for_event nodes waiting for (EVENT, KEY): each
resumes once with it (docs/dsl.md, "wait_for_event"). approvals lists the
waiting approvals; approve and reject decide one.`)
		fs.PrintDefaults()
	}
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usagef("events: want a subcommand: send, approvals, approve or reject")
	}
	switch sub := pos[0]; sub {
	case "send":
		if len(pos) != 3 {
			return usagef("events send: want EVENT KEY")
		}
		var raw json.RawMessage
		if *data != "" {
			if !json.Valid([]byte(*data)) {
				return usagef("--data: not JSON: %s", *data)
			}
			raw = json.RawMessage(*data)
		}
		sent, err := c.SendEvent(ctx, pos[1], pos[2], raw, *idem)
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(env, sent)
		}
		fmt.Fprintf(env.stdout, "event %s: %d waiting execution(s) resumed\n", sent.EventID, sent.Matched)
		return nil
	case "approvals":
		if len(pos) != 1 {
			return usagef("events approvals takes no arguments")
		}
		items, err := c.Approvals(ctx)
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(env, items)
		}
		rows := make([][]string, 0, len(items))
		for _, a := range items {
			rows = append(rows, []string{a.ExecutionID, a.NodeID, a.WorkflowID, timeText(&a.Since), timeText(a.TimeoutAt), a.Title})
		}
		return printTable(env, []string{"EXECUTION", "NODE", "WORKFLOW", "SINCE", "TIMEOUT", "TITLE"}, rows)
	case "approve", "reject":
		if len(pos) != 3 {
			return usagef("events %s: want EXECUTION NODE", sub)
		}
		sent, err := c.DecideApproval(ctx, pos[1], pos[2], sub == "approve", *comment)
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(env, sent)
		}
		fmt.Fprintf(env.stdout, "%sd: %s resumed\n", sub, strconv.Itoa(sent.Matched)+" branch(es)")
		return nil
	default:
		return usagef("events: unknown subcommand %q (known: send, approvals, approve, reject)", sub)
	}
}
