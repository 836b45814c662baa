package server

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/rune-org/rune/apiv1"
	"github.com/rune-org/rune/engine"
	"github.com/rune-org/rune/store"
	"github.com/rune-org/rune/workflow"
)

func viewWorkflow(w *store.Workflow) apiv1.Workflow {
	return apiv1.Workflow{ID: w.ID, Version: w.Version, Name: w.Name, Definition: w.Definition, CreatedAt: w.CreatedAt,
		DeletedAt: w.DeletedAt, Unchanged: w.Unchanged}
}

// etag is a workflow version's entity tag: the version number, which
// changes with every stored definition ("v3").
func etag(version int) string { return `"v` + strconv.Itoa(version) + `"` }

// ifMatch reads an update's If-Match: the version it must still be the
// latest (0 when absent or "*": any).
func ifMatch(r *http.Request) (int, error) {
	v := strings.TrimSpace(r.Header.Get("If-Match"))
	if v == "" || v == "*" {
		return 0, nil
	}
	n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(v, `"v`), `"`))
	if err != nil || n < 1 || etag(n) != v {
		return 0, errorf(http.StatusPreconditionFailed, CodePreconditionFailed,
			"header If-Match %s is not an ETag of a workflow version (as \"v3\", from GET /v1/workflows/{id})", limitText(v, 40))
	}
	return n, nil
}

// writeWorkflow answers with a workflow version and its ETag.
func writeWorkflow(w http.ResponseWriter, status int, wf *store.Workflow) {
	w.Header().Set("ETag", etag(wf.Version))
	if status == http.StatusCreated {
		writeCreated(w, "/v1/workflows/"+url.PathEscape(wf.ID), viewWorkflow(wf))
		return
	}
	writeJSON(w, status, viewWorkflow(wf))
}

// listBytesMax bounds a list page's items in bytes: a page of 500
// executions with 1 MiB inputs, or of workflows with 5 MiB definitions,
// would otherwise be gigabytes.
const listBytesMax = 4 << 20

// writePage is writeList for a store page whose items can be large: it ends
// the page early, with the cursor after the last item it holds, once the
// items pass listBytesMax (one item always goes, however large).
func writePage[T, V any](w http.ResponseWriter, page store.Page[T], view func(T) V, cursorOf func(T) string) error {
	out := apiv1.Page[json.RawMessage]{Items: make([]json.RawMessage, 0, len(page.Items)), NextCursor: page.Next}
	size := 0
	for i, it := range page.Items {
		b, err := json.Marshal(view(it))
		if err != nil {
			return err
		}
		if i > 0 && size+len(b) > listBytesMax {
			out.NextCursor = cursorOf(page.Items[i-1])
			break
		}
		size += len(b)
		out.Items = append(out.Items, b)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// writeScopedPage answers with the page after the request's ?cursor= as
// its principal sees it (scopedPage; workflowOf names an item's workflow),
// through writePage; a cursor the store refuses is a 400.
func writeScopedPage[T, V any](w http.ResponseWriter, r *http.Request, fetch func(cursor string) (store.Page[T], error),
	workflowOf func(T) string, view func(T) V, cursorOf func(T) string) error {
	page, err := scopedPage(principalOf(r.Context()), r.URL.Query().Get("cursor"), fetch, workflowOf)
	if err != nil {
		return storeInput(err, "cursor")
	}
	return writePage(w, page, view, cursorOf)
}

// writeList answers 200 with items shown through view (an empty list as []).
func writeList[T, V any](w http.ResponseWriter, items []T, next string, view func(T) V) {
	out := apiv1.Page[V]{Items: make([]V, 0, len(items)), NextCursor: next}
	for _, it := range items {
		out.Items = append(out.Items, view(it))
	}
	writeJSON(w, http.StatusOK, out)
}

// readDefinition reads the request's body, a definition, and validates it
// exactly as `rune validate` does: malformed JSON is 400, every problem of
// an invalid one 422.
func (s *Server) readDefinition(r *http.Request) (*engine.Workflow, error) {
	body, err := readBody(r, s.cfg.MaxBody)
	if err != nil {
		return nil, err
	}
	if len(body) == 0 {
		return nil, errorf(http.StatusBadRequest, CodeInvalidJSON, "request body is empty; want a workflow definition (docs/dsl.md)")
	}
	wf, err := s.cfg.Engine.Compile(body)
	if err == nil {
		return wf, nil
	}
	var ps workflow.Problems
	if errors.As(err, &ps) {
		return nil, &apiError{Status: http.StatusUnprocessableEntity, Code: CodeInvalidWorkflow,
			Message: "the workflow definition is invalid: " + limitText(ps.Error(), 2000), Problems: ps}
	}
	if !json.Valid(body) {
		return nil, errorf(http.StatusBadRequest, CodeInvalidJSON, "%v", err)
	}
	return nil, &apiError{Status: http.StatusUnprocessableEntity, Code: CodeInvalidWorkflow, Message: err.Error(),
		Problems: []workflow.Problem{{Message: err.Error()}}}
}

func (s *Server) createWorkflow(w http.ResponseWriter, r *http.Request) error {
	wf, err := s.readDefinition(r)
	if err != nil {
		return err
	}
	if p := principalOf(r.Context()); !p.Sees(wf.Def.ID) {
		return forbidden("token %q is scoped to workflows %v: it may not create workflow %q", p.Name, p.Workflows, wf.Def.ID)
	}
	stored, err := s.store.CreateWorkflow(r.Context(), store.WorkflowInput{ID: wf.Def.ID, Name: wf.Def.Name, Definition: wf.Raw, At: s.cfg.Now()})
	if errors.Is(err, store.ErrConflict) {
		return errorf(http.StatusConflict, CodeConflict, "workflow %q exists; PUT /v1/workflows/%s stores a new version", wf.Def.ID, wf.Def.ID)
	}
	if err != nil {
		return err
	}
	writeWorkflow(w, http.StatusCreated, stored)
	return nil
}

func (s *Server) updateWorkflow(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	match, err := ifMatch(r)
	if err != nil {
		return err
	}
	wf, err := s.readDefinition(r)
	if err != nil {
		return err
	}
	if wf.Def.ID != id {
		return &apiError{Status: http.StatusUnprocessableEntity, Code: CodeInvalidWorkflow,
			Message:  "the definition's id does not match the URL",
			Problems: []workflow.Problem{{Path: "id", Message: "is " + quote(wf.Def.ID) + ", the URL names workflow " + quote(id)}}}
	}
	stored, err := s.store.UpdateWorkflow(r.Context(), store.WorkflowInput{ID: id, Name: wf.Def.Name, Definition: wf.Raw,
		At: s.cfg.Now(), IfVersion: match, IfChanged: true})
	if errors.Is(err, store.ErrNotFound) {
		return notFound("workflow %q does not exist (POST /v1/workflows creates it)", id)
	}
	if errors.Is(err, store.ErrPrecondition) {
		return errorf(http.StatusPreconditionFailed, CodePreconditionFailed,
			"workflow %q has a version newer than If-Match %s: read it again and apply the change to it", id, etag(match))
	}
	if err != nil {
		return err
	}
	s.flow.forget(id) // this server's triggers follow the new version's flow settings at once (flow.go)
	writeWorkflow(w, http.StatusOK, stored)
	return nil
}

func (s *Server) getWorkflow(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	version, err := queryInt(r, "version", 1, 1<<30)
	if err != nil {
		return err
	}
	return s.answerVersion(w, r, id, version)
}

// answerVersion answers with version (0: the latest) of workflow id.
func (s *Server) answerVersion(w http.ResponseWriter, r *http.Request, id string, version int) error {
	wf, err := s.store.GetWorkflow(r.Context(), id, version)
	if errors.Is(err, store.ErrNotFound) {
		return workflowNotFound(id, version)
	}
	if err != nil {
		return err
	}
	writeWorkflow(w, http.StatusOK, wf)
	return nil
}

// workflowNotFound is the 404 of workflow id, or of its version (> 0).
func workflowNotFound(id string, version int) error {
	if version > 0 {
		return notFound("workflow %q has no version %d", id, version)
	}
	return notFound("workflow %q does not exist", id)
}

func (s *Server) listWorkflows(w http.ResponseWriter, r *http.Request) error {
	limit, err := queryInt(r, "limit", 1, 500)
	if err != nil {
		return err
	}
	return writeScopedPage(w, r, func(cursor string) (store.Page[*store.Workflow], error) {
		return s.store.ListWorkflows(r.Context(), limit, cursor)
	}, func(wf *store.Workflow) string { return wf.ID }, viewWorkflow, store.WorkflowCursor)
}

// listVersions lists a workflow's versions, newest first, without their
// definitions (getVersion shows one).
func (s *Server) listVersions(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	limit, err := queryInt(r, "limit", 1, 500)
	if err != nil {
		return err
	}
	page, err := s.store.ListVersions(r.Context(), id, limit, r.URL.Query().Get("cursor"))
	if errors.Is(err, store.ErrNotFound) {
		return notFound("workflow %q does not exist", id)
	}
	if err != nil {
		return storeInput(err, "cursor")
	}
	writeList(w, page.Items, page.Next, viewWorkflow)
	return nil
}

// getVersion shows one version of a workflow with its definition.
func (s *Server) getVersion(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	version, err := strconv.Atoi(r.PathValue("version"))
	if err != nil || version < 1 {
		return badRequest("path: version %q: want a positive number", limitText(r.PathValue("version"), 20))
	}
	return s.answerVersion(w, r, id, version)
}

func (s *Server) deleteWorkflow(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	err := s.store.DeleteWorkflow(r.Context(), id, s.cfg.Now())
	if errors.Is(err, store.ErrNotFound) {
		return notFound("workflow %q does not exist", id)
	}
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// storeInput turns the store's rejection of a client-given value (a
// malformed cursor) into a 400 naming the parameter.
func storeInput(err error, param string) error {
	if errors.Is(err, store.ErrInvalid) {
		return badRequest("query parameter %s: %v", param, err)
	}
	return err
}

func quote(s string) string { b, _ := json.Marshal(s); return string(b) }
