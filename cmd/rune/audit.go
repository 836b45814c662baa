package main

import (
	"context"
	"flag"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// cmdAudit prints the server's audit log, newest first (an admin token).
func cmdAudit(ctx context.Context, env *cliEnv, args []string) error {
	fs := flag.NewFlagSet("audit", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	var c apiClient
	c.flags(fs, env)
	limit := fs.Int("limit", 50, "how many entries (newest first), 1–500")
	asJSON := fs.Bool("json", false, "print the API's JSON page")
	fs.Usage = func() {
		fmt.Fprintln(env.stderr, "Usage: rune audit [--limit N] [--json]   [--server URL] [--token T]\n\nThe server's audit log: every state-changing API request, who made it and how it ended (admin tokens only).")
		fs.PrintDefaults()
	}
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usagef("audit takes no arguments")
	}
	if *limit < 1 || *limit > 500 {
		return usagef("--limit %d: want 1 to 500", *limit)
	}
	page, err := c.ListAudit(ctx, *limit, "")
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(env, page)
	}
	rows := make([][]string, 0, len(page.Items))
	for _, e := range page.Items {
		var objs []string
		for k, v := range e.Objects {
			objs = append(objs, k+"="+v)
		}
		sort.Strings(objs)
		rows = append(rows, []string{timeText(&e.At), e.Actor, e.Role, strconv.Itoa(e.Status), e.Method, e.Route, strings.Join(objs, " ")})
	}
	return printTable(env, []string{"AT", "ACTOR", "ROLE", "STATUS", "METHOD", "ROUTE", "OBJECTS"}, rows)
}
