package server

import (
	"errors"
	"net/http"

	"github.com/rune-org/rune/apiv1"
	"github.com/rune-org/rune/store"
)

// Workflow pause (issue 34): a paused workflow still takes triggers,
// webhook deliveries and schedule slots, but the dispatcher's claim skips
// its executions (store.ClaimExecutions), which stay enqueued until it
// resumes; then they are dispatched oldest first.

func (s *Server) pauseWorkflow(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	p, err := s.store.PauseWorkflow(r.Context(), id, s.cfg.Now())
	if errors.Is(err, store.ErrNotFound) {
		return workflowNotFound(id, 0)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, apiv1.WorkflowPause{WorkflowID: id, Paused: true, PausedAt: &p.PausedAt})
	return nil
}

func (s *Server) resumeWorkflow(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if _, err := s.store.GetWorkflow(r.Context(), id, 0); errors.Is(err, store.ErrNotFound) {
		// A deleted workflow may still be paused: resuming it lets its
		// enqueued executions go.
		if p, perr := s.store.WorkflowPaused(r.Context(), id); perr != nil || p == nil {
			return workflowNotFound(id, 0)
		}
	} else if err != nil {
		return err
	}
	if _, err := s.store.ResumeWorkflow(r.Context(), id); err != nil {
		return err
	}
	s.wakeDispatcher()
	writeJSON(w, http.StatusOK, apiv1.WorkflowPause{WorkflowID: id, Paused: false})
	return nil
}

// getWorkflowPause answers whether workflow id is paused.
func (s *Server) getWorkflowPause(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	p, err := s.store.WorkflowPaused(r.Context(), id)
	if err != nil {
		return err
	}
	if p == nil {
		if _, err := s.store.GetWorkflow(r.Context(), id, 0); errors.Is(err, store.ErrNotFound) {
			return workflowNotFound(id, 0)
		} else if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, apiv1.WorkflowPause{WorkflowID: id})
		return nil
	}
	writeJSON(w, http.StatusOK, apiv1.WorkflowPause{WorkflowID: id, Paused: true, PausedAt: &p.PausedAt})
	return nil
}
