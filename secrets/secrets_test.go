package secrets

import (
	"context"
	"strings"
	"testing"
)

func TestEnvResolve(t *testing.T) {
	env := map[string]string{"RUNE_CREDENTIAL_CRM_API": `{"token":"s3cr3t"}`, "RUNE_CREDENTIAL_BAD": `s3cr3t`}
	e := Env{Lookup: func(k string) (string, bool) { v, ok := env[k]; return v, ok }}
	got, err := e.Resolve(context.Background(), "crm-api")
	if err != nil || got["token"] != "s3cr3t" {
		t.Fatalf("Resolve(crm-api) = %v, %v", got, err)
	}
	if _, err := e.Resolve(context.Background(), "missing"); err == nil || !strings.Contains(err.Error(), "RUNE_CREDENTIAL_MISSING") {
		t.Fatalf("missing credential: err = %v, want it to name the variable", err)
	}
	_, err = e.Resolve(context.Background(), "bad")
	if err == nil || strings.Contains(err.Error(), "s3cr3t") {
		t.Fatalf("malformed credential: err = %v, want an error that does not echo the value", err)
	}
}
