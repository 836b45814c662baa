package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/rune-org/rune/coord"
	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/node"
	"github.com/rune-org/rune/redact"
	"github.com/rune-org/rune/workflow"
)

// step handles one message.
type step struct {
	e    *Engine
	wf   *Workflow
	m    *message.NodeExecution
	node *workflow.Node
	sink Sink
	// mode is how the message is handled, computed once (modeOf).
	mode mode
	// resumedAt, in modeResume, is when the wait's timer came due: the node
	// succeeds without running again.
	resumedAt time.Time
	// items are a split's elements when it has just run (nil on replay,
	// when they are evaluated again: expressions are pure).
	items []any
	// secrets are the credential values this step's node resolved: they
	// are redacted from everything it produces (see stepSecrets).
	secrets redact.Set
	// ref is the definition reference the messages this step produces
	// carry ("": they carry the definition inline, as m does).
	ref string
	// replaying is set when rec comes from the store: fused nodes are
	// replayed from it, not run.
	replaying bool
	// d is what the runtime knows of the message's delivery.
	d Delivery
	// trace is the traceparent the messages this step reports carry:
	// d.Trace, then that of the last node a fused hop ran.
	trace string
	// packRefs are the packs of m's context and packed the entries they
	// hold (unpack): a successor carries them on (pack).
	packRefs []string
	packed   map[string]any
}

// record is what Finish stores for a message, so that a redelivery publishes
// the same effects without running the node again.
type record struct {
	Output     any            `json:"output,omitempty"`
	Route      []string       `json:"route"`
	Err        *message.Error `json:"error,omitempty"`
	Retryable  bool           `json:"retryable,omitempty"`
	StartedAt  time.Time      `json:"started_at"`
	FinishedAt time.Time      `json:"finished_at"`
	DurationMS int64          `json:"duration_ms"`
	// Arrival marks an aggregator or merge arrival: replaying it arrives
	// again, which barriers make idempotent per slot.
	Arrival bool `json:"arrival,omitempty"`
	// Noop marks a barrier timeout that found its barrier already closed.
	Noop bool `json:"noop,omitempty"`
	// Fused are the results of the nodes run in this message's hop after
	// its own (see fuse), in order.
	Fused []fusedRecord `json:"fused,omitempty"`
	// deferral is the node's node.Defer: the run must wait. Never stored;
	// Err says the node failed for a caller that cannot defer it.
	deferral *node.Defer
}

// MarshalBinary encodes the record for coordinators that store it.
func (r *record) MarshalBinary() ([]byte, error) { return json.Marshal(r) }

func (s *step) handle(ctx context.Context) error {
	if err := s.unpack(ctx); err != nil {
		return s.packGone(ctx, err)
	}
	// A paused execution's branch parks before its node begins (pause.go).
	if parked, err := s.pauseGate(ctx); parked || err != nil {
		return err
	}
	switch s.mode {
	case modeOptimistic:
		// A pure node runs before asking the coordinator whether to: its
		// Finish makes Begin's checks, one round trip per node instead of
		// two. Its running status waits for the verdict (the node takes
		// microseconds), so a message that must not run never reports one.
		now := s.e.cfg.Now()
		running := s.status(message.StatusRunning, now)
		rec, err := s.run(ctx, now)
		if err != nil {
			return err
		}
		return s.settle(ctx, rec, unverified{yes: true, running: running})
	case modeEager:
		// A first copy's first delivery: no earlier delivery of it ran, so
		// Begin could only say Drop (a halt landed while it was queued),
		// which its Finish says too, after the node ran. Its running
		// status goes out as a Begin's would: the node may take long.
		s.sink.Status(ctx, s.status(message.StatusRunning, s.e.cfg.Now()))
		rec, err := s.run(ctx, s.e.cfg.Now())
		if err != nil {
			return err
		}
		return s.settle(ctx, rec, unverified{yes: true})
	case modeResume:
		if !isEventWait(s.node.Type) && !isChildWorkflow(s.node.Type) && !isDigest(s.node.Type) {
			// A wait's end runs nothing: its Finish makes Begin's checks
			// (done before: replay its record; halted: drop), one round
			// trip per resume instead of two (issue 33).
			now := s.e.cfg.Now()
			return s.settle(ctx, &record{Output: map[string]any{ResumeAt: s.resumedAt.UTC().Format(time.RFC3339Nano)}, StartedAt: now, FinishedAt: now}, unverified{yes: true})
		}
	}
	b, err := s.e.cfg.Coord.Begin(ctx, s.m.ExecutionID, s.m.MessageID)
	if err != nil {
		return fmt.Errorf("engine: begin message %s: %w", s.m.MessageID, err)
	}
	switch b.State {
	case coord.Drop:
		if s.mode == modeResume && isDigest(s.node.Type) { // issue 36
			s.dropDigest(ctx)
		}
		return s.settle(ctx, nil, unverified{})
	case coord.Replay:
		rec, err := s.stored(b.Record)
		if err != nil {
			return err
		}
		return s.settle(ctx, rec, unverified{})
	}
	now := s.e.cfg.Now()
	switch {
	case s.mode == modeResume && isEventWait(s.node.Type): // issue 34
		return s.resumeEvent(ctx)
	case s.mode == modeResume && isChildWorkflow(s.node.Type): // issue 34
		return s.resumeChild(ctx)
	case s.mode == modeResume && isDigest(s.node.Type): // issue 36
		return s.resumeDigest(ctx)
	case isBarrier(s.node.Type):
		return s.settle(ctx, &record{Arrival: true, StartedAt: now, FinishedAt: now}, unverified{})
	}
	if fc := s.wf.flow[s.node.ID]; fc != nil { // rate_limit, throttle (flow.go)
		if held, err := s.holdBack(ctx, fc); held || err != nil {
			return err
		}
		now = s.e.cfg.Now()
	}
	s.sink.Status(ctx, s.status(message.StatusRunning, now))
	// The node's clock starts after the running status is out: publishing
	// may block (RabbitMQ's flow control), and a wait's time counts from
	// its start, so a blocked publish would end short waits before they
	// suspend.
	rec, err := s.run(ctx, s.e.cfg.Now())
	if err != nil {
		return err
	}
	// The node asked to run later (node.Defer). A time at hand (clocks of
	// a scheduler and a worker a little apart) is waited for here: the
	// deferral's timer would be the one that brought the run back, which
	// its scheduler removes once fired.
	for i := 0; rec.deferral != nil; i++ {
		d, now := rec.deferral, s.e.cfg.Now()
		if i == 3 || d.Until.Sub(now) > maxInlineDefer {
			return s.deferRun(ctx, d.Until, d.Reason)
		}
		if err := sleepUntil(ctx, d.Until, now); err != nil {
			return err
		}
		if rec, err = s.run(ctx, s.e.cfg.Now()); err != nil {
			return err
		}
	}
	if rec.Err == nil && isEventWait(s.node.Type) { // issue 34
		return s.suspendForEvent(ctx, rec)
	}
	if rec.Err == nil && isChildWorkflow(s.node.Type) { // issue 34
		return s.startChild(ctx, rec)
	}
	if rec.Err == nil && isDigest(s.node.Type) { // issue 36
		return s.digest(ctx, rec)
	}
	if rec.Err == nil && isWait(s.node.Type) {
		if due, err := ResumeTime(rec.Output); err == nil && due.After(s.e.cfg.Now()) {
			return s.suspend(ctx, due)
		}
	}
	return s.settle(ctx, rec, unverified{})
}

// suspend freezes the message in the timer store until due and reports the
// node waiting. It does not Finish the message: the branch stays live, and
// the scheduler's Resume finishes it (RFC 006 §5.1).
func (s *step) suspend(ctx context.Context, due time.Time) error {
	if s.e.cfg.Timers == nil {
		return s.settle(ctx, &record{StartedAt: s.e.cfg.Now(), FinishedAt: s.e.cfg.Now(),
			Err: &message.Error{Code: "UNSUPPORTED_NODE", Message: fmt.Sprintf("node %q waits, but this runtime has no timer store", s.node.ID)}}, unverified{})
	}
	if err := s.park(ctx, TimerID(s.m), due); err != nil {
		return err
	}
	st := s.status(message.StatusWaiting, s.e.cfg.Now())
	st.ResumeAt = &due
	s.sink.Status(ctx, st)
	return nil
}

// park freezes the message into the timer store under id until due and
// parks it in the coordinator.
func (s *step) park(ctx context.Context, id string, due time.Time) error {
	frozen, err := s.e.Freeze(ctx, s.m)
	if err != nil {
		return fmt.Errorf("engine: freeze message %s: %w", s.m.MessageID, err)
	}
	if err := s.e.cfg.Timers.Schedule(ctx, id, due, frozen); err != nil {
		return fmt.Errorf("engine: schedule timer of message %s: %w", s.m.MessageID, err)
	}
	// Parked, a halt wakes it (see wakeParked); halted already, it wakes
	// now, to be dropped rather than hold the completion until due.
	wake, err := s.e.cfg.Coord.Park(ctx, s.m.ExecutionID, id, due)
	if err != nil {
		return fmt.Errorf("engine: park message %s: %w", s.m.MessageID, err)
	}
	if wake {
		if err := s.e.cfg.Timers.Wake(ctx, s.e.cfg.Now(), id); err != nil {
			return fmt.Errorf("engine: wake timer of message %s: %w", s.m.MessageID, err)
		}
	}
	return nil
}

// wakeParked wakes the suspended branches of the execution this message
// halted: they resume now and are dropped, so the halted completion comes
// when the last running branch ends, not when the last timer would have.
// A redelivery wakes them again, which changes nothing.
func (s *step) wakeParked(ctx context.Context) error {
	if s.e.cfg.Timers == nil {
		return nil
	}
	ids, err := s.e.cfg.Coord.Parked(ctx, s.m.ExecutionID)
	if err == nil && len(ids) > 0 {
		err = s.e.cfg.Timers.Wake(ctx, s.e.cfg.Now(), ids...)
	}
	if err != nil {
		return fmt.Errorf("engine: wake the waiting branches of halted execution %s: %w", s.m.ExecutionID, err)
	}
	return nil
}

func (s *step) status(st string, at time.Time) *message.NodeStatus {
	return &message.NodeStatus{
		WorkflowID:   s.m.WorkflowID,
		ExecutionID:  s.m.ExecutionID,
		NodeID:       s.node.ID,
		Status:       st,
		ExecutedAt:   at.UTC(),
		Attempt:      s.m.Attempt,
		LineageStack: s.m.LineageStack,
	}
}

// childID derives a message id from its parent's id: the same parent and
// suffix always give the same id, so redelivered work is recognised. The
// hash resists chosen collisions (unlike FNV): a message id alone names a
// timer across all executions (TimerID), and callers may choose execution
// ids.
func childID(parent, suffix string) string {
	h := sha256.New()
	h.Write([]byte(parent))
	h.Write([]byte{0})
	h.Write([]byte(suffix))
	var b [sha256.Size]byte
	return hex.EncodeToString(h.Sum(b[:0])[:16])
}

// packGone handles a step whose context could not be unpacked (err): a pack
// that is gone because the execution ended drops the message, as Begin
// would; one gone from a running execution (its blobs expired) can never be
// handled.
func (s *step) packGone(ctx context.Context, err error) error {
	if !errors.Is(err, coord.ErrBlobNotFound) {
		return err
	}
	b, berr := s.e.cfg.Coord.Begin(ctx, s.m.ExecutionID, s.m.MessageID)
	if berr != nil {
		return fmt.Errorf("engine: begin message %s: %w", s.m.MessageID, berr)
	}
	if b.State == coord.Drop {
		return s.settle(ctx, nil, unverified{})
	}
	return fmt.Errorf("%w: message %s: %v", ErrInvalid, s.m.MessageID, err)
}
