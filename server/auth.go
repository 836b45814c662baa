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
	ok  map[[32]byte]cachedToken
}

type cachedToken struct {
	p     *Principal
	until time.Time
}

func (c *tokenCache) get(h [32]byte, now time.Time) *Principal {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.ok[h]; ok && now.Before(e.until) {
		return e.p
	}
	return nil
}

// add remembers p until ttl from now, or until expires when sooner.
func (c *tokenCache) add(h [32]byte, p *Principal, now time.Time, expires *time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ok == nil || len(c.ok) > 10_000 {
		c.ok = map[[32]byte]cachedToken{}
	}
	until := now.Add(c.ttl)
	if expires != nil && expires.Before(until) {
		until = *expires
	}
	c.ok[h] = cachedToken{p: p, until: until}
}

// envPrincipal is who RUNE_API_TOKEN acts as.
var envPrincipal = &Principal{Name: "RUNE_API_TOKEN", Role: store.RoleAdmin}

func unauthorized(format string, args ...any) error {
	return errorf(http.StatusUnauthorized, CodeUnauthorized, format, args...)
}

// credential is what a request authenticated with: a bearer token, or a
// console session (put in the context by Session, for the console's proxy
// to the API). Resolving it again says whether it still holds: the live
// streams do so every Config.StreamRecheck.
type credential struct {
	token   string
	session string
}

type credentialKey struct{}

// credentialOf returns the credential of an authenticated request, or of
// a context a console session made.
func credentialOf(ctx context.Context) (credential, bool) {
	c, ok := ctx.Value(credentialKey{}).(credential)
	return c, ok
}

// authenticate returns who the request acts as and the credential it came
// with: the console session its context carries (the console's proxy), else
// its bearer token, checked against RUNE_API_TOKEN and the stored tokens
// (comparisons are of hashes, in constant time).
func (s *Server) authenticate(r *http.Request) (*Principal, credential, error) {
	if c, ok := credentialOf(r.Context()); ok {
		p, err := s.resolve(r.Context(), c, false)
		return p, c, err
	}
	auth := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(auth, " ")
	if auth == "" {
		return nil, credential{}, unauthorized("missing bearer token: send Authorization: Bearer <token> (create one with `rune token create NAME`)")
	}
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return nil, credential{}, unauthorized("the Authorization header must be \"Bearer <token>\"")
	}
	c := credential{token: strings.TrimSpace(token)}
	p, err := s.resolve(r.Context(), c, false)
	return p, c, err
}

// resolve returns who c acts as now, or a 401 naming why it no longer
// does. fresh skips the caches (a stream's re-check: a revocation through
// another process is seen at once).
func (s *Server) resolve(ctx context.Context, c credential, fresh bool) (*Principal, error) {
	if c.session != "" {
		return s.sessionPrincipal(ctx, c.session, fresh)
	}
	return s.principal(ctx, c.token, fresh)
}

// principal returns who token acts as, or a 401 naming why it is refused
// (never the token). fresh skips the token cache.
func (s *Server) principal(ctx context.Context, token string, fresh bool) (*Principal, error) {
	h := HashToken(token)
	if s.cfg.APIToken != "" {
		want := HashToken(s.cfg.APIToken)
		if subtle.ConstantTimeCompare(h[:], want[:]) == 1 {
			return envPrincipal, nil
		}
	}
	now := s.cfg.Now()
	if p := s.tokens.get(h, now); p != nil && !fresh {
		return p, nil
	}
	t, err := s.store.TokenByHash(ctx, h[:])
	if errors.Is(err, store.ErrNotFound) {
		s.tokens.drop(h) // revoked elsewhere: a fresh check tells the cache
		return nil, unauthorized("invalid or revoked token")
	}
	if err != nil {
		return nil, err
	}
	if subtle.ConstantTimeCompare(t.Hash, h[:]) != 1 {
		return nil, unauthorized("invalid or revoked token")
	}
	p, err := tokenPrincipal(t, now)
	if err != nil {
		s.tokens.drop(h)
		return nil, err
	}
	s.tokens.add(h, p, now, t.ExpiresAt)
	return p, nil
}

// tokenPrincipal is who stored token t acts as at now: a 401 once it expired.
func tokenPrincipal(t *store.Token, now time.Time) (*Principal, error) {
	if t.ExpiresAt != nil && !now.Before(*t.ExpiresAt) {
		return nil, unauthorized("token %q expired at %s", t.Name, t.ExpiresAt.UTC().Format(time.RFC3339))
	}
	return &Principal{Name: t.Name, Role: t.Role, Workflows: t.Workflows, tokenID: t.ID}, nil
}

// forget drops every cached token: a revocation through this server takes
// effect at once here (other servers see it within the cache's ttl).
func (c *tokenCache) forget() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ok = nil
}

// drop forgets the entry of hash h.
func (c *tokenCache) drop(h [32]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.ok, h)
}
