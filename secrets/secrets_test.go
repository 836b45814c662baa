package secrets

import (
	"context"
	"errors"
	"os"
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

func TestEnvNonStringFields(t *testing.T) {
	env := Env{Lookup: func(string) (string, bool) {
		return `{"port": 587, "tls": "starttls", "debug": true, "headers": {"X-K": "v"}, "none": null}`, true
	}}
	got, err := env.Resolve(context.Background(), "mail")
	if err != nil {
		t.Fatal(err)
	}
	if got["port"] != "587" || got["tls"] != "starttls" || got["debug"] != "true" || got["headers"] != `{"X-K": "v"}` {
		t.Fatalf("fields %v", got)
	}
	if _, ok := got["none"]; ok {
		t.Fatal("a null field is kept")
	}
}

func TestLoadFileAndChain(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/creds.json"
	if err := os.WriteFile(path, []byte(`{"mail": {"type": "smtp", "host": "127.0.0.1", "port": 2525, "password": "pw-in-file"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	file, err := LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	env := Env{Lookup: func(k string) (string, bool) {
		if k == "RUNE_CREDENTIAL_TEXTS" {
			return `{"type": "webhook", "url": "http://127.0.0.1:1/x"}`, true
		}
		if k == "RUNE_CREDENTIAL_MAIL" {
			return `{"host": "from-env"}`, true
		}
		return "", false
	}}
	chain := Chain{file, env}
	ctx := context.Background()
	if f, err := chain.Resolve(ctx, "mail"); err != nil || f["host"] != "127.0.0.1" || f["port"] != "2525" {
		t.Fatalf("mail = %v, %v: want the file's (it comes first)", f, err)
	}
	if f, err := chain.Resolve(ctx, "texts"); err != nil || f["type"] != "webhook" {
		t.Fatalf("texts = %v, %v: want the environment's", f, err)
	}
	_, err = chain.Resolve(ctx, "nope")
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "not in the credentials file") || !strings.Contains(err.Error(), "RUNE_CREDENTIAL_NOPE") {
		t.Fatalf("missing: %v, want both places named", err)
	}
	for name, text := range map[string]string{"list.json": `["pw-in-file"]`, "field.json": `{"mail": "pw-in-file"}`, "syntax.json": `{"mail": {"password": "pw-in-file"`} {
		p := dir + "/" + name
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := LoadFile(p)
		if err == nil || strings.Contains(err.Error(), "pw-in-file") {
			t.Errorf("%s: %v, want an error without the value", name, err)
		}
	}
}
