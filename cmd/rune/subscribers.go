package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
)

// cmdSubscribers is `rune subscribers import FILE`, `get ID` and `delete
// ID` (issue 36, docs/notifications.md "Subscribers and preferences").
func cmdSubscribers(ctx context.Context, env *cliEnv, args []string) error {
	fs := flag.NewFlagSet("subscribers", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	var c apiClient
	c.flags(fs, env)
	asJSON := fs.Bool("json", false, "print the API's JSON answer")
	fs.Usage = func() {
		fmt.Fprintln(env.stderr, `Usage: rune subscribers import FILE.ndjson [--json]
       rune subscribers get ID [--json]
       rune subscribers delete ID
          [--server URL] [--token T]

import creates or replaces the subscribers of an NDJSON file, one
{"id", "email", "phone", "timezone", "locale", "data"} a line, 10,000 lines
a request; refused lines are listed by line number, the others written.`)
		fs.PrintDefaults()
	}
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usagef("subscribers: want import FILE, get ID or delete ID")
	}
	switch pos[0] {
	case "import":
		return importSubscribers(ctx, env, &c, pos[1], *asJSON)
	case "get":
		s, err := c.GetSubscriber(ctx, pos[1])
		if err != nil {
			return err
		}
		return printJSON(env, s)
	case "delete":
		if err := c.DeleteSubscriber(ctx, pos[1]); err != nil {
			return err
		}
		fmt.Fprintf(env.stdout, "subscriber %s deleted\n", pos[1])
		return nil
	}
	return usagef("subscribers: unknown subcommand %q (want import, get or delete)", pos[0])
}

// importSubscribers sends file in requests of at most 10,000 lines.
func importSubscribers(ctx context.Context, env *cliEnv, c *apiClient, file string, asJSON bool) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	const perRequest = 10000
	var created, replaced, refused int
	lines := splitLines(data)
	for start := 0; start < len(lines); start += perRequest {
		chunk := lines[start:min(start+perRequest, len(lines))]
		var body []byte
		for _, l := range chunk {
			body = append(append(body, l.text...), '\n')
		}
		res, err := c.ImportSubscribers(ctx, body)
		if err != nil {
			return err
		}
		if asJSON {
			if err := printJSON(env, res); err != nil {
				return err
			}
		}
		created, replaced = created+res.Created, replaced+res.Replaced
		for _, e := range res.Errors {
			refused++
			if !asJSON {
				field := ""
				if e.Field != "" {
					field = e.Field + ": "
				}
				fmt.Fprintf(env.stderr, "%s:%d: %s%s\n", file, chunk[e.Index].line, field, e.Message)
			}
		}
	}
	if !asJSON {
		fmt.Fprintf(env.stdout, "%d created, %d replaced, %d refused\n", created, replaced, refused)
	}
	if refused > 0 {
		return fmt.Errorf("%s line(s) refused", strconv.Itoa(refused))
	}
	return nil
}

type numberedLine struct {
	line int
	text []byte
}

// splitLines returns the lines of data that are not blank, with their
// numbers from 1 (the server indexes the lines it gets, blanks excluded).
func splitLines(data []byte) []numberedLine {
	var out []numberedLine
	n, start := 1, 0
	for i := 0; i <= len(data); i++ {
		if i < len(data) && data[i] != '\n' {
			continue
		}
		text := data[start:i]
		blank := true
		for _, b := range text {
			if b != ' ' && b != '\t' && b != '\r' {
				blank = false
				break
			}
		}
		if !blank {
			out = append(out, numberedLine{line: n, text: text})
		}
		n, start = n+1, i+1
	}
	return out
}
