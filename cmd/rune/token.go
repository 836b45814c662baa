package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/rune-org/rune/server"
	"github.com/rune-org/rune/store"
)

// cmdToken manages API tokens in the server's store (same store flags as
// rune server): create prints the new token alone on stdout.
func cmdToken(ctx context.Context, env *cliEnv, args []string) error {
	fs := flag.NewFlagSet("token", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	var sf storeFlags
	sf.flags(fs, env)
	role := fs.String("role", store.RoleAdmin, "create: the token's role: admin, editor, operator or viewer (docs/api.md, \"Roles\")")
	scope := fs.String("workflows", "", "create: comma-separated glob patterns of the workflow ids the token may see and act on, e.g. billing-* (default: every workflow)")
	expires := fs.String("expires", "", "create: lifetime, e.g. 30d or 12h (default: never expires)")
	asJSON := fs.Bool("json", false, "list: print the tokens as JSON (never their hashes)")
	fs.Usage = func() {
		fmt.Fprintln(env.stderr, "Usage: rune token create NAME [--role R] [--workflows GLOB,…] [--expires 30d] | list [--json] | revoke NAME   [--data DIR | --postgres URL]\n\ncreate prints the new token alone on stdout; only its hash is stored.")
		fs.PrintDefaults()
	}
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usagef("want a subcommand: create NAME, list or revoke NAME")
	}
	want := map[string]int{"create": 2, "revoke": 2, "list": 1}
	n, ok := want[pos[0]]
	if !ok {
		return usagef("unknown subcommand %q: want create, list or revoke", pos[0])
	}
	if len(pos) != n {
		return usagef("%s takes %d argument(s)", pos[0], n-1)
	}
	st, err := sf.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	switch pos[0] {
	case "create":
		var lifetime time.Duration
		if *expires != "" {
			if lifetime, err = server.ParseLifetime(*expires); err != nil {
				return usagef("--expires %v", err)
			}
		}
		var globs []string
		if *scope != "" {
			globs = strings.Split(*scope, ",")
		}
		tok, rec, err := server.NewScopedToken(pos[1], *role, globs, lifetime, time.Now())
		if err != nil {
			return usagef("%v", err)
		}
		if err := st.CreateToken(ctx, rec); err != nil {
			if errors.Is(err, store.ErrConflict) {
				return usagef("a token named %q exists (rune token revoke %s, or choose another name)", pos[1], pos[1])
			}
			return err
		}
		fmt.Fprintln(env.stdout, tok)
	case "revoke":
		if err := st.RevokeToken(ctx, pos[1], time.Now()); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return usagef("no token named %q", pos[1])
			}
			return err
		}
		fmt.Fprintf(env.stderr, "token %s revoked\n", pos[1])
	case "list":
		ts, err := st.ListTokens(ctx)
		if err != nil {
			return err
		}
		if *asJSON {
			views := make([]server.TokenView, 0, len(ts))
			for _, t := range ts {
				views = append(views, server.ViewToken(t))
			}
			return printJSON(env, views)
		}
		rows := make([][]string, 0, len(ts))
		for _, t := range ts {
			state := "active"
			switch {
			case t.RevokedAt != nil:
				state = "revoked " + t.RevokedAt.UTC().Format(time.RFC3339)
			case t.ExpiresAt != nil && !time.Now().Before(*t.ExpiresAt):
				state = "expired " + t.ExpiresAt.UTC().Format(time.RFC3339)
			case t.ExpiresAt != nil:
				state = "expires " + t.ExpiresAt.UTC().Format(time.RFC3339)
			}
			scope := "all workflows"
			if len(t.Workflows) > 0 {
				scope = strings.Join(t.Workflows, ",")
			}
			rows = append(rows, []string{t.Name, t.Prefix + "…", t.Role, scope, timeText(&t.CreatedAt), state})
		}
		return printTable(env, []string{"NAME", "PREFIX", "ROLE", "WORKFLOWS", "CREATED", "STATE"}, rows)
	}
	return nil
}
