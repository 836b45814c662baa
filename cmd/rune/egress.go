package main

import (
	"flag"

	"github.com/rune-org/rune/egress"
)

// egressFlags are --egress-deny and --egress-allow of the processes that
// run other people's workflows (rune server, rune worker). rune run, a
// person running their own file, has none: it connects anywhere.
type egressFlags struct{ deny, allow string }

func (e *egressFlags) flags(fs *flag.FlagSet, env *cliEnv) {
	fs.StringVar(&e.deny, "egress-deny", env.getenv(egress.EnvDeny), "addresses nodes may not connect to (env "+egress.EnvDeny+"): comma-separated loopback, link-local (incl. cloud metadata), private (RFC 1918, ULA), CIDRs, or none; unspecified addresses and this process's own listeners are refused always (default "+egress.DefaultDeny+"; docs/operations.md \"Egress\")")
	fs.StringVar(&e.allow, "egress-allow", env.getenv(egress.EnvAllow), "addresses nodes may connect to whatever --egress-deny says (env "+egress.EnvAllow+"): comma-separated CIDRs, IPs, host names (*.example.com) or host:port, e.g. 127.0.0.0/8 for local development")
}

// policy is the egress policy the flags describe, or a usage error naming
// the setting and its bad item.
func (e *egressFlags) policy() (*egress.Policy, error) {
	if _, err := egress.New(egress.Config{Deny: e.deny}); err != nil {
		return nil, usagef("--egress-deny (%s): %v", egress.EnvDeny, err)
	}
	p, err := egress.New(egress.Config{Deny: e.deny, Allow: e.allow})
	if err != nil {
		return nil, usagef("--egress-allow (%s): %v", egress.EnvAllow, err)
	}
	return p, nil
}
