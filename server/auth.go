package server

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/rune-org/rune/store"
)

// TokenPrefix starts every token the server issues, so a leaked one is
// recognisable (by secret scanners too).
const TokenPrefix = "rune_"

// NewToken returns a fresh API token and the record to store: its SHA-256
// hash and a short visible prefix, never the token itself.
func NewToken(name string, now time.Time) (token string, rec *store.Token, err error) {
	if name == "" {
		return "", nil, errors.New("token name is empty")
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", nil, fmt.Errorf("token: %w", err)
	}
	token = TokenPrefix + base64.RawURLEncoding.EncodeToString(b[:])
	var id [8]byte
	_, _ = rand.Read(id[:])
	h := HashToken(token)
	return token, &store.Token{
		ID: "tok_" + base64.RawURLEncoding.EncodeToString(id[:]), Name: name,
		Prefix: token[:len(TokenPrefix)+6], Hash: h[:], CreatedAt: now,
	}, nil
}

// HashToken is how tokens are stored and looked up.
func HashToken(token string) [32]byte { return sha256.Sum256([]byte(token)) }

// tokenCache remembers stored tokens verified in the last ttl, so a busy
// client does not cost a store read per request.
type tokenCache struct {
	ttl time.Duration
	mu  sync.Mutex
	ok  map[[32]byte]time.Time
}

func (c *tokenCache) valid(h [32]byte, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	exp, ok := c.ok[h]
	return ok && now.Before(exp)
}

func (c *tokenCache) add(h [32]byte, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ok == nil || len(c.ok) > 10_000 {
		c.ok = map[[32]byte]time.Time{}
	}
	c.ok[h] = now.Add(c.ttl)
}

// authenticate checks the request's bearer token against RUNE_API_TOKEN
// and the stored tokens; comparisons are of hashes, in constant time.
func (s *Server) authenticate(r *http.Request) error {
	unauthorized := func(msg string) error {
		return errorf(http.StatusUnauthorized, CodeUnauthorized, "%s", msg)
	}
	auth := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(auth, " ")
	if auth == "" {
		return unauthorized("missing bearer token: send Authorization: Bearer <token> (create one with `rune token create NAME`)")
	}
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return unauthorized("the Authorization header must be \"Bearer <token>\"")
	}
	h := HashToken(strings.TrimSpace(token))
	if s.cfg.APIToken != "" {
		want := HashToken(s.cfg.APIToken)
		if subtle.ConstantTimeCompare(h[:], want[:]) == 1 {
			return nil
		}
	}
	now := s.cfg.Now()
	if s.tokens.valid(h, now) {
		return nil
	}
	t, err := s.store.TokenByHash(r.Context(), h[:])
	if errors.Is(err, store.ErrNotFound) {
		return unauthorized("invalid or revoked token")
	}
	if err != nil {
		return err
	}
	if subtle.ConstantTimeCompare(t.Hash, h[:]) != 1 {
		return unauthorized("invalid or revoked token")
	}
	s.tokens.add(h, now)
	return nil
}

// CheckToken reports whether token is accepted by the API (nil) or not
// (an error naming why, never the token): for the web console's login.
func (s *Server) CheckToken(ctx context.Context, token string) error {
	r, err := http.NewRequestWithContext(ctx, http.MethodGet, "/", nil)
	if err != nil {
		return err
	}
	r.Header.Set("Authorization", "Bearer "+token)
	return s.authenticate(r)
}
