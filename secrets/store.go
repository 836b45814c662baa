package secrets

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/rune-org/rune/store"
)

// Store resolves credential references from the server's store: the
// credential's value, decrypted with Keys, is a JSON object of string fields.
// Workers of a server (`rune worker --postgres`, the embedded server) use it;
// `rune run` keeps Env.
type Store struct {
	Store store.Store
	Keys  *Keyring
}

// Resolve implements node.Secrets. Errors name the reference, never a value.
func (s Store) Resolve(ctx context.Context, ref string) (map[string]string, error) {
	if s.Keys == nil {
		return nil, fmt.Errorf("credential %q: this process has no secret key (set RUNE_SECRET_KEY)", ref)
	}
	c, err := s.Store.GetCredential(ctx, ref)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("credential %q: not in the server's store (POST /v1/credentials creates it): %w", ref, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("credential %q: read the store: %w", ref, err)
	}
	plain, err := s.Keys.Open(c.Name, c.KeyID, c.Ciphertext)
	if err != nil {
		return nil, err
	}
	var fields map[string]string
	if err := json.Unmarshal(plain, &fields); err != nil {
		return nil, fmt.Errorf("credential %q: stored value is not a JSON object of string fields", ref)
	}
	return fields, nil
}
