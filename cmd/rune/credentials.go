package main

import (
	"flag"

	"github.com/rune-org/rune/node"
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
