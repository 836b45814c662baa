package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"

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
	subs := tc.subs("ID", func() ([]byte, error) {
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
				return nil, usagef("--input: not valid JSON")
			}
			fields["input"] = json.RawMessage(*input)
		}
		return settingsBody("", fields)
	})
	subs["list"] = triggerSub{"WORKFLOW", func(ctx context.Context, wf string, _ []string) error {
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
	}}
	for _, verb := range []string{"pause", "resume"} {
		subs[verb] = triggerSub{"WORKFLOW ID", func(ctx context.Context, wf string, rest []string) error {
			return tc.do(ctx, "POST", tc.path(wf, rest[0], verb), nil)
		}}
	}
	return tc.run(ctx, fs, args, subs, "create, list, get, pause, resume or delete")
}
