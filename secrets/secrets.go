// Package secrets resolves credential references (dsl.md "credentials.ref")
// for workers. Secrets never travel in messages: a worker resolves the
// reference when the node runs (RFC 001 §10.2).
package secrets

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// Env resolves reference "crm_api" from the environment variable
// RUNE_CREDENTIAL_CRM_API, whose value is a JSON object of string fields,
// e.g. {"token":"..."}.
type Env struct {
	// Lookup reads a variable; nil means os.LookupEnv.
	Lookup func(string) (string, bool)
}

// Var is the environment variable that holds reference ref.
func Var(ref string) string {
	return "RUNE_CREDENTIAL_" + strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(ref))
}

// Resolve implements node.Secrets. Errors name the reference and the
// variable, never a value.
func (e Env) Resolve(_ context.Context, ref string) (map[string]string, error) {
	lookup := e.Lookup
	if lookup == nil {
		lookup = os.LookupEnv
	}
	name := Var(ref)
	raw, ok := lookup(name)
	if !ok {
		return nil, fmt.Errorf("credential %q: set %s to a JSON object of its fields", ref, name)
	}
	var fields map[string]string
	if err := json.Unmarshal([]byte(raw), &fields); err != nil {
		return nil, fmt.Errorf("credential %q: %s must hold a JSON object of string fields", ref, name)
	}
	return fields, nil
}
