package server

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"time"

	"github.com/rune-org/rune/apiv1"
	"github.com/rune-org/rune/engine"
	"github.com/rune-org/rune/store"
)

func viewExecution(x *store.Execution) apiv1.Execution {
	v := apiv1.Execution{
		ID: x.ID, WorkflowID: x.WorkflowID, Version: x.Version, Status: x.Status, Cursor: x.Cursor,
		Attempts: x.Attempts, AvailableAt: x.AvailableAt, Vars: x.Vars, Input: x.Input, Trigger: x.Trigger,
		IdempotencyKey: x.IdempotencyKey, CancelRequested: x.CancelRequested, Completion: x.Completion,
		CreatedAt: x.CreatedAt, UpdatedAt: x.UpdatedAt, DispatchedAt: x.DispatchedAt, FinishedAt: x.FinishedAt,
	}
	if v.Cursor == nil {
		v.Cursor = []string{}
	}
	if x.AvailableAt.Equal(store.HeldUntil) {
		v.AvailableAt = time.Time{} // held for a concurrency slot (flow.go): unset
	}
	if v.Vars == nil {
		v.Vars = map[string]json.RawMessage{}
	}
	return v
}

func viewNodeRun(n *store.NodeRun) apiv1.NodeRun {
	return apiv1.NodeRun{NodeID: n.NodeID, Branch: n.Branch, Lineage: n.Lineage, Status: n.Status, Attempt: n.Attempt,
		Output: n.Output, Error: n.Error, Details: n.Details, StartedAt: n.StartedAt, FinishedAt: n.FinishedAt,
		NextAttemptAt: n.NextAttemptAt, ResumeAt: n.ResumeAt, DurationMS: n.DurationMS, UpdatedAt: n.UpdatedAt,
		Reason: store.RunReason(n)}
}

// triggerExecution enqueues an execution of the workflow's latest version
// (or ?version=) with the body as its trigger payload; ?start_at= delays it.
func (s *Server) triggerExecution(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	version, err := queryInt(r, "version", 1, 1<<30)
	if err != nil {
		return err
	}
	startAt, err := queryTime(r, "start_at")
	if err != nil {
		return err
	}
	priority, err := queryPriority(r) // flow control (flow.go)
	if err != nil {
		return err
	}
	key := r.Header.Get("Idempotency-Key")
	if len(key) > 255 {
		return badRequest("header Idempotency-Key is %d bytes, over the limit of 255", len(key))
	}
	body, err := readBody(r, s.cfg.MaxTrigger)
	if err != nil {
		return err
	}
	if len(body) == 0 {
		body = []byte("{}")
	} else if err := validJSON(body); err != nil {
		return err
	}
	if err := checkInput(body); err != nil {
		return err
	}
	// The store checks the workflow (not deleted, the version exists) in
	// the same transaction: one round trip per trigger.
	now := s.cfg.Now()
	c, err := s.createExecution(r.Context(), store.ExecutionInput{
		ID: engine.NewExecutionID(now), WorkflowID: id, Version: version, Input: body,
		IdempotencyKey: key, Trigger: "api", AvailableAt: startAt, At: now,
	}, priority)
	x, created := c.x, c.created
	if errors.Is(err, store.ErrNotFound) {
		return workflowNotFound(id, version)
	}
	if err != nil {
		return err
	}
	if c.debounced {
		// Collapsed into an enqueued execution (settings.debounce).
		s.metrics.triggers.WithLabelValues("debounced").Inc()
		v := viewExecution(x)
		v.Debounced = true
		writeJSON(w, http.StatusOK, v)
		return nil
	}
	if !created {
		// A key is one request: the same again gets its execution back, a
		// different one is refused (as Stripe and the IETF draft do).
		if !store.SameJSON(x.Input, body) || (version > 0 && x.Version != version) {
			return errorf(http.StatusUnprocessableEntity, CodeIdempotencyKeyReused,
				"Idempotency-Key %q started execution %s with another request (body or version); use a new key for a new request", key, x.ID)
		}
		s.metrics.triggers.WithLabelValues("repeated").Inc()
		writeJSON(w, http.StatusOK, viewExecution(x))
		return nil
	}
	s.metrics.triggers.WithLabelValues("created").Inc()
	if !x.AvailableAt.After(now) {
		s.wakeDispatcher()
	}
	writeCreated(w, "/v1/executions/"+url.PathEscape(x.ID), viewExecution(x))
	return nil
}

func (s *Server) execution(r *http.Request) (*store.Execution, error) {
	id := r.PathValue("id")
	x, err := s.store.GetExecution(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, notFound("execution %q does not exist", id)
	}
	return x, err
}

func (s *Server) getExecution(w http.ResponseWriter, r *http.Request) error {
	x, err := s.execution(r)
	if err != nil {
		return err
	}
	runs, err := s.store.NodeRuns(r.Context(), x.ID)
	if err != nil {
		return err
	}
	splits, err := s.store.Splits(r.Context(), x.ID)
	if err != nil {
		return err
	}
	v := viewExecution(x)
	if err := s.queueState(r.Context(), x, &v); err != nil { // flow control (flow.go)
		return err
	}
	if v.ParentExecutionID, err = s.parentOf(r.Context(), x.ID); err != nil { // issue 34
		return err
	}
	if err := s.pausedStatus(r.Context(), &v); err != nil { // issue 34
		return err
	}
	v.Nodes = make([]apiv1.NodeRun, 0, len(runs))
	for _, n := range runs {
		v.Nodes = append(v.Nodes, viewNodeRun(n))
	}
	for _, sp := range splits {
		v.Splits = append(v.Splits, apiv1.SplitProgress(sp))
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

// executionStatuses are the values ?status= accepts.
var executionStatuses = []string{store.StatusEnqueued, store.StatusProcessing, store.StatusWaiting,
	store.StatusCompleted, store.StatusFailed, store.StatusHalted, store.StatusCancelled}

func (s *Server) listExecutions(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	if parent := q.Get("parent"); parent != "" { // issue 34: an execution's children
		return s.listChildren(w, r, parent)
	}
	f := store.ExecutionFilter{WorkflowID: q.Get("workflow_id"), Status: q.Get("status"),
		IdempotencyKey: q.Get("idempotency_key")}
	if f.Status != "" && !contains(executionStatuses, f.Status) {
		return badRequest("query parameter status: %q is not one of %v", f.Status, executionStatuses)
	}
	var err error
	if f.Limit, err = queryInt(r, "limit", 1, 500); err != nil {
		return err
	}
	if f.CreatedAfter, err = queryTime(r, "created_after"); err != nil {
		return err
	}
	if f.CreatedBefore, err = queryTime(r, "created_before"); err != nil {
		return err
	}
	if f.Trigger, f.Input, err = searchQuery(r); err != nil {
		return err
	}
	return writeScopedPage(w, r, func(cursor string) (store.Page[*store.Execution], error) {
		f.Cursor = cursor
		return s.store.ListExecutions(r.Context(), f)
	}, func(x *store.Execution) string { return x.WorkflowID }, viewExecution, store.ExecutionCursor)
}

// cancelExecution cancels an enqueued execution at once; a running one is
// halted through the engine (branches stop at their next node, waits are
// woken and dropped) and shows cancelled once its completion arrives.
func (s *Server) cancelExecution(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	x, err := s.store.CancelExecution(r.Context(), id, s.cfg.Now())
	switch {
	case errors.Is(err, store.ErrNotFound):
		return notFound("execution %q does not exist", id)
	case errors.Is(err, store.ErrConflict):
		return errorf(http.StatusConflict, CodeConflict, "execution %q has already ended (%s)", id, statusOf(x))
	case err != nil:
		return err
	}
	if x.CancelRequested && !store.Final(x.Status) {
		if err := s.halt(r.Context(), x); err != nil {
			return err
		}
		// issue 34: its children that have not ended are cancelled too
		if err := s.children.cancelChildren(r.Context(), x.ID, 1); err != nil {
			return err
		}
		s.forgetPause(r.Context(), x.ID) // issue 34 (pause_execution.go)
	}
	writeJSON(w, http.StatusAccepted, viewExecution(x))
	return nil
}

func statusOf(x *store.Execution) string {
	if x == nil {
		return "finished"
	}
	return x.Status
}

// rerunExecution enqueues a new execution of the same workflow version with
// the same input as a finished one, or one that starts at a node (rerun.go).
func (s *Server) rerunExecution(w http.ResponseWriter, r *http.Request) error {
	x, err := s.execution(r)
	if err != nil {
		return err
	}
	if !store.Final(x.Status) {
		return errorf(http.StatusConflict, CodeConflict, "execution %q is %s; only a finished execution can be re-run", x.ID, x.Status)
	}
	// A re-run from a node (issue 34, rerun.go).
	if req, ok, err := s.rerunFrom(r); err != nil || ok {
		if err != nil {
			return err
		}
		return s.rerunFromNode(w, r, x, req)
	}
	// Its input was checked when it was enqueued, unless that was before
	// the check (or under another policy): check it again.
	if err := checkInput(x.Input); err != nil {
		return err
	}
	now := s.cfg.Now()
	nx, _, err := s.store.CreateExecution(r.Context(), store.ExecutionInput{
		ID: engine.NewExecutionID(now), WorkflowID: x.WorkflowID, Version: x.Version, Input: x.Input,
		Trigger: "rerun:" + x.ID, At: now,
	})
	if err != nil {
		return err
	}
	s.wakeDispatcher()
	writeCreated(w, "/v1/executions/"+url.PathEscape(nx.ID), viewExecution(nx))
	return nil
}

func contains(set []string, s string) bool {
	for _, v := range set {
		if v == s {
			return true
		}
	}
	return false
}
