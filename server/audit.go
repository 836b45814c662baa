package server

import (
	"context"
	"net/http"
	"regexp"
	"strconv"
	"time"

	"github.com/rune-org/rune/apiv1"
	"github.com/rune-org/rune/store"
)

// statusRecorder remembers the status a handler answered with.
type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (r *statusRecorder) status() int {
	if r.code == 0 {
		return http.StatusOK
	}
	return r.code
}

// pathValues are the names of path values a route may have; the audit
// records each one the route has. None of them is a secret (a hook's URL
// secret is on an open route, which is not audited).
var pathValues = regexp.MustCompile(`\{([a-z]+)\}`)

// audit records a state-changing request by p: who, what, when, outcome.
// A failure to record is logged, never the request's failure: the request
// already happened.
func (s *Server) audit(r *http.Request, rt Route, p *Principal, status int) {
	objects := map[string]string{}
	for _, m := range pathValues.FindAllStringSubmatch(rt.Path, -1) {
		objects[m[1]] = r.PathValue(m[1])
	}
	e := &store.AuditEntry{At: s.cfg.Now(), Actor: p.Name, Role: p.Role, Method: r.Method, Route: rt.Path, Objects: objects, Status: status}
	// The request's own context may be ending (the client left): the
	// record is kept all the same.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 10*time.Second)
	defer cancel()
	if err := s.store.AppendAudit(ctx, e); err != nil {
		s.log.Error("audit: record failed", "method", r.Method, "route", rt.Path, "actor", p.Name, "err", err)
	}
}

func viewAudit(e *store.AuditEntry) apiv1.AuditEntry {
	return apiv1.AuditEntry{ID: strconv.FormatInt(e.ID, 10), At: e.At, Actor: e.Actor, Role: e.Role, Method: e.Method,
		Route: e.Route, Objects: e.Objects, Status: e.Status}
}

// listAudit shows the audit log, newest first (admin only).
func (s *Server) listAudit(w http.ResponseWriter, r *http.Request) error {
	limit, err := queryInt(r, "limit", 1, 500)
	if err != nil {
		return err
	}
	page, err := s.store.ListAudit(r.Context(), store.AuditFilter{Limit: limit, Cursor: r.URL.Query().Get("cursor")})
	if err != nil {
		return storeInput(err, "cursor")
	}
	writeList(w, page.Items, page.Next, viewAudit)
	return nil
}
