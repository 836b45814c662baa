package server

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// Route is one endpoint of the API. Every route is in the table routes
// returns, so tests and the OpenAPI check walk the real set.
type Route struct {
	Method string
	// Path is a net/http ServeMux pattern path ("/v1/executions/{id}").
	Path string
	// Open routes need no bearer token.
	Open bool
	// Stream routes write Server-Sent Events; no write timeout applies.
	Stream bool
	// Need is the permission a token's role must grant (docs/api.md, "Roles").
	Need Perm
	// Scope says how the route meets a token scoped to some workflows.
	Scope Scope
	// Query lists the query parameters the route reads: any other is
	// refused (400 naming it), so a misspelt filter is not silently
	// ignored. AnyQuery routes take every parameter (a webhook's go into
	// its payload).
	Query    []string
	AnyQuery bool
	handler  func(w http.ResponseWriter, r *http.Request) error
	// QueryPrefixes are families of query parameters the route also reads
	// ("input." of the executions list: input.user_id=42).
	QueryPrefixes []string
}

// Query parameters several routes share.
var (
	pageQuery    = []string{"limit", "cursor"}
	versionQuery = []string{"version"}
	streamQuery  = []string{"last_event_id"}
)

// Routes lists the API's endpoints.
func (s *Server) Routes() []Route { return s.routes() }

func (s *Server) routes() []Route {
	return []Route{
		{Method: "GET", Path: "/healthz", Open: true, handler: s.healthz},
		{Method: "GET", Path: "/v1/openapi.json", Open: true, handler: s.openapi},
		{Method: "GET", Path: "/readyz", Open: true, handler: s.readyz},
		{Method: "GET", Path: "/metrics", Need: PermRead, Scope: ScopeGlobal, handler: s.serveMetrics},

		{Method: "POST", Path: "/v1/workflows", Need: PermEdit, Scope: ScopeFiltered, handler: s.createWorkflow},
		{Method: "GET", Path: "/v1/workflows", Need: PermRead, Scope: ScopeFiltered, Query: pageQuery, handler: s.listWorkflows},
		{Method: "GET", Path: "/v1/workflows/{id}", Need: PermRead, Scope: ScopeWorkflow, Query: versionQuery, handler: s.getWorkflow},
		{Method: "PUT", Path: "/v1/workflows/{id}", Need: PermEdit, Scope: ScopeWorkflow, handler: s.updateWorkflow},
		{Method: "DELETE", Path: "/v1/workflows/{id}", Need: PermEdit, Scope: ScopeWorkflow, handler: s.deleteWorkflow},
		{Method: "GET", Path: "/v1/workflows/{id}/versions", Need: PermRead, Scope: ScopeWorkflow, Query: pageQuery, handler: s.listVersions},
		{Method: "GET", Path: "/v1/workflows/{id}/versions/{version}", Need: PermRead, Scope: ScopeWorkflow, handler: s.getVersion},
		{Method: "POST", Path: "/v1/workflows/{id}/executions", Need: PermOperate, Scope: ScopeWorkflow, Query: []string{"version", "start_at", "priority"}, handler: s.triggerExecution},

		{Method: "GET", Path: "/v1/executions", Need: PermRead, Scope: ScopeFiltered, Query: []string{"workflow_id", "status", "idempotency_key", "limit", "cursor", "created_after", "created_before", "trigger", "parent"}, QueryPrefixes: []string{"input."}, handler: s.listExecutions},
		{Method: "GET", Path: "/v1/executions/{id}", Need: PermRead, Scope: ScopeExecution, handler: s.getExecution},
		{Method: "POST", Path: "/v1/executions/{id}/cancel", Need: PermOperate, Scope: ScopeExecution, handler: s.cancelExecution},
		{Method: "POST", Path: "/v1/executions/{id}/rerun", Need: PermOperate, Scope: ScopeExecution, handler: s.rerunExecution},
		{Method: "GET", Path: "/v1/executions/{id}/events", Need: PermRead, Scope: ScopeExecution, Stream: true, Query: streamQuery, handler: s.executionEvents},
		// issue 34: an execution's child executions (api_children.go)
		{Method: "GET", Path: "/v1/executions/{id}/children", Need: PermRead, Scope: ScopeExecution, Query: []string{"limit"}, handler: s.getChildren},
		{Method: "GET", Path: "/v1/events", Need: PermRead, Scope: ScopeFiltered, Stream: true, Query: []string{"last_event_id", "from"}, handler: s.allEvents},

		{Method: "POST", Path: "/v1/workflows/{id}/hooks", Need: PermEdit, Scope: ScopeWorkflow, handler: s.createHook},
		{Method: "GET", Path: "/v1/workflows/{id}/hooks", Need: PermRead, Scope: ScopeWorkflow, handler: s.listHooks},
		{Method: "GET", Path: "/v1/workflows/{id}/hooks/{hook}", Need: PermRead, Scope: ScopeWorkflow, handler: s.getHook},
		{Method: "PUT", Path: "/v1/workflows/{id}/hooks/{hook}", Need: PermEdit, Scope: ScopeWorkflow, handler: s.updateHook},
		{Method: "DELETE", Path: "/v1/workflows/{id}/hooks/{hook}", Need: PermEdit, Scope: ScopeWorkflow, handler: s.deleteHook},
		{Method: "POST", Path: "/v1/workflows/{id}/hooks/{hook}/rotate", Need: PermEdit, Scope: ScopeWorkflow, Query: []string{"signing_secret"}, handler: s.rotateHook},
		{Method: "POST", Path: "/v1/hooks/{secret}", Open: true, AnyQuery: true, handler: s.receiveHook},
		// issue 38: a hook's last deliveries and their answers (hook_deliveries.go)
		{Method: "GET", Path: "/v1/workflows/{id}/hooks/{hook}/deliveries", Need: PermRead, Scope: ScopeWorkflow, Query: []string{"limit"}, handler: s.listHookDeliveries},

		{Method: "POST", Path: "/v1/workflows/{id}/schedules", Need: PermEdit, Scope: ScopeWorkflow, handler: s.createSchedule},
		{Method: "GET", Path: "/v1/workflows/{id}/schedules", Need: PermRead, Scope: ScopeWorkflow, handler: s.listSchedules},
		{Method: "GET", Path: "/v1/workflows/{id}/schedules/{schedule}", Need: PermRead, Scope: ScopeWorkflow, handler: s.getSchedule},
		{Method: "PUT", Path: "/v1/workflows/{id}/schedules/{schedule}", Need: PermEdit, Scope: ScopeWorkflow, handler: s.updateSchedule},
		{Method: "DELETE", Path: "/v1/workflows/{id}/schedules/{schedule}", Need: PermEdit, Scope: ScopeWorkflow, handler: s.deleteSchedule},
		{Method: "POST", Path: "/v1/workflows/{id}/schedules/{schedule}/pause", Need: PermEdit, Scope: ScopeWorkflow, handler: s.pauseSchedule},
		{Method: "POST", Path: "/v1/workflows/{id}/schedules/{schedule}/resume", Need: PermEdit, Scope: ScopeWorkflow, handler: s.resumeSchedule},

		{Method: "POST", Path: "/v1/credentials", Need: PermCredentials, Scope: ScopeGlobal, handler: s.putCredential},
		{Method: "GET", Path: "/v1/credentials", Need: PermCredentials, Scope: ScopeGlobal, handler: s.listCredentials},
		{Method: "POST", Path: "/v1/tokens", Need: PermAdmin, Scope: ScopeGlobal, handler: s.createToken},
		{Method: "GET", Path: "/v1/tokens", Need: PermAdmin, Scope: ScopeGlobal, handler: s.listTokens},
		{Method: "DELETE", Path: "/v1/tokens/{name}", Need: PermAdmin, Scope: ScopeGlobal, handler: s.revokeToken},
		{Method: "GET", Path: "/v1/audit", Need: PermAdmin, Scope: ScopeGlobal, Query: pageQuery, handler: s.listAudit},

		{Method: "DELETE", Path: "/v1/credentials/{name}", Need: PermCredentials, Scope: ScopeGlobal, handler: s.deleteCredential},

		// Notifications (issue 36): delivery status.
		{Method: "POST", Path: "/v1/providers/{credential}/status", Open: true, handler: s.providerStatus},
		{Method: "GET", Path: "/v1/executions/{id}/sends", Need: PermRead, Scope: ScopeExecution, handler: s.listSends},
		// Notifications (issue 36): subscribers, preferences, one-click unsubscribe (subscribers.go).
		{Method: "PUT", Path: "/v1/subscribers/{id}", Need: PermEdit, Scope: ScopeGlobal, handler: s.putSubscriber},
		{Method: "GET", Path: "/v1/subscribers/{id}", Need: PermRead, Scope: ScopeGlobal, handler: s.getSubscriber},
		{Method: "DELETE", Path: "/v1/subscribers/{id}", Need: PermEdit, Scope: ScopeGlobal, handler: s.deleteSubscriber},
		{Method: "POST", Path: "/v1/subscribers/import", Need: PermEdit, Scope: ScopeGlobal, handler: s.importSubscribers},
		{Method: "GET", Path: "/v1/subscribers/{id}/preferences", Need: PermRead, Scope: ScopeGlobal, handler: s.getPreferences},
		{Method: "PUT", Path: "/v1/subscribers/{id}/preferences", Need: PermEdit, Scope: ScopeGlobal, handler: s.putPreferences},
		{Method: "GET", Path: "/v1/unsubscribe/{token}", Open: true, handler: s.unsubscribeForm},
		{Method: "POST", Path: "/v1/unsubscribe/{token}", Open: true, handler: s.unsubscribe},
		// Issue 38: a cron's next fire times, before a schedule is made.
		{Method: "GET", Path: "/v1/schedules/preview", Need: PermRead, Scope: ScopeFiltered, Query: []string{"cron", "timezone"}, handler: s.previewSchedule},
		// Pause and resume (issue 34, pause.go).
		{Method: "GET", Path: "/v1/workflows/{id}/pause", Need: PermRead, Scope: ScopeWorkflow, handler: s.getWorkflowPause},
		{Method: "POST", Path: "/v1/workflows/{id}/pause", Need: PermOperate, Scope: ScopeWorkflow, handler: s.pauseWorkflow},
		{Method: "POST", Path: "/v1/workflows/{id}/resume", Need: PermOperate, Scope: ScopeWorkflow, handler: s.resumeWorkflow},

		// issue 34: events for wait_for_event nodes, and approvals
		{Method: "POST", Path: "/v1/events", Need: PermOperate, Scope: ScopeGlobal, handler: s.sendEvent},
		{Method: "GET", Path: "/v1/approvals", Need: PermRead, Scope: ScopeFiltered, handler: s.listApprovals},
		{Method: "POST", Path: "/v1/executions/{id}/approvals/{node}", Need: PermOperate, Scope: ScopeExecution, handler: s.decideApproval},
		// Execution pause and resume (issue 34, pause_execution.go).
		{Method: "POST", Path: "/v1/executions/{id}/pause", Need: PermOperate, Scope: ScopeExecution, handler: s.pauseExecution},
		{Method: "POST", Path: "/v1/executions/{id}/resume", Need: PermOperate, Scope: ScopeExecution, handler: s.resumeExecution},
		// Message templates (issue 36, templates.go).
		{Method: "GET", Path: "/v1/templates", Need: PermRead, Scope: ScopeGlobal, handler: s.listTemplates},
		{Method: "GET", Path: "/v1/templates/{name}", Need: PermRead, Scope: ScopeGlobal, handler: s.getTemplate},
		{Method: "PUT", Path: "/v1/templates/{name}", Need: PermEdit, Scope: ScopeGlobal, handler: s.putTemplate},
		{Method: "DELETE", Path: "/v1/templates/{name}", Need: PermEdit, Scope: ScopeGlobal, handler: s.deleteTemplate},
		{Method: "GET", Path: "/v1/templates/{name}/versions", Need: PermRead, Scope: ScopeGlobal, handler: s.listTemplateVersions},
		{Method: "GET", Path: "/v1/templates/{name}/versions/{version}", Need: PermRead, Scope: ScopeGlobal, handler: s.getTemplateVersion},
		{Method: "POST", Path: "/v1/templates/{name}/preview", Need: PermRead, Scope: ScopeGlobal, handler: s.previewTemplate},
	}
}

// endpoint wraps a route's handler: authentication, the role and scope
// checks, the audit of state changes, the body limit, and
// errors written as the API's error body.
func (s *Server) endpoint(rt Route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !rt.Open {
			p, cred, err := s.authenticate(r)
			if err != nil {
				s.writeError(w, r, err)
				return
			}
			// Every state-changing request of a known token is audited,
			// refused ones too.
			if r.Method != http.MethodGet && r.Method != http.MethodHead {
				rec := &statusRecorder{ResponseWriter: w}
				defer func() { s.audit(r, rt, p, rec.status()) }()
				w = rec
			}
			if err := s.authorize(r, rt, p); err != nil {
				s.writeError(w, r, err)
				return
			}
			r = r.WithContext(withPrincipal(r.Context(), p, cred))
		}
		if err := rt.checkQuery(r); err != nil {
			s.writeError(w, r, err)
			return
		}
		if r.Body != nil {
			r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxBody)
		}
		if err := rt.handler(w, r); err != nil {
			s.writeError(w, r, err)
		}
	})
}

// checkQuery refuses query parameters the route does not read, naming
// them and the ones it does.
func (rt *Route) checkQuery(r *http.Request) error {
	if rt.AnyQuery || r.URL.RawQuery == "" {
		return nil
	}
	var unknown []string
	for name := range r.URL.Query() {
		if !slices.Contains(rt.Query, name) && !rt.hasQueryPrefix(name) {
			unknown = append(unknown, name)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	slices.Sort(unknown)
	known := "it takes none"
	if len(rt.Query) > 0 {
		known = "it takes " + strings.Join(rt.Query, ", ")
	}
	for _, p := range rt.QueryPrefixes {
		known += ", " + p + "…"
	}
	return badRequest("unknown query parameter %s on %s %s (%s)", strings.Join(unknown, ", "), rt.Method, rt.Path, known)
}

// noRoute answers a request no route matches: 405 with Allow when the path
// exists with other methods, else 404; always the API's problem details.
func (s *Server) noRoute(w http.ResponseWriter, r *http.Request) {
	var allow []string
	for _, m := range []string{"GET", "POST", "PUT", "DELETE"} {
		if m == r.Method {
			continue
		}
		probe := &http.Request{Method: m, URL: &url.URL{Path: r.URL.Path}, Host: r.Host}
		if _, pattern := s.mux.Handler(probe); pattern != "/" && pattern != "" {
			allow = append(allow, m)
		}
	}
	if len(allow) > 0 {
		w.Header().Set("Allow", strings.Join(allow, ", "))
		s.writeError(w, r, errorf(http.StatusMethodNotAllowed, CodeMethodNotAllowed, "%s is not allowed on %s (allowed: %s)", r.Method, r.URL.Path, strings.Join(allow, ", ")))
		return
	}
	s.writeError(w, r, notFound("no endpoint %s %s (see /v1/openapi.json)", r.Method, r.URL.Path))
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	return nil
}

// Endpoints lists the API's routes without a server: for tests, the
// OpenAPI check and documentation.
func Endpoints() []Route { return (&Server{}).routes() }
