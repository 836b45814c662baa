package server

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/rune-org/rune/store"
)

// tokenInput is the body of POST /v1/tokens.
type tokenInput struct {
	Name      string   `json:"name"`
	Role      string   `json:"role"`
	Workflows []string `json:"workflows"`
	// ExpiresIn is a number of days ("30d") or a Go duration ("12h").
	ExpiresIn string `json:"expires_in"`
}

// TokenView is a token as the API (and rune token list --json) shows it:
// never its hash; the token itself only in the answer that created it.
type TokenView struct {
	Name      string     `json:"name"`
	Prefix    string     `json:"prefix"`
	Role      string     `json:"role"`
	Workflows []string   `json:"workflows"`
	CreatedAt time.Time  `json:"created_at"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
	Token     string     `json:"token,omitempty"`
}

// ViewToken shows t.
func ViewToken(t *store.Token) TokenView {
	v := TokenView{Name: t.Name, Prefix: t.Prefix, Role: t.Role, Workflows: t.Workflows,
		CreatedAt: t.CreatedAt, ExpiresAt: t.ExpiresAt, RevokedAt: t.RevokedAt}
	if v.Workflows == nil {
		v.Workflows = []string{}
	}
	return v
}

// ParseLifetime reads a token's lifetime: a number of days ("30d") or a Go
// duration ("12h"), positive.
func ParseLifetime(v string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(v, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n <= 0 || n > 36500 {
			return 0, fmt.Errorf("%q: want a number of days such as 30d, or a duration such as 12h", v)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%q: want a number of days such as 30d, or a duration such as 12h", v)
	}
	return d, nil
}

// NewScopedToken is NewToken with a role, a workflow scope and an optional
// lifetime (0: never expires). Errors name the offending field.
func NewScopedToken(name, role string, workflows []string, lifetime time.Duration, now time.Time) (string, *store.Token, error) {
	if role == "" {
		role = store.RoleAdmin
	}
	if !Allows(role, PermRead) {
		return "", nil, fmt.Errorf("role %q: want one of %s", role, strings.Join(store.Roles, ", "))
	}
	for _, g := range workflows {
		if err := store.CheckScope(g); err != nil {
			return "", nil, fmt.Errorf("workflows: %w", err)
		}
	}
	tok, rec, err := NewToken(name, now)
	if err != nil {
		return "", nil, err
	}
	rec.Role, rec.Workflows = role, workflows
	if lifetime > 0 {
		exp := now.Add(lifetime)
		rec.ExpiresAt = &exp
	}
	return tok, rec, nil
}

// createToken makes a token (admin only) and shows it once.
func (s *Server) createToken(w http.ResponseWriter, r *http.Request) error {
	body, err := readBody(r, 16<<10)
	if err != nil {
		return err
	}
	var in tokenInput
	if err := decodeJSON(body, &in); err != nil {
		return err
	}
	if !credentialName.MatchString(in.Name) {
		return badRequest("field name: want 1–128 letters, digits, '_', '.' or '-', starting with a letter or digit")
	}
	var lifetime time.Duration
	if in.ExpiresIn != "" {
		if lifetime, err = ParseLifetime(in.ExpiresIn); err != nil {
			return badRequest("field expires_in: %v", err)
		}
	}
	tok, rec, err := NewScopedToken(in.Name, in.Role, in.Workflows, lifetime, s.cfg.Now())
	if err != nil {
		return badRequest("field %v", err)
	}
	err = s.store.CreateToken(r.Context(), rec)
	if errors.Is(err, store.ErrConflict) {
		return errorf(http.StatusConflict, CodeConflict, "a token named %q exists", in.Name)
	}
	if err != nil {
		return err
	}
	v := ViewToken(rec)
	v.Token = tok
	writeCreated(w, "/v1/tokens/"+url.PathEscape(rec.Name), v)
	return nil
}

func (s *Server) listTokens(w http.ResponseWriter, r *http.Request) error {
	ts, err := s.store.ListTokens(r.Context())
	if err != nil {
		return err
	}
	writeList(w, ts, "", ViewToken)
	return nil
}

func (s *Server) revokeToken(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	err := s.store.RevokeToken(r.Context(), name, s.cfg.Now())
	if errors.Is(err, store.ErrNotFound) {
		return notFound("token %q does not exist", name)
	}
	if err != nil {
		return err
	}
	s.tokens.forget()
	s.sessions.forget()
	w.WriteHeader(http.StatusNoContent)
	return nil
}
