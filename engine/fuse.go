package engine

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/node"
	"github.com/rune-org/rune/tracing"
	"github.com/rune-org/rune/workflow"
)

// Fused hops (issue 11; docs/architecture.md, "Throughput (issue 11)").
// When a handled node's only successor is pure, the worker runs it in the
// same hop instead of publishing a message for it, and goes on until a node
// that is not pure, a fork, a fan-in, or a bound. Each node still reports
// its statuses (running, then its outcome), contexts and routing exactly as
// a hop of its own would: the fused node's message is built as before, with
// the same deterministic id, and handed to the same outcome code; it only
// never travels. The hop's first message records every fused node's result
// with its own, so a redelivery replays the whole hop from the record,
// running nothing again: its effects are byte-identical.

// Bounds of one fused hop: its nodes, and Config.FuseBudget's default.
const (
	maxFused          = 64
	DefaultFuseBudget = 5 * time.Millisecond
)

// fusible says whether node n runs in the hop before it: its runner is
// pure (node.Pure: no I/O, no clock but $now), with one message in and its
// successors out. A control node is not: a split fans out, a barrier joins
// and a wait suspends.
func (wf *Workflow) fusible(n *workflow.Node) bool {
	_, pure := wf.runners[n.ID].(node.Pure)
	return pure && !isControl(n.Type) && wf.flow[n.ID] == nil // flow control: a hop of its own
}

// fusedRecord is one fused node's result, kept in the hop's record.
type fusedRecord struct {
	Node string `json:"node"`
	record
}

// fuses says whether e fuses the pure nodes of wf.
func (e *Engine) fuses(wf *Workflow) bool { return !e.cfg.NoFuse && wf.Def.Fused() }

// fuse runs in this hop the pure successors of the step's node, adding
// their effects to f and their results to rec. On a replay (rec was stored)
// it takes the results from rec instead, exactly as many as were fused.
func (s *step) fuse(ctx context.Context, rec *record, f *effects) error {
	// A resumed wait publishes its successors: the scheduler resumes,
	// workers run nodes. Barrier timeouts and arrivals have paths of their
	// own.
	if rec.Noop || rec.Arrival || s.mode == modeTimeout || s.mode == modeResume {
		return nil
	}
	if !s.replaying {
		if !s.e.fuses(s.wf) {
			return nil
		}
		if s.d.draining() {
			// A worker that is shutting down finishes the node in hand
			// and takes on nothing more: its successors are published.
			return nil
		}
	}
	began := time.Now()
	// The hop's span, when it records, gets a child per fused node.
	traced := trace.SpanFromContext(ctx).IsRecording()
	for i := 0; ; i++ {
		if s.replaying {
			if i >= len(rec.Fused) {
				return nil
			}
		} else if i >= maxFused || time.Since(began) > s.e.cfg.FuseBudget {
			return nil
		}
		n := s.fusibleNext(f)
		if n == nil {
			if s.replaying {
				return invalidf("message %s: stored record fused %d nodes; the definition fuses %d", s.m.MessageID, len(rec.Fused), i)
			}
			return nil
		}
		m := f.next[0]
		sub := &step{e: s.e, wf: s.wf, m: m, node: n, sink: s.sink, ref: s.ref, replaying: s.replaying}
		if err := sub.unpack(ctx); err != nil {
			return err // the pack was made by this hop: the store failed
		}
		// Each fused node's span is a child of the one before it, as its
		// message's would be: a span per node run, fused or not.
		var err error
		if ctx, err = sub.fused(ctx, traced, rec, i, f); err != nil {
			return err
		}
		if traced {
			// The hop's successors are children of its last node, as
			// the message of a node run alone would be.
			s.trace = tracing.SpanTraceparent(ctx)
		}
	}
}

// fused runs (or replays, from rec) the step's node as the i-th fused node
// of a hop, in a span of its own (a child of ctx's) when traced, and
// returns the span's context.
func (s *step) fused(ctx context.Context, traced bool, rec *record, i int, f *effects) (_ context.Context, err error) {
	n, m := s.node, s.m
	span := trace.SpanFromContext(context.Background()) // records nothing
	if traced {                                         // else no lineage string to build
		ctx, span = tracing.Fused(ctx, tracing.Run{ExecutionID: m.ExecutionID, WorkflowID: m.WorkflowID, NodeID: n.ID,
			Lineage: Lineage(m.LineageStack), Attempt: m.Attempt})
	}
	defer func() {
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}()
	tracing.NodeType(ctx, n.Type)
	var r *record
	if s.replaying {
		if rec.Fused[i].Node != n.ID {
			return ctx, invalidf("message %s: stored record fused node %q where the definition has %q", s.m.MessageID, rec.Fused[i].Node, n.ID)
		}
		r = &rec.Fused[i].record
	} else {
		if r, err = s.run(ctx, s.e.cfg.Now()); err != nil {
			return ctx, err
		}
		r = s.jsonOutput(r)
		rec.Fused = append(rec.Fused, fusedRecord{Node: n.ID, record: *r})
	}
	f.next = f.next[:0]
	f.statuses = append(f.statuses, s.status(message.StatusRunning, r.StartedAt))
	if err := s.outcome(ctx, r, f); err != nil {
		return ctx, fmt.Errorf("fused node %q: %w", n.ID, err)
	}
	return ctx, nil
}

// fusibleNext returns the node of f's one successor message when it may run
// in this hop: nothing else came of the node (no other message, retry
// delay, barrier timeout, halt or branch end) and it is a fusible node that
// is not a fan-in.
func (s *step) fusibleNext(f *effects) *workflow.Node {
	if len(f.next) != 1 || f.delay != 0 || len(f.timeouts) > 0 || f.halt != nil || f.end != nil {
		return nil
	}
	m := f.next[0]
	n, ok := s.wf.Graph.Node(m.CurrentNode)
	if !ok || !s.wf.fusible(n) || len(s.wf.parents[n.ID]) > 0 {
		return nil
	}
	return n
}
