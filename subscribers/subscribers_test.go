package subscribers

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/rune-org/rune/nodes"
	"github.com/rune-org/rune/secrets"
	"github.com/rune-org/rune/store"
)

const (
	keyA = "3q2+7wAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="
	keyB = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="
)

func keys(t *testing.T, text string) *secrets.Keyring {
	t.Helper()
	k, err := secrets.ParseKeys(text)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// A token names its subscriber and category; any change to it, or a key
// that did not sign it, is ErrBadToken; an old key still verifies after a
// rotation while it is configured.
func TestToken(t *testing.T) {
	k := keys(t, keyA)
	tok := Token(k, "user.42", "promo")
	id, cat, err := ParseToken(k, tok)
	if err != nil || id != "user.42" || cat != "promo" {
		t.Fatalf("ParseToken = %q, %q, %v", id, cat, err)
	}
	parts := strings.Split(tok, ".")
	for _, bad := range []string{
		"", "x", tok + "A", parts[0] + "." + parts[1], strings.Replace(tok, parts[1], b64.EncodeToString([]byte("user.43\x00promo")), 1),
		strings.Replace(tok, parts[1], b64.EncodeToString([]byte("user.42\x00news")), 1), "0000000000000000." + parts[1] + "." + parts[2],
		strings.Repeat("a", MaxToken+1),
	} {
		if _, _, err := ParseToken(k, bad); !errors.Is(err, ErrBadToken) {
			t.Errorf("ParseToken(%q) = %v, want ErrBadToken", bad, err)
		}
	}
	if _, _, err := ParseToken(keys(t, keyB), tok); !errors.Is(err, ErrBadToken) {
		t.Errorf("another key verified the token: %v", err)
	}
	if id, _, err := ParseToken(keys(t, keyB+","+keyA), tok); err != nil || id != "user.42" {
		t.Errorf("after a rotation keeping the old key: %q, %v", id, err)
	}
}

type getter map[string]*store.Subscriber

func (g getter) GetSubscriber(_ context.Context, id string) (*store.Subscriber, error) {
	if s, ok := g[id]; ok {
		return s, nil
	}
	return nil, store.ErrNotFound
}

// Source maps a missing subscriber to nodes.ErrNoSubscriber, carries the
// preferences, and makes links only with a key and a public URL.
func TestSource(t *testing.T) {
	src := Source{Store: getter{"u1": {ID: "u1", Email: "a@example.com", Preferences: store.Preferences{Categories: map[string]bool{"promo": false}}}},
		Keys: keys(t, keyA), PublicURL: "https://rune.example.com/"}
	if _, err := src.Subscriber(t.Context(), "nobody"); !errors.Is(err, nodes.ErrNoSubscriber) {
		t.Fatalf("missing: %v", err)
	}
	s, err := src.Subscriber(t.Context(), "u1")
	if err != nil || s.Email != "a@example.com" || s.Allows("email", "promo", "") || !s.Allows("email", "news", "") {
		t.Fatalf("u1 = %+v, %v", s, err)
	}
	u := src.UnsubscribeURL("u1", "promo")
	if !strings.HasPrefix(u, "https://rune.example.com/v1/unsubscribe/") {
		t.Fatalf("URL %q", u)
	}
	if id, cat, err := ParseToken(src.Keys, strings.TrimPrefix(u, "https://rune.example.com/v1/unsubscribe/")); err != nil || id != "u1" || cat != "promo" {
		t.Fatalf("its token: %q %q %v", id, cat, err)
	}
	if u := (Source{Store: src.Store, Keys: src.Keys}).UnsubscribeURL("u1", "promo"); u != "" {
		t.Fatalf("no public URL: %q", u)
	}
}
