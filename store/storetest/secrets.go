package storetest

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/rune-org/rune/store"
)

// Credentials: ciphertext in, ciphertext out, never in a list.
func testCredentials(ctx context.Context, t *testing.T, h *harness) {
	secret := []byte("nonce+ciphertext-of-smtp-password")
	if err := h.s.PutCredential(ctx, &store.Credential{Name: "smtp", Type: "smtp", KeyID: "k1", Ciphertext: secret, UpdatedAt: at(1)}); err != nil {
		t.Fatal(err)
	}
	if err := h.s.PutCredential(ctx, &store.Credential{Name: "api", Type: "bearer", KeyID: "k1", Ciphertext: []byte("c2"), UpdatedAt: at(1)}); err != nil {
		t.Fatal(err)
	}
	c, err := h.s.GetCredential(ctx, "smtp")
	if err != nil || !bytes.Equal(c.Ciphertext, secret) || c.Type != "smtp" || c.KeyID != "k1" || !c.CreatedAt.Equal(at(1)) {
		t.Fatalf("GetCredential = %+v, %v", c, err)
	}
	// Replacing (a rotated key) keeps the creation time.
	rotated := []byte("re-encrypted")
	if err := h.s.PutCredential(ctx, &store.Credential{Name: "smtp", Type: "smtp", KeyID: "k2", Ciphertext: rotated, UpdatedAt: at(2)}); err != nil {
		t.Fatal(err)
	}
	c, err = h.s.GetCredential(ctx, "smtp")
	if err != nil || !bytes.Equal(c.Ciphertext, rotated) || c.KeyID != "k2" || !c.CreatedAt.Equal(at(1)) || !c.UpdatedAt.Equal(at(2)) {
		t.Fatalf("after replace: %+v, %v", c, err)
	}
	list, err := h.s.ListCredentials(ctx)
	if err != nil || !slices.Equal(ids(list, func(c *store.Credential) string { return c.Name }), []string{"api", "smtp"}) {
		t.Fatalf("ListCredentials = %v, %v", list, err)
	}
	for _, c := range list {
		if c.Ciphertext != nil || c.Type == "" || c.KeyID == "" {
			t.Errorf("listed %s with ciphertext %q (type %q, key %q)", c.Name, c.Ciphertext, c.Type, c.KeyID)
		}
	}
	if err := h.s.DeleteCredential(ctx, "smtp"); err != nil {
		t.Fatal(err)
	}
	_, err = h.s.GetCredential(ctx, "smtp")
	wantErr(t, "GetCredential(deleted)", err, store.ErrNotFound, "smtp")
	wantErr(t, "DeleteCredential(deleted)", h.s.DeleteCredential(ctx, "smtp"), store.ErrNotFound, "smtp")
	wantErr(t, "PutCredential(no name)", h.s.PutCredential(ctx, &store.Credential{KeyID: "k", Ciphertext: []byte("x")}), store.ErrInvalid, "name")
	wantErr(t, "PutCredential(no ciphertext)", h.s.PutCredential(ctx, &store.Credential{Name: "n", KeyID: "k"}), store.ErrInvalid, "ciphertext")
	wantErr(t, "PutCredential(no key id)", h.s.PutCredential(ctx, &store.Credential{Name: "n", Ciphertext: []byte("x")}), store.ErrInvalid, "key id")
}

// Tokens: found by hash until revoked; listed without hashes.
func testTokens(ctx context.Context, t *testing.T, h *harness) {
	h1, h2 := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	if err := h.s.CreateToken(ctx, &store.Token{Name: "ci", Prefix: "rune_ab", Hash: h1, CreatedAt: at(1)}); err != nil {
		t.Fatal(err)
	}
	if err := h.s.CreateToken(ctx, &store.Token{Name: "admin", Prefix: "rune_cd", Hash: h2, CreatedAt: at(1)}); err != nil {
		t.Fatal(err)
	}
	tok, err := h.s.TokenByHash(ctx, h1)
	if err != nil || tok.Name != "ci" || tok.Prefix != "rune_ab" || tok.ID == "" || tok.RevokedAt != nil || !tok.CreatedAt.Equal(at(1)) {
		t.Fatalf("TokenByHash = %+v, %v", tok, err)
	}
	wantErr(t, "CreateToken(same name)", h.s.CreateToken(ctx, &store.Token{Name: "ci", Hash: bytes.Repeat([]byte{3}, 32)}), store.ErrConflict, "ci")
	wantErr(t, "CreateToken(no hash)", h.s.CreateToken(ctx, &store.Token{Name: "x"}), store.ErrInvalid, "hash")
	if err := h.s.RevokeToken(ctx, "ci", at(2)); err != nil {
		t.Fatal(err)
	}
	_, err = h.s.TokenByHash(ctx, h1)
	wantErr(t, "TokenByHash(revoked)", err, store.ErrNotFound, "")
	_, err = h.s.TokenByHash(ctx, bytes.Repeat([]byte{9}, 32))
	wantErr(t, "TokenByHash(unknown)", err, store.ErrNotFound, "")
	if err := h.s.RevokeToken(ctx, "ci", at(3)); err != nil {
		t.Errorf("RevokeToken twice: %v", err)
	}
	wantErr(t, "RevokeToken(unknown)", h.s.RevokeToken(ctx, "nope", at(2)), store.ErrNotFound, "nope")
	list, err := h.s.ListTokens(ctx)
	if err != nil || len(list) != 2 || list[0].Name != "admin" || list[1].Name != "ci" {
		t.Fatalf("ListTokens = %+v, %v", list, err)
	}
	for _, tok := range list {
		if tok.Hash != nil {
			t.Errorf("listed %s with its hash", tok.Name)
		}
	}
	if !equalTimePtr(list[1].RevokedAt, at(2)) || list[0].RevokedAt != nil {
		t.Errorf("revocation times: %v, %v", list[0].RevokedAt, list[1].RevokedAt)
	}
	if list[0].Role != store.RoleAdmin || list[1].Role != store.RoleAdmin {
		t.Errorf("roles of tokens made without one: %q, %q, want admin", list[0].Role, list[1].Role)
	}
	testTokenRoles(ctx, t, h)
}

// Token roles, scopes and expiry are stored and read back; bad ones refused.
func testTokenRoles(ctx context.Context, t *testing.T, h *harness) {
	h3 := bytes.Repeat([]byte{4}, 32)
	exp := at(5)
	in := &store.Token{Name: "billing-ops", Prefix: "rune_ef", Hash: h3, Role: store.RoleOperator,
		Workflows: []string{"billing-*", "invoice?"}, ExpiresAt: &exp, CreatedAt: at(1)}
	if err := h.s.CreateToken(ctx, in); err != nil {
		t.Fatal(err)
	}
	tok, err := h.s.TokenByHash(ctx, h3)
	if err != nil || tok.Role != store.RoleOperator || !slices.Equal(tok.Workflows, []string{"billing-*", "invoice?"}) || !equalTimePtr(tok.ExpiresAt, exp) {
		t.Fatalf("TokenByHash(scoped operator) = %+v, %v", tok, err)
	}
	wantErr(t, "CreateToken(bad role)", h.s.CreateToken(ctx, &store.Token{Name: "r", Hash: bytes.Repeat([]byte{5}, 32), Role: "root"}), store.ErrInvalid, "root")
	wantErr(t, "CreateToken(bad scope)", h.s.CreateToken(ctx, &store.Token{Name: "s", Hash: bytes.Repeat([]byte{6}, 32), Workflows: []string{"a,b"}}), store.ErrInvalid, "a,b")
}

// Audit: entries listed newest first in pages, their objects kept, pruned
// by age oldest first.
func testAudit(ctx context.Context, t *testing.T, h *harness) {
	for i := range 3 {
		e := &store.AuditEntry{At: at(float64(i + 1)), Actor: "ci", Role: store.RoleEditor, Method: "PUT",
			Route: "/v1/workflows/{id}", Objects: map[string]string{"id": fmt.Sprint("wf", i)}, Status: 200}
		if err := h.s.AppendAudit(ctx, e); err != nil || e.ID == 0 {
			t.Fatalf("AppendAudit = %v, id %d", err, e.ID)
		}
	}
	wantErr(t, "AppendAudit(no route)", h.s.AppendAudit(ctx, &store.AuditEntry{Method: "PUT", Status: 200}), store.ErrInvalid, "route")
	p1, err := h.s.ListAudit(ctx, store.AuditFilter{Limit: 2})
	if err != nil || len(p1.Items) != 2 || p1.Next == "" || p1.Items[0].Objects["id"] != "wf2" || p1.Items[1].Objects["id"] != "wf1" {
		t.Fatalf("ListAudit(limit 2) = %+v, %v", p1, err)
	}
	if e := p1.Items[0]; e.Actor != "ci" || e.Role != store.RoleEditor || e.Method != "PUT" || e.Route != "/v1/workflows/{id}" || e.Status != 200 || !e.At.Equal(at(3)) {
		t.Errorf("audit entry read back as %+v", e)
	}
	p2, err := h.s.ListAudit(ctx, store.AuditFilter{Limit: 2, Cursor: p1.Next})
	if err != nil || len(p2.Items) != 1 || p2.Next != "" || p2.Items[0].Objects["id"] != "wf0" {
		t.Fatalf("ListAudit(page 2) = %+v, %v", p2, err)
	}
	_, err = h.s.ListAudit(ctx, store.AuditFilter{Cursor: "x"})
	wantErr(t, "ListAudit(bad cursor)", err, store.ErrInvalid, "cursor")
	if n, err := h.s.PruneAudit(ctx, at(3), 10); err != nil || n != 2 {
		t.Fatalf("PruneAudit(before the third) = %d, %v, want 2", n, err)
	}
	p, err := h.s.ListAudit(ctx, store.AuditFilter{})
	if err != nil || len(p.Items) != 1 || p.Items[0].Objects["id"] != "wf2" {
		t.Fatalf("after pruning: %+v, %v", p, err)
	}
}

// Sessions: found by hash until deleted, pruned once expired, or ended
// with their token's revocation; TokenByID finds tokens not revoked.
func testSessions(ctx context.Context, t *testing.T, h *harness) {
	tok := &store.Token{Name: "console", Prefix: "rune_se", Hash: bytes.Repeat([]byte{7}, 32), CreatedAt: at(1)}
	if err := h.s.CreateToken(ctx, tok); err != nil {
		t.Fatal(err)
	}
	if got, err := h.s.TokenByID(ctx, tok.ID); err != nil || got.Name != "console" || got.Role != store.RoleAdmin {
		t.Fatalf("TokenByID = %+v, %v", got, err)
	}
	_, err := h.s.TokenByID(ctx, "tok_none")
	wantErr(t, "TokenByID(unknown)", err, store.ErrNotFound, "tok_none")
	s1, s2, s3 := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32), bytes.Repeat([]byte{3}, 32)
	for _, s := range []*store.Session{
		{Hash: s1, TokenID: tok.ID, CreatedAt: at(1), ExpiresAt: at(10)},
		{Hash: s2, TokenID: tok.ID, CreatedAt: at(1), ExpiresAt: at(2)},
		{Hash: s3, TokenID: "env:x", CreatedAt: at(1), ExpiresAt: at(10)},
	} {
		if err := h.s.CreateSession(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	got, err := h.s.SessionByHash(ctx, s1)
	if err != nil || got.TokenID != tok.ID || !got.CreatedAt.Equal(at(1)) || !got.ExpiresAt.Equal(at(10)) || !bytes.Equal(got.Hash, s1) {
		t.Fatalf("SessionByHash = %+v, %v", got, err)
	}
	wantErr(t, "CreateSession(same hash)", h.s.CreateSession(ctx, &store.Session{Hash: s1, TokenID: tok.ID, CreatedAt: at(1), ExpiresAt: at(10)}), store.ErrConflict, "")
	wantErr(t, "CreateSession(no token)", h.s.CreateSession(ctx, &store.Session{Hash: s3, CreatedAt: at(1), ExpiresAt: at(10)}), store.ErrInvalid, "token")
	wantErr(t, "CreateSession(expired)", h.s.CreateSession(ctx, &store.Session{Hash: bytes.Repeat([]byte{4}, 32), TokenID: tok.ID, CreatedAt: at(2), ExpiresAt: at(1)}), store.ErrInvalid, "expires")
	// Pruning takes the expired session only.
	if n, err := h.s.PruneSessions(ctx, at(3)); err != nil || n != 1 {
		t.Fatalf("PruneSessions(at 3) = %d, %v, want 1", n, err)
	}
	_, err = h.s.SessionByHash(ctx, s2)
	wantErr(t, "SessionByHash(pruned)", err, store.ErrNotFound, "")
	// Logout deletes one session.
	if err := h.s.DeleteSession(ctx, s3); err != nil {
		t.Fatal(err)
	}
	_, err = h.s.SessionByHash(ctx, s3)
	wantErr(t, "SessionByHash(deleted)", err, store.ErrNotFound, "")
	wantErr(t, "DeleteSession(deleted)", h.s.DeleteSession(ctx, s3), store.ErrNotFound, "")
	// Revoking the token ends its sessions.
	if err := h.s.RevokeToken(ctx, "console", at(4)); err != nil {
		t.Fatal(err)
	}
	_, err = h.s.SessionByHash(ctx, s1)
	wantErr(t, "SessionByHash(token revoked)", err, store.ErrNotFound, "")
	_, err = h.s.TokenByID(ctx, tok.ID)
	wantErr(t, "TokenByID(revoked)", err, store.ErrNotFound, "")
}
