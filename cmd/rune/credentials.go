package main

import (
	"flag"
	"os"
	"strings"
	"syscall"

	"github.com/rune-org/rune/node"
	"github.com/rune-org/rune/nodes"
	"github.com/rune-org/rune/secrets"
)

// credentialsFlag adds --credentials to fs.
func credentialsFlag(fs *flag.FlagSet) *string {
	return fs.String("credentials", "", "JSON file of credential ref → fields (e.g. {\"mail\": {\"type\": \"smtp\", ...}}); RUNE_CREDENTIAL_<REF> variables are looked up after it")
}

// resolver is the chain of credential sources of run and worker: the
// --credentials file when given, then the environment.
func resolver(path string) (node.Secrets, error) {
	if path == "" {
		return secrets.Env{}, nil
	}
	file, err := secrets.LoadFile(path)
	if err != nil {
		return nil, usagef("--credentials: %v", err)
	}
	return secrets.Chain{file, secrets.Env{}}, nil
}

// faultEnv names the variable a test sets to have a worker kill itself with
// SIGKILL at a point of a notification send (nodes.FaultSent,
// nodes.FaultRecorded): the crash tests of e2e use it. Unset in production.
const faultEnv = "RUNE_TEST_KILL_AT"

// faultHook returns the nodes.Options.Fault that faultEnv asks for, or nil.
func faultHook(getenv func(string) string) func(point, key string) {
	at := strings.TrimSpace(getenv(faultEnv))
	if at != nodes.FaultSent && at != nodes.FaultRecorded {
		return nil
	}
	return func(point, _ string) {
		if point == at {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal is on its way
		}
	}
}
