package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"

	"github.com/rune-org/rune/client/api"
)

// cmdTemplates is `rune templates put|get|list|versions|preview|delete`:
// the message templates of a server (issue 36, docs/notifications.md
// "Templates").
func cmdTemplates(ctx context.Context, env *cliEnv, args []string) error {
	fs := flag.NewFlagSet("templates", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	var c apiClient
	c.flags(fs, env)
	data := fs.String("data", "", `preview: the Liquid context as a node sees it, e.g. {"$trigger": {"name": "Ada"}}`)
	version := fs.Int("version", 0, "get, preview: this version (default: the latest)")
	asJSON := fs.Bool("json", false, "list, versions, preview: print the API's JSON answer")
	fs.Usage = func() {
		fmt.Fprintln(env.stderr, `Usage: rune templates put NAME FILE
       rune templates get NAME [--version N]
       rune templates list [--json] | versions NAME [--json]
       rune templates preview NAME [--data JSON] [--version N] [--json]
       rune templates delete NAME
          [--server URL] [--token T]

Message templates that email and sms nodes render with "template"
(docs/notifications.md, "Templates"). FILE is JSON:
{"subject", "text", "html", "body", "layout"}; each put stores the next version.`)
		fs.PrintDefaults()
	}
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usagef("templates: want a subcommand: put, get, list, versions, preview or delete")
	}
	want := func(n int, what string) error {
		if len(pos) != n {
			return usagef("templates %s: want %s", pos[0], what)
		}
		return nil
	}
	switch sub := pos[0]; sub {
	case "put":
		if err := want(3, "NAME FILE"); err != nil {
			return err
		}
		raw, err := os.ReadFile(pos[2])
		if err != nil {
			return usagef("%v", err)
		}
		var in api.TemplateInput
		if err := json.Unmarshal(raw, &in); err != nil {
			return usagef("%s: want JSON {\"subject\", \"text\", \"html\", \"body\", \"layout\"}: %v", pos[2], err)
		}
		t, err := c.PutTemplate(ctx, pos[1], in)
		if err != nil {
			return err
		}
		fmt.Fprintf(env.stdout, "template %s: version %d\n", t.Name, t.Version)
		return nil
	case "get":
		if err := want(2, "NAME"); err != nil {
			return err
		}
		t, err := c.GetTemplate(ctx, pos[1], *version)
		if err != nil {
			return err
		}
		return printJSON(env, t)
	case "list", "versions":
		var items []api.Template
		if sub == "list" {
			if err := want(1, "no arguments"); err != nil {
				return err
			}
			items, err = c.ListTemplates(ctx)
		} else {
			if err := want(2, "NAME"); err != nil {
				return err
			}
			items, err = c.ListTemplateVersions(ctx, pos[1])
		}
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(env, items)
		}
		rows := make([][]string, 0, len(items))
		for _, t := range items {
			rows = append(rows, []string{t.Name, strconv.Itoa(t.Version), timeText(&t.CreatedAt), t.Layout, t.Subject})
		}
		return printTable(env, []string{"NAME", "VERSION", "CREATED", "LAYOUT", "SUBJECT"}, rows)
	case "preview":
		if err := want(2, "NAME"); err != nil {
			return err
		}
		var vars map[string]any
		if *data != "" {
			if err := json.Unmarshal([]byte(*data), &vars); err != nil {
				return usagef("--data: want a JSON object such as {\"$trigger\": {…}}: %v", err)
			}
		}
		p, err := c.PreviewTemplate(ctx, pos[1], *version, vars)
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(env, p)
		}
		fmt.Fprintf(env.stdout, "template %s version %d", p.Name, p.Version)
		for _, l := range p.Layouts {
			fmt.Fprintf(env.stdout, ", in layout %s", l)
		}
		fmt.Fprintln(env.stdout)
		for _, f := range [][2]string{{"subject", p.Subject}, {"text", p.Text}, {"html", p.HTML}, {"body", p.Body}} {
			if f[1] != "" {
				fmt.Fprintf(env.stdout, "\n%s:\n%s\n", f[0], f[1])
			}
		}
		return nil
	case "delete":
		if err := want(2, "NAME"); err != nil {
			return err
		}
		if err := c.DeleteTemplate(ctx, pos[1]); err != nil {
			return err
		}
		fmt.Fprintf(env.stdout, "template %s deleted\n", pos[1])
		return nil
	default:
		return usagef("templates: unknown subcommand %q (known: put, get, list, versions, preview, delete)", sub)
	}
}
