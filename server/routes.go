package server

import (
	"net/http"
	"net/url"
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
	Stream  bool
	handler func(w http.ResponseWriter, r *http.Request) error
}

// Routes lists the API's endpoints.
func (s *Server) Routes() []Route { return s.routes() }

func (s *Server) routes() []Route {
	return []Route{
		{Method: "GET", Path: "/healthz", Open: true, handler: s.healthz},
		{Method: "GET", Path: "/v1/openapi.json", Open: true, handler: s.openapi},
		{Method: "GET", Path: "/readyz", Open: true, handler: s.readyz},
		{Method: "GET", Path: "/metrics", handler: s.serveMetrics},

		{Method: "POST", Path: "/v1/workflows", handler: s.createWorkflow},
		{Method: "GET", Path: "/v1/workflows", handler: s.listWorkflows},
		{Method: "GET", Path: "/v1/workflows/{id}", handler: s.getWorkflow},
		{Method: "PUT", Path: "/v1/workflows/{id}", handler: s.updateWorkflow},
		{Method: "DELETE", Path: "/v1/workflows/{id}", handler: s.deleteWorkflow},
		{Method: "GET", Path: "/v1/workflows/{id}/versions", handler: s.listVersions},
		{Method: "POST", Path: "/v1/workflows/{id}/executions", handler: s.triggerExecution},

		{Method: "GET", Path: "/v1/executions", handler: s.listExecutions},
		{Method: "GET", Path: "/v1/executions/{id}", handler: s.getExecution},
		{Method: "POST", Path: "/v1/executions/{id}/cancel", handler: s.cancelExecution},
		{Method: "POST", Path: "/v1/executions/{id}/rerun", handler: s.rerunExecution},
		{Method: "GET", Path: "/v1/executions/{id}/events", Stream: true, handler: s.executionEvents},
		{Method: "GET", Path: "/v1/events", Stream: true, handler: s.allEvents},

		{Method: "POST", Path: "/v1/workflows/{id}/hooks", handler: s.createHook},
		{Method: "GET", Path: "/v1/workflows/{id}/hooks", handler: s.listHooks},
		{Method: "GET", Path: "/v1/workflows/{id}/hooks/{hook}", handler: s.getHook},
		{Method: "PUT", Path: "/v1/workflows/{id}/hooks/{hook}", handler: s.updateHook},
		{Method: "DELETE", Path: "/v1/workflows/{id}/hooks/{hook}", handler: s.deleteHook},
		{Method: "POST", Path: "/v1/workflows/{id}/hooks/{hook}/rotate", handler: s.rotateHook},
		{Method: "POST", Path: "/v1/hooks/{secret}", Open: true, handler: s.receiveHook},

		{Method: "POST", Path: "/v1/workflows/{id}/schedules", handler: s.createSchedule},
		{Method: "GET", Path: "/v1/workflows/{id}/schedules", handler: s.listSchedules},
		{Method: "GET", Path: "/v1/workflows/{id}/schedules/{schedule}", handler: s.getSchedule},
		{Method: "PUT", Path: "/v1/workflows/{id}/schedules/{schedule}", handler: s.updateSchedule},
		{Method: "DELETE", Path: "/v1/workflows/{id}/schedules/{schedule}", handler: s.deleteSchedule},
		{Method: "POST", Path: "/v1/workflows/{id}/schedules/{schedule}/pause", handler: s.pauseSchedule},
		{Method: "POST", Path: "/v1/workflows/{id}/schedules/{schedule}/resume", handler: s.resumeSchedule},

		{Method: "POST", Path: "/v1/credentials", handler: s.putCredential},
		{Method: "GET", Path: "/v1/credentials", handler: s.listCredentials},
		{Method: "DELETE", Path: "/v1/credentials/{name}", handler: s.deleteCredential},
	}
}

// endpoint wraps a route's handler: authentication, the body limit, and
// errors written as the API's error body.
func (s *Server) endpoint(rt Route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !rt.Open {
			if err := s.authenticate(r); err != nil {
				s.writeError(w, r, err)
				return
			}
		}
		if r.Body != nil {
			r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxBody)
		}
		if err := rt.handler(w, r); err != nil {
			s.writeError(w, r, err)
		}
	})
}

// noRoute answers a request no route matches: 405 when the path exists
// with another method, else 404; always the API's error body.
func (s *Server) noRoute(w http.ResponseWriter, r *http.Request) {
	for _, m := range []string{"GET", "POST", "PUT", "DELETE"} {
		if m == r.Method {
			continue
		}
		probe := &http.Request{Method: m, URL: &url.URL{Path: r.URL.Path}, Host: r.Host}
		if _, pattern := s.mux.Handler(probe); pattern != "/" && pattern != "" {
			s.writeError(w, r, errorf(http.StatusMethodNotAllowed, CodeMethodNotAllowed, "%s is not allowed on %s", r.Method, r.URL.Path))
			return
		}
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
