package server

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rune-org/rune/console"
	"github.com/rune-org/rune/store"
)

// Console sessions (docs/api.md, "Sessions"): the console's cookie holds a
// random session id; the store keeps its hash, the token it acts as and
// its end. Each request resolves the session to its token's principal
// (cached like tokens, Config.TokenCacheTTL), so revoking the token, or its
// expiry, ends the session; logout deletes it.

// sessionPrefix starts every session id, so a leaked one is recognisable.
const sessionPrefix = "rune_session_"

// envBindingPrefix marks a session of RUNE_API_TOKEN, which has no stored
// id: the session is bound to an HMAC of its own id keyed by the token, so
// it ends when the server's RUNE_API_TOKEN changes, and the store holds
// nothing from which the token could be guessed.
const envBindingPrefix = "env:"

func envBinding(session, apiToken string) string {
	m := hmac.New(sha256.New, []byte(apiToken))
	m.Write([]byte(session))
	return envBindingPrefix + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// Login checks token as the API does and opens a console session acting
// as it until Config.SessionTTL from now (or the token's expiry, if
// sooner); it returns the session's id for the browser's cookie. Expired
// sessions are pruned on the way.
func (s *Server) Login(ctx context.Context, token string) (string, error) {
	if token == "" {
		return "", unauthorized("missing token")
	}
	p, err := s.principal(ctx, token, true)
	if err != nil {
		return "", err
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("session: %w", err)
	}
	id := sessionPrefix + base64.RawURLEncoding.EncodeToString(b[:])
	bind := p.tokenID
	if p == envPrincipal {
		bind = envBinding(id, s.cfg.APIToken)
	}
	now := s.cfg.Now()
	if _, err := s.store.PruneSessions(ctx, now); err != nil {
		s.log.Warn("prune expired console sessions", "err", err)
	}
	h := HashToken(id)
	if err := s.store.CreateSession(ctx, &store.Session{Hash: h[:], TokenID: bind, CreatedAt: now, ExpiresAt: now.Add(s.cfg.SessionTTL)}); err != nil {
		return "", err
	}
	return id, nil
}

// Session resolves a console session to what its token may see and do,
// and returns ctx carrying the session: requests to the API handler made
// with it act as the session's token, with its role and scope (the
// console's proxy). An error (401) when the session expired or ended.
func (s *Server) Session(ctx context.Context, session string) (context.Context, console.Access, error) {
	p, err := s.sessionPrincipal(ctx, session, false)
	if err != nil {
		return ctx, console.Access{}, err
	}
	return context.WithValue(ctx, credentialKey{}, credential{session: session}), consoleAccess(p), nil
}

// Logout ends a console session: its id no longer resolves, on this
// server at once, on others sharing the store within their cache's TTL
// (their streams within Config.StreamRecheck).
func (s *Server) Logout(ctx context.Context, session string) error {
	h := HashToken(session)
	s.sessions.drop(h)
	if err := s.store.DeleteSession(ctx, h[:]); err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	return nil
}

// sessionPrincipal returns who a console session acts as, or a 401 naming
// why it no longer does. fresh skips the session cache.
func (s *Server) sessionPrincipal(ctx context.Context, session string, fresh bool) (*Principal, error) {
	if !strings.HasPrefix(session, sessionPrefix) {
		return nil, unauthorized("not a console session")
	}
	h := HashToken(session)
	now := s.cfg.Now()
	if p := s.sessions.get(h, now); p != nil && !fresh {
		return p, nil
	}
	p, until, err := s.lookUpSession(ctx, session, h, now)
	if err != nil {
		var ae *apiError
		if errors.As(err, &ae) {
			s.sessions.drop(h) // ended elsewhere: a fresh check tells the cache
		}
		return nil, err
	}
	s.sessions.add(h, p, now, &until)
	return p, nil
}

// lookUpSession reads session (whose id hashes to h) and its token from
// the store: who it acts as at now, and until when at most.
func (s *Server) lookUpSession(ctx context.Context, session string, h [32]byte, now time.Time) (*Principal, time.Time, error) {
	se, err := s.store.SessionByHash(ctx, h[:])
	if errors.Is(err, store.ErrNotFound) {
		return nil, time.Time{}, unauthorized("the session ended (logged out, or its token was revoked): log in again")
	}
	if err != nil {
		return nil, time.Time{}, err
	}
	if !now.Before(se.ExpiresAt) {
		return nil, time.Time{}, unauthorized("the session expired at %s: log in again", se.ExpiresAt.UTC().Format(time.RFC3339))
	}
	until := se.ExpiresAt
	var p *Principal
	if strings.HasPrefix(se.TokenID, envBindingPrefix) {
		if s.cfg.APIToken == "" || !hmac.Equal([]byte(envBinding(session, s.cfg.APIToken)), []byte(se.TokenID)) {
			return nil, time.Time{}, unauthorized("the session's token (RUNE_API_TOKEN) changed: log in again")
		}
		p = envPrincipal
	} else {
		t, err := s.store.TokenByID(ctx, se.TokenID)
		if errors.Is(err, store.ErrNotFound) {
			return nil, time.Time{}, unauthorized("the session's token was revoked: log in again")
		}
		if err != nil {
			return nil, time.Time{}, err
		}
		if p, err = tokenPrincipal(t, now); err != nil {
			return nil, time.Time{}, err
		}
		if t.ExpiresAt != nil && t.ExpiresAt.Before(until) {
			until = *t.ExpiresAt
		}
	}
	return p, until, nil
}

// consoleAccess is what p may do in the web console: its role's rights and
// its workflow scope. The API refuses the rest anyway.
func consoleAccess(p *Principal) console.Access {
	return console.Access{Sees: p.Sees, Scoped: p.Scoped(), Operate: Allows(p.Role, PermOperate),
		Edit: Allows(p.Role, PermEdit), Replay: Allows(p.Role, PermReplay), Purge: Allows(p.Role, PermAdmin),
		// Issue 38's pages of credentials and tokens concern no single
		// workflow: a scoped token has neither.
		Credentials: Allows(p.Role, PermCredentials) && !p.Scoped(), Admin: Allows(p.Role, PermAdmin) && !p.Scoped()}
}
