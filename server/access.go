package server

import (
	"context"
	"encoding/json"
	"net/http"
	"path"
	"slices"

	"github.com/rune-org/rune/store"
)

// Perm is what a route does, for the roles check (docs/api.md, "Roles").
type Perm int

const (
	// PermRead reads: every role.
	PermRead Perm = iota
	// PermOperate starts and stops work (trigger, cancel, re-run): operator,
	// editor, admin.
	PermOperate
	// PermReplay replays dead letters: operator, admin.
	PermReplay
	// PermEdit changes workflows, hooks and schedules: editor, admin.
	PermEdit
	// PermCredentials writes credentials and lists their names (values are
	// never readable): editor, admin.
	PermCredentials
	// PermAdmin manages tokens and reads the audit log: admin.
	PermAdmin
)

// grants lists each role's permissions.
var grants = map[string][]Perm{
	store.RoleAdmin:    {PermRead, PermOperate, PermReplay, PermEdit, PermCredentials, PermAdmin},
	store.RoleEditor:   {PermRead, PermOperate, PermEdit, PermCredentials},
	store.RoleOperator: {PermRead, PermOperate, PermReplay},
	store.RoleViewer:   {PermRead},
}

// Allows reports whether role has permission p.
func Allows(role string, p Perm) bool { return slices.Contains(grants[role], p) }

// Scope says what a route's {id} names, for a token scoped to some workflows.
type Scope int

const (
	// ScopeFiltered routes answer for any scope: they filter what they show
	// (lists, the event stream) or check what they create themselves.
	ScopeFiltered Scope = iota
	// ScopeWorkflow routes act on the workflow {id}: 404 outside the scope.
	ScopeWorkflow
	// ScopeExecution routes act on the execution {id}: 404 when its
	// workflow is outside the scope.
	ScopeExecution
	// ScopeGlobal routes concern no workflow (credentials, tokens, audit,
	// metrics): a scoped token is refused them (403).
	ScopeGlobal
)

// Principal is who a request acts as: the token's name, role and scope.
type Principal struct {
	Name string
	Role string
	// Workflows are the token's scope patterns; empty: every workflow.
	Workflows []string
	// tokenID is the stored token's id ("" for RUNE_API_TOKEN): what a
	// console session is bound to.
	tokenID string
}

// Sees reports whether the principal may see workflow id.
func (p *Principal) Sees(workflowID string) bool {
	if len(p.Workflows) == 0 {
		return true
	}
	for _, g := range p.Workflows {
		// Patterns are checked at creation (store.CheckScope): no '/', no
		// '[', so path.Match is a plain glob and never errs.
		if ok, _ := path.Match(g, workflowID); ok {
			return true
		}
	}
	return false
}

// Scoped reports whether the principal sees only some workflows.
func (p *Principal) Scoped() bool { return len(p.Workflows) > 0 }

type principalKey struct{}

// withPrincipal records who a request acts as, and the credential it
// authenticated with (for the streams' re-checks).
func withPrincipal(ctx context.Context, p *Principal, c credential) context.Context {
	return context.WithValue(context.WithValue(ctx, principalKey{}, p), credentialKey{}, c)
}

// principalOf returns the request's principal: an unscoped admin when the
// request was not authenticated (open routes, internal calls).
func principalOf(ctx context.Context) *Principal {
	if p, ok := ctx.Value(principalKey{}).(*Principal); ok {
		return p
	}
	return &Principal{Role: store.RoleAdmin}
}

func forbidden(format string, args ...any) *apiError {
	return errorf(http.StatusForbidden, CodeForbidden, format, args...)
}

// authorize applies route rt's role and scope rules to a request by p: 404
// for what p cannot see, 403 for what it sees but may not do.
func (s *Server) authorize(r *http.Request, rt Route, p *Principal) error {
	if p.Scoped() {
		switch rt.Scope {
		case ScopeWorkflow:
			if id := r.PathValue("id"); !p.Sees(id) {
				return notFound("no workflow %q", id)
			}
		case ScopeExecution:
			id := r.PathValue("id")
			x, err := s.store.GetExecution(r.Context(), id)
			if err != nil || !p.Sees(x.WorkflowID) {
				return notFound("no execution %q", id)
			}
		case ScopeGlobal:
			return forbidden("token %q is scoped to workflows %v: %s %s concerns no single workflow", p.Name, p.Workflows, r.Method, rt.Path)
		}
	}
	if !Allows(p.Role, rt.Need) {
		return forbidden("token %q has role %s, which may not %s %s", p.Name, p.Role, r.Method, rt.Path)
	}
	return nil
}

// seesEvent reports whether p may see an event of the log: the workflow id
// its body names.
func (p *Principal) seesEvent(ev store.Event) bool {
	if !p.Scoped() {
		return true
	}
	var b struct {
		WorkflowID string `json:"workflow_id"`
	}
	if json.Unmarshal(ev.Body, &b) != nil {
		return false
	}
	return p.Sees(b.WorkflowID)
}

// scopedPages bounds how many store pages one list request of a scoped
// token reads looking for items it may see.
const scopedPages = 8

// scopedPage returns the next page of a list as p sees it: for a scoped
// token, the store's pages filtered to its workflows, reading on (up to
// scopedPages pages) while a page holds nothing it may see, so a page is
// never longer than the store's and its Next cursor stays the store's.
func scopedPage[T any](p *Principal, cursor string, fetch func(cursor string) (store.Page[T], error), workflowOf func(T) string) (store.Page[T], error) {
	for range scopedPages {
		page, err := fetch(cursor)
		if err != nil || !p.Scoped() {
			return page, err
		}
		page.Items = slices.DeleteFunc(page.Items, func(x T) bool { return !p.Sees(workflowOf(x)) })
		if len(page.Items) > 0 || page.Next == "" {
			return page, nil
		}
		cursor = page.Next
	}
	return store.Page[T]{Items: []T{}, Next: cursor}, nil
}
