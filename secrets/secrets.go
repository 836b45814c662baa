// Package secrets resolves credential references (dsl.md "credentials.ref")
// for workers. Secrets never travel in messages: a worker resolves the
// reference when the node runs (RFC 001 §10.2).
//
// Resolvers: Env (RUNE_CREDENTIAL_<REF>), Static (a map, e.g. loaded from a
// --credentials file by LoadFile), and Chain, which asks several in order.
package secrets

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ErrNotFound is wrapped by the errors of resolvers that do not know a
// reference, so that a Chain asks the next one.
var ErrNotFound = errors.New("credential not found")

// Resolver is node.Secrets: it resolves a reference to its fields. Values
// it returns never appear in its errors.
type Resolver interface {
	Resolve(ctx context.Context, ref string) (map[string]string, error)
}

// Env resolves reference "crm_api" from the environment variable
// RUNE_CREDENTIAL_CRM_API, whose value is a JSON object of fields,
// e.g. {"token":"..."}. Numbers and booleans are taken as their JSON text
// ("port": 587 gives "587"), objects and arrays as their JSON.
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
		return nil, fmt.Errorf("credential %q: set %s to a JSON object of its fields: %w", ref, name, ErrNotFound)
	}
	fields, err := decodeFields([]byte(raw))
	if err != nil {
		return nil, fmt.Errorf("credential %q: %s must hold a JSON object of string fields", ref, name)
	}
	return fields, nil
}

// decodeFields reads a JSON object of fields. Only the shape is reported in
// an error: the text may be a secret.
func decodeFields(raw []byte) (map[string]string, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return nil, errors.New("not a JSON object")
	}
	fields := make(map[string]string, len(obj))
	for k, v := range obj {
		if string(v) == "null" {
			continue
		}
		var s string
		if json.Unmarshal(v, &s) == nil {
			fields[k] = s
			continue
		}
		var f float64
		if json.Unmarshal(v, &f) == nil {
			fields[k] = strconv.FormatFloat(f, 'f', -1, 64)
			continue
		}
		fields[k] = string(v) // true, false, an object or an array as JSON
	}
	return fields, nil
}

// Static resolves references from a map of ref → fields.
type Static map[string]map[string]string

// Resolve implements node.Secrets.
func (s Static) Resolve(_ context.Context, ref string) (map[string]string, error) {
	f, ok := s[ref]
	if !ok {
		return nil, fmt.Errorf("credential %q: not in the credentials file: %w", ref, ErrNotFound)
	}
	return f, nil
}

// LoadFile reads a credentials file: a JSON object of ref → object of
// fields, as `rune run --credentials` and `rune worker --credentials` take:
//
//	{"mail": {"type": "smtp", "host": "smtp.example.com", "port": 587, "tls": "starttls",
//	          "username": "app", "password": "..."}}
//
// Errors name the file and the reference, never a value.
func LoadFile(path string) (Static, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("credentials file: %w", err)
	}
	var refs map[string]json.RawMessage
	if err := json.Unmarshal(raw, &refs); err != nil || refs == nil {
		return nil, fmt.Errorf("credentials file %s: want a JSON object of reference → fields", path)
	}
	s := make(Static, len(refs))
	for ref, obj := range refs {
		fields, err := decodeFields(obj)
		if err != nil {
			return nil, fmt.Errorf("credentials file %s: %q: want an object of fields", path, ref)
		}
		s[ref] = fields
	}
	return s, nil
}

// Chain asks each resolver in turn; the first that knows the reference
// answers. When none does, the error lists where each one looked.
type Chain []Resolver

// Resolve implements node.Secrets.
func (c Chain) Resolve(ctx context.Context, ref string) (map[string]string, error) {
	var missing []string
	for _, r := range c {
		f, err := r.Resolve(ctx, ref)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, ErrNotFound) {
			return nil, err
		}
		missing = append(missing, strings.TrimSuffix(strings.TrimPrefix(err.Error(), fmt.Sprintf("credential %q: ", ref)), ": "+ErrNotFound.Error()))
	}
	return nil, fmt.Errorf("credential %q: %s: %w", ref, strings.Join(missing, "; or "), ErrNotFound)
}
