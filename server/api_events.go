package server

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/rune-org/rune/apiv1"
	"github.com/rune-org/rune/engine"
	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/store"
)

// Events and approvals (issue 34): POST /v1/events resumes the
// wait_for_event nodes waiting for an (event, key); approvals are such
// waits with an "approval", decided through the API or the console.

// maxEventBody bounds POST /v1/events: the data and some slack.
const maxEventBody = engine.MaxEventData + 2<<10

// sendEvent is POST /v1/events.
func (s *Server) sendEvent(w http.ResponseWriter, r *http.Request) error {
	key := r.Header.Get("Idempotency-Key")
	if len(key) > 255 {
		return badRequest("header Idempotency-Key is %d bytes, over the limit of 255", len(key))
	}
	body, err := readBody(r, maxEventBody)
	if err != nil {
		return err
	}
	var in apiv1.EventSend
	if err := decodeJSON(body, &in); err != nil {
		return err
	}
	sent, err := s.deliverEvent(r, engine.EventSend{Name: in.Event, Key: in.Key, Data: in.Data, IdempotencyKey: key})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, sent)
	return nil
}

func (s *Server) deliverEvent(r *http.Request, send engine.EventSend) (apiv1.EventSent, error) {
	if string(send.Data) == "null" {
		send.Data = nil
	}
	if err := engine.CheckEventSend(send); err != nil {
		return apiv1.EventSent{}, errorf(http.StatusUnprocessableEntity, CodeInvalidRequest, "%s", strings.TrimPrefix(err.Error(), engine.ErrInvalidEvent.Error()+": "))
	}
	sent, err := s.cfg.Engine.DeliverEvent(r.Context(), send)
	if errors.Is(err, engine.ErrNoEvents) {
		return apiv1.EventSent{}, errorf(http.StatusServiceUnavailable, CodeUnavailable, "this server's runtime has no event store")
	}
	if err != nil {
		return apiv1.EventSent{}, err
	}
	s.log.InfoContext(r.Context(), "event sent", "event", send.Name, "event_id", sent.ID, "matched", sent.Matched)
	return apiv1.EventSent{EventID: sent.ID, Matched: sent.Matched}, nil
}

// approvalsScan bounds the running executions GET /v1/approvals reads.
const approvalsScan = store.ListLimitMax

// listApprovals is GET /v1/approvals: the approvals waiting in the running
// executions the caller sees (the newest 500 running executions).
func (s *Server) listApprovals(w http.ResponseWriter, r *http.Request) error {
	out, err := s.Approvals(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, apiv1.Page[apiv1.Approval]{Items: out})
	return nil
}

// Approvals lists the waiting approvals r's principal sees (the console's
// page too).
func (s *Server) Approvals(r *http.Request) ([]apiv1.Approval, error) {
	p := principalOf(r.Context())
	// Running: processing, or waiting when every unfinished node waits.
	var running []*store.Execution
	for _, st := range []string{store.StatusWaiting, store.StatusProcessing} {
		page, err := s.store.ListExecutions(r.Context(), store.ExecutionFilter{Status: st, Limit: approvalsScan})
		if err != nil {
			return nil, err
		}
		running = append(running, page.Items...)
	}
	out := []apiv1.Approval{}
	for _, x := range running {
		if !p.Sees(x.WorkflowID) {
			continue
		}
		runs, err := s.store.NodeRuns(r.Context(), x.ID)
		if err != nil {
			return nil, err
		}
		for _, run := range runs {
			if a, ok := approvalOf(x, run); ok {
				out = append(out, a)
			}
		}
	}
	slices.SortStableFunc(out, func(a, b apiv1.Approval) int { return a.Since.Compare(b.Since) })
	return out, nil
}

// approvalOf reads a waiting approval from a node run's waiting details.
func approvalOf(x *store.Execution, run *store.NodeRun) (apiv1.Approval, bool) {
	if run.Status != message.StatusWaiting || len(run.Details) == 0 {
		return apiv1.Approval{}, false
	}
	var d struct {
		Event, Key string
		Approval   *struct{ Title string }
	}
	if json.Unmarshal(run.Details, &d) != nil || d.Approval == nil || d.Event == "" {
		return apiv1.Approval{}, false
	}
	a := apiv1.Approval{ExecutionID: x.ID, WorkflowID: x.WorkflowID, NodeID: run.NodeID, Branch: run.Branch,
		Title: d.Approval.Title, Event: d.Event, Key: d.Key, Since: run.ReportedAt, TimeoutAt: run.ResumeAt}
	if run.StartedAt != nil {
		a.Since = *run.StartedAt
	}
	return a, true
}

// decideApproval is POST /v1/executions/{id}/approvals/{node}: it sends the
// node's event with data {"approved", "by": the caller's token name,
// "comment"}. The first decision wins: the event's id is the approval's, so
// a second decision (a double click, another approver) matches nothing.
func (s *Server) decideApproval(w http.ResponseWriter, r *http.Request) error {
	x, err := s.execution(r)
	if err != nil {
		return err
	}
	nodeID := r.PathValue("node")
	body, err := readBody(r, 16<<10)
	if err != nil {
		return err
	}
	var in apiv1.ApprovalDecision
	if err := decodeJSON(body, &in); err != nil {
		return err
	}
	if len(in.Comment) > 2000 {
		return errorf(http.StatusUnprocessableEntity, CodeInvalidRequest, "comment: %d bytes, at most 2000", len(in.Comment))
	}
	runs, err := s.store.NodeRuns(r.Context(), x.ID)
	if err != nil {
		return err
	}
	var waiting []apiv1.Approval
	for _, run := range runs {
		if a, ok := approvalOf(x, run); ok && run.NodeID == nodeID {
			waiting = append(waiting, a)
		}
	}
	if len(waiting) == 0 {
		return errorf(http.StatusConflict, CodeConflict, "node %q of execution %s is not waiting for an approval", nodeID, x.ID)
	}
	data, err := json.Marshal(map[string]any{"approved": in.Approved, "by": principalOf(r.Context()).Name, "comment": in.Comment})
	if err != nil {
		return err
	}
	// Every waiting branch of the node (one outside splits) by its key.
	res := apiv1.EventSent{}
	for _, a := range waiting {
		sent, err := s.deliverEvent(r, engine.EventSend{Name: a.Event, Key: a.Key, Data: data,
			IdempotencyKey: "approval\x00" + x.ID + "\x00" + nodeID + "\x00" + a.Branch})
		if err != nil {
			return err
		}
		res.EventID, res.Matched = sent.EventID, res.Matched+sent.Matched
	}
	writeJSON(w, http.StatusAccepted, res)
	return nil
}
