package server

import (
	"context"
	"errors"
	"net/http"

	"github.com/rune-org/rune/apiv1"
	"github.com/rune-org/rune/engine"
	"github.com/rune-org/rune/store"
)

// Execution pause (issue 34): POST /v1/executions/{id}/pause sets the
// execution's pause flag in the coordinator (engine.PauseExecution), so
// its branches park at their next node boundary, and records the pause in
// the store for the API, which then shows the execution `paused` until
// POST /v1/executions/{id}/resume wakes the parked branches.

// StatusPaused is the status the API shows of an execution paused and not
// ended.
const StatusPaused = "paused"

func (s *Server) pauseExecution(w http.ResponseWriter, r *http.Request) error {
	x, err := s.execution(r)
	if err != nil {
		return err
	}
	if store.Final(x.Status) {
		return errorf(http.StatusConflict, CodeConflict, "execution %q has already ended (%s)", x.ID, x.Status)
	}
	// The flag first: a pause the API shows stops the branches.
	if err := s.cfg.Engine.PauseExecution(r.Context(), x.ID); errors.Is(err, engine.ErrNoPause) {
		return errorf(http.StatusServiceUnavailable, CodeUnavailable, "this runtime cannot pause executions")
	} else if err != nil {
		return err
	}
	if _, err := s.store.PauseExecution(r.Context(), x.ID, s.cfg.Now()); err != nil {
		return err
	}
	v := viewExecution(x)
	v.Status = StatusPaused
	writeJSON(w, http.StatusOK, v)
	return nil
}

func (s *Server) resumeExecution(w http.ResponseWriter, r *http.Request) error {
	x, err := s.execution(r)
	if err != nil {
		return err
	}
	if err := s.cfg.Engine.ResumeExecution(r.Context(), x.ID); errors.Is(err, engine.ErrNoPause) {
		return errorf(http.StatusServiceUnavailable, CodeUnavailable, "this runtime cannot pause executions")
	} else if err != nil {
		return err
	}
	if _, err := s.store.ResumeExecution(r.Context(), x.ID); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewExecution(x))
	return nil
}

// pausedStatus shows v `paused` while its execution is paused and not
// ended.
func (s *Server) pausedStatus(ctx context.Context, v *apiv1.Execution) error {
	if store.Final(v.Status) {
		return nil
	}
	p, err := s.store.ExecutionPaused(ctx, v.ID)
	if err != nil {
		return err
	}
	if p != nil {
		v.Status = StatusPaused
	}
	return nil
}

// forgetPause clears the pause flag of execution id, cancelled: the halt
// has woken its parked branches, which are dropped, and the flag would
// otherwise outlive it in the coordinator.
func (s *Server) forgetPause(ctx context.Context, id string) {
	if p, err := s.store.ExecutionPaused(ctx, id); err != nil || p == nil {
		return
	}
	if err := s.cfg.Engine.ResumeExecution(ctx, id); err != nil && !errors.Is(err, engine.ErrNoPause) {
		s.log.Warn("cancel: could not clear the execution's pause", "execution", id, "err", err)
		return
	}
	if _, err := s.store.ResumeExecution(ctx, id); err != nil {
		s.log.Warn("cancel: could not forget the execution's pause", "execution", id, "err", err)
	}
}
