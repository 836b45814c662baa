package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/rune-org/rune/client/api"
)

// triggerCmd is what `rune hooks` and `rune schedules` share: a resource
// under a workflow (/v1/workflows/{id}/<kind>/{rid}) reached through a server.
type triggerCmd struct {
	env  *cliEnv
	c    apiClient
	kind string // "hooks" or "schedules"
	// json: list prints the items as JSON instead of a table.
	json bool
}

func (tc *triggerCmd) path(wf string, rest ...string) string {
	p := "/v1/workflows/" + url.PathEscape(wf) + "/" + tc.kind
	for _, r := range rest {
		p += "/" + url.PathEscape(r)
	}
	return p
}

// do sends body (nil: none) and prints the answer as JSON.
func (tc *triggerCmd) do(ctx context.Context, method, path string, body []byte) error {
	var out json.RawMessage
	if _, _, err := tc.c.Do(ctx, method, path, body, nil, &out); err != nil {
		return err
	}
	if len(out) == 0 {
		return nil
	}
	var v any
	_ = json.Unmarshal(out, &v)
	return printJSON(tc.env, v)
}

// table prints a list's items as JSON (--json) or as rows under header.
func table[T any](tc *triggerCmd, items []T, header []string, row func(T) []string) error {
	if tc.json {
		return printJSON(tc.env, items)
	}
	rows := make([][]string, 0, len(items))
	for _, it := range items {
		rows = append(rows, row(it))
	}
	return printTable(tc.env, header, rows)
}

// settingsBody merges flag-given fields into the JSON object of --settings.
func settingsBody(settings string, fields map[string]any) ([]byte, error) {
	body := map[string]any{}
	if settings != "" {
		if err := json.Unmarshal([]byte(settings), &body); err != nil {
			return nil, usagef("--settings: not a JSON object: %v", err)
		}
	}
	for k, v := range fields {
		body[k] = v
	}
	return json.Marshal(body)
}

// triggerSub is one subcommand of a trigger command: usage names its
// positional arguments ("WORKFLOW HOOK"), run does it with the workflow id
// and the arguments after it.
type triggerSub struct {
	usage string
	run   func(ctx context.Context, wf string, rest []string) error
}

// subs returns the subcommands hooks and schedules share: create (POSTs the
// body create builds), get and delete; item names a resource's argument.
func (tc *triggerCmd) subs(item string, create func() ([]byte, error)) map[string]triggerSub {
	one := func(method string) triggerSub {
		return triggerSub{"WORKFLOW " + item, func(ctx context.Context, wf string, rest []string) error {
			return tc.do(ctx, method, tc.path(wf, rest[0]), nil)
		}}
	}
	return map[string]triggerSub{
		"create": {"WORKFLOW", func(ctx context.Context, wf string, _ []string) error {
			body, err := create()
			if err != nil {
				return err
			}
			return tc.do(ctx, "POST", tc.path(wf), body)
		}},
		"get":    one("GET"),
		"delete": one("DELETE"),
	}
}

// run parses a trigger command's flags and runs its subcommand, the first
// positional argument, with the rest (a workflow id first); names lists
// the subcommands for an unknown one.
func (tc *triggerCmd) run(ctx context.Context, fs *flag.FlagSet, args []string, subs map[string]triggerSub, names string) error {
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) < 2 {
		return usagef("want a subcommand and a workflow id (rune %s --help)", tc.kind)
	}
	sub, ok := subs[pos[0]]
	if !ok {
		return usagef("unknown subcommand %q: want %s", pos[0], names)
	}
	if len(pos) != 1+len(strings.Fields(sub.usage)) {
		return usagef("%s: want %s", pos[0], sub.usage)
	}
	return sub.run(ctx, pos[1], pos[2:])
}

func cmdHooks(ctx context.Context, env *cliEnv, args []string) error {
	fs := flag.NewFlagSet("hooks", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	tc := &triggerCmd{env: env, kind: "hooks"}
	tc.c.flags(fs, env)
	fs.BoolVar(&tc.json, "json", false, "list: print the hooks as JSON")
	name := fs.String("name", "", "create: the hook's name")
	signed := fs.Bool("signed", false, "create: verify an HMAC-SHA256 signature (a signing secret is generated and shown once)")
	settings := fs.String("settings", "", `create, update: the hook's settings as JSON, e.g. {"headers":["X-GitHub-Event"],"rate_limit":{"per_second":10}} (docs/triggers.md)`)
	rotateSigning := fs.Bool("signing-secret", false, "rotate: replace the signing secret too")
	fs.Usage = func() {
		fmt.Fprintln(env.stderr, `Usage: rune hooks create WORKFLOW [--name N] [--signed] [--settings JSON]
       rune hooks list WORKFLOW [--json] | get WORKFLOW HOOK | delete WORKFLOW HOOK
       rune hooks update WORKFLOW HOOK --settings JSON
       rune hooks enable|disable WORKFLOW HOOK
       rune hooks rotate WORKFLOW HOOK [--signing-secret]

Webhooks start executions from POST <server>/v1/hooks/<secret> (docs/triggers.md).
The URL's secret and the signing secret are shown once: by create and rotate.`)
		fs.PrintDefaults()
	}
	subs := tc.subs("HOOK", func() ([]byte, error) {
		fields := map[string]any{}
		if *name != "" {
			fields["name"] = *name
		}
		if *signed {
			fields["signature"] = map[string]any{}
		}
		return settingsBody(*settings, fields)
	})
	subs["list"] = triggerSub{"WORKFLOW", func(ctx context.Context, wf string, _ []string) error {
		page, err := tc.c.ListHooks(ctx, wf)
		if err != nil {
			return err
		}
		return table(tc, page.Items, []string{"ID", "STATE", "SIGNED", "NAME"}, func(h api.Hook) []string {
			state := "enabled"
			if h.Disabled {
				state = "disabled"
			}
			return []string{h.ID, state, strconv.FormatBool(h.Signed), h.Name}
		})
	}}
	subs["update"] = triggerSub{"WORKFLOW HOOK", func(ctx context.Context, wf string, rest []string) error {
		if *settings == "" {
			return usagef("update: want --settings JSON (the whole settings: what it omits is reset)")
		}
		return tc.do(ctx, "PUT", tc.path(wf, rest[0]), []byte(*settings))
	}}
	enable := func(disabled bool) triggerSub {
		return triggerSub{"WORKFLOW HOOK", func(ctx context.Context, wf string, rest []string) error {
			var cur map[string]any
			if _, _, err := tc.c.Do(ctx, "GET", tc.path(wf, rest[0]), nil, nil, &cur); err != nil {
				return err
			}
			for _, k := range []string{"id", "workflow_id", "signed", "created_at", "updated_at"} {
				delete(cur, k)
			}
			cur["disabled"] = disabled
			body, _ := json.Marshal(cur)
			return tc.do(ctx, "PUT", tc.path(wf, rest[0]), body)
		}}
	}
	subs["enable"], subs["disable"] = enable(false), enable(true)
	subs["rotate"] = triggerSub{"WORKFLOW HOOK", func(ctx context.Context, wf string, rest []string) error {
		p := tc.path(wf, rest[0], "rotate")
		if *rotateSigning {
			p += "?signing_secret=true"
		}
		return tc.do(ctx, "POST", p, nil)
	}}
	return tc.run(ctx, fs, args, subs, "create, list, get, update, enable, disable, rotate or delete")
}
