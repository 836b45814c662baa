package main

import (
	"context"
	"flag"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"time"
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
	var page struct {
		Items []struct {
			At      time.Time         `json:"at"`
			Actor   string            `json:"actor"`
			Role    string            `json:"role"`
			Method  string            `json:"method"`
			Route   string            `json:"route"`
			Objects map[string]string `json:"objects"`
			Status  int               `json:"status"`
		} `json:"items"`
		NextCursor string `json:"next_cursor"`
	}
	if _, err := c.call(ctx, "GET", "/v1/audit?"+url.Values{"limit": {fmt.Sprint(*limit)}}.Encode(), nil, &page); err != nil {
		return err
	}
	if *asJSON {
		return printJSON(env, page)
	}
	for _, e := range page.Items {
		var objs []string
		for k, v := range e.Objects {
			objs = append(objs, k+"="+v)
		}
		sort.Strings(objs)
		fmt.Fprintf(env.stdout, "%s  %-16s %-8s %3d  %-6s %-48s %s\n", e.At.UTC().Format(time.RFC3339), e.Actor, e.Role, e.Status,
			e.Method, e.Route, strings.Join(objs, " "))
	}
	return nil
}
