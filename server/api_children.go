package server

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/rune-org/rune/apiv1"
	"github.com/rune-org/rune/engine"
	"github.com/rune-org/rune/store"
)

// The API of child executions (issue 34): GET /v1/executions/{id}/children
// and GET /v1/executions?parent=ID list an execution's children, oldest
// first; GET /v1/executions/{id} shows a child's parent_execution_id.

// listChildren answers the children of execution id that the caller may
// read (limit 1 to 500, default 50).
func (s *Server) listChildren(w http.ResponseWriter, r *http.Request, id string) error {
	limit, err := queryInt(r, "limit", 1, store.ListLimitMax)
	if err != nil {
		return err
	}
	if limit == 0 {
		limit = store.ListLimitDefault
	}
	links, err := s.store.Children(r.Context(), id, limit)
	if err != nil {
		return err
	}
	p := principalOf(r.Context())
	out := apiv1.Page[apiv1.Execution]{Items: []apiv1.Execution{}}
	for _, l := range links {
		x, err := s.store.GetExecution(r.Context(), l.ChildID)
		if errors.Is(err, store.ErrNotFound) {
			continue // linked, not created yet (or refused)
		}
		if err != nil {
			return err
		}
		if p.Scoped() && !p.Sees(x.WorkflowID) {
			continue
		}
		v := viewExecution(x)
		v.ParentExecutionID = l.ParentID
		out.Items = append(out.Items, v)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// getChildren is GET /v1/executions/{id}/children.
func (s *Server) getChildren(w http.ResponseWriter, r *http.Request) error {
	x, err := s.execution(r)
	if err != nil {
		return err
	}
	return s.listChildren(w, r, x.ID)
}

// parentOf is the parent of execution id ("" for one no parent started).
func (s *Server) parentOf(ctx context.Context, id string) (string, error) {
	if !strings.HasPrefix(id, engine.ChildIDPrefix) {
		return "", nil
	}
	l, err := s.store.ParentOf(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return l.ParentID, nil
}
