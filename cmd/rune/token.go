package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
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
	fs.Usage = func() {
		fmt.Fprintln(env.stderr, "Usage: rune token create NAME | list | revoke NAME   [--data DIR | --postgres URL]\n\ncreate prints the new token alone on stdout; only its hash is stored.")
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
		tok, rec, err := server.NewToken(pos[1], time.Now())
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
		for _, t := range ts {
			state := "active"
			if t.RevokedAt != nil {
				state = "revoked " + t.RevokedAt.UTC().Format(time.RFC3339)
			}
			fmt.Fprintf(env.stdout, "%-24s %s…  created %s  %s\n", t.Name, t.Prefix, t.CreatedAt.UTC().Format(time.RFC3339), state)
		}
	}
	return nil
}
