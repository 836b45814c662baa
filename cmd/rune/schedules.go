package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"strings"

	"github.com/rune-org/rune/client/api"
)

func cmdSchedules(ctx context.Context, env *cliEnv, args []string) error {
	fs := flag.NewFlagSet("schedules", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	tc := &triggerCmd{env: env, kind: "schedules"}
	tc.c.flags(fs, env)
	fs.BoolVar(&tc.json, "json", false, "list: print the schedules as JSON")
	name := fs.String("name", "", "create: the schedule's name")
	cronExpr := fs.String("cron", "", "create: 5 fields (minute hour day month weekday) or @every 10m, @hourly, @daily, @weekly, @monthly")
	tz := fs.String("timezone", "", "create: IANA time zone of the expression (default UTC)")
	jitter := fs.String("jitter", "", "create: delay each slot's execution by up to this duration, e.g. 30s")
	start := fs.String("start", "", "create: first possible slot, RFC 3339")
	end := fs.String("end", "", "create: last possible slot, RFC 3339")
	policy := fs.String("policy", "", "create: slots missed while no server ran: skip (default) or catch_up")
	catchUp := fs.Int("catch-up-max", 0, "create: with catch_up, at most this many missed slots (default 10)")
	input := fs.String("input", "", "create: JSON passed to each execution as $trigger.input")
	paused := fs.Bool("paused", false, "create: start paused")
	fs.Usage = func() {
		fmt.Fprintln(env.stderr, `Usage: rune schedules create WORKFLOW --cron EXPR [--timezone Z] [--jitter D] [--start T] [--end T]
                               [--policy skip|catch_up] [--catch-up-max N] [--input JSON] [--name N] [--paused]
       rune schedules list WORKFLOW [--json] | get WORKFLOW ID | pause WORKFLOW ID | resume WORKFLOW ID | delete WORKFLOW ID

Every slot of a schedule starts one execution, across any number of servers (docs/triggers.md).`)
		fs.PrintDefaults()
	}
	pos, err := tc.args(fs, args)
	if err != nil {
		return err
	}
	wf := pos[1]
	switch pos[0] {
	case "create":
		if err := want(pos, 2, "WORKFLOW"); err != nil {
			return err
		}
		fields := map[string]any{"cron": *cronExpr}
		for k, v := range map[string]string{"name": *name, "timezone": *tz, "jitter": *jitter, "start_at": *start,
			"end_at": *end, "policy": *policy} {
			if v != "" {
				fields[k] = v
			}
		}
		if *catchUp != 0 {
			fields["catch_up_max"] = *catchUp
		}
		if *paused {
			fields["paused"] = true
		}
		if *input != "" {
			if !json.Valid([]byte(*input)) {
				return usagef("--input: not valid JSON")
			}
			fields["input"] = json.RawMessage(*input)
		}
		body, err := settingsBody("", fields)
		if err != nil {
			return err
		}
		return tc.do(ctx, "POST", tc.path(wf), body)
	case "list":
		if err := want(pos, 2, "WORKFLOW"); err != nil {
			return err
		}
		page, err := tc.c.ListSchedules(ctx, wf)
		if err != nil {
			return err
		}
		return table(tc, page.Items, []string{"ID", "STATE", "NEXT", "CRON", "TIMEZONE", "NAME"}, func(s api.Schedule) []string {
			state := "active"
			if s.Paused {
				state = "paused"
			}
			tz := s.Timezone
			if tz == "" {
				tz = "UTC"
			}
			return []string{s.ID, state, timeText(s.NextAt), s.Cron, tz, s.Name}
		})
	case "get", "delete":
		if err := want(pos, 3, "WORKFLOW ID"); err != nil {
			return err
		}
		return tc.do(ctx, strings.ToUpper(pos[0]), tc.path(wf, pos[2]), nil)
	case "pause", "resume":
		if err := want(pos, 3, "WORKFLOW ID"); err != nil {
			return err
		}
		return tc.do(ctx, "POST", tc.path(wf, pos[2], pos[0]), nil)
	}
	return usagef("unknown subcommand %q: want create, list, get, pause, resume or delete", pos[0])
}
