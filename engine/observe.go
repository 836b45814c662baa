package engine

import (
	"github.com/rune-org/rune/coord"
	"github.com/rune-org/rune/message"
)

// observe tells Config.Metrics what a committed message did: its node's
// outcome and run time, a halt, a split's size, the execution's end. A
// duplicate (another delivery finished the message first) reports nothing:
// the first one did.
func (s *step) observe(rec *record, f *effects, out coord.Outcome) {
	m := s.e.cfg.Metrics
	if m == nil || out.Case != coord.Recorded {
		return
	}
	if !rec.Arrival { // an arrival at a barrier is bookkeeping, not a node run
		for _, st := range f.statuses {
			if st.NodeID != s.node.ID || st.Status == message.StatusRunning {
				continue
			}
			m.NodeRun(s.m.WorkflowID, s.node.Type, st.Status, rec.FinishedAt.Sub(rec.StartedAt))
			if s.node.Type == "split" && st.Status == message.StatusSuccess {
				m.Split(s.m.WorkflowID, len(s.items))
			}
			break
		}
	}
	// The nodes fused into this hop count as runs of their own.
	for _, fr := range rec.Fused {
		n, ok := s.wf.Graph.Node(fr.Node)
		if !ok {
			continue
		}
		for _, st := range f.statuses {
			if st.NodeID == fr.Node && st.Status != message.StatusRunning {
				m.NodeRun(s.m.WorkflowID, n.Type, st.Status, fr.FinishedAt.Sub(fr.StartedAt))
				break
			}
		}
	}
	if f.halt != nil {
		m.Halt(s.m.WorkflowID)
	}
	if out.Last() {
		m.Completed(s.m.WorkflowID, completionStatus(out.Completion))
	}
}
