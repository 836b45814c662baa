package engine

import (
	"context"
	"log/slog"
	"strconv"
	"strings"

	"github.com/rune-org/rune/message"
)

// Lineage writes a lineage stack for logs: each open split as
// "<split node>[<item index>]", outermost first, joined by "/" ("" when the
// message is on no split's branch).
func Lineage(stack []message.Frame) string {
	if len(stack) == 0 {
		return ""
	}
	var b strings.Builder
	for i, f := range stack {
		if i > 0 {
			b.WriteByte('/')
		}
		b.WriteString(f.SplitNodeID)
		b.WriteByte('[')
		b.WriteString(strconv.Itoa(f.ItemIndex))
		b.WriteByte(']')
	}
	return b.String()
}

// log is the engine's logger for this message: every line carries the
// execution id, workflow id, node id, attempt and lineage. The attributes
// are added only when a line is written, so a node run that logs nothing
// pays for two small allocations.
func (s *step) log() *slog.Logger {
	return slog.New(stepHandler{h: s.e.log.Handler(), m: s.m})
}

// stepHandler adds a message's attributes to each record it handles.
type stepHandler struct {
	h slog.Handler
	m *message.NodeExecution
}

func (h stepHandler) attrs() []slog.Attr {
	a := []slog.Attr{
		slog.String("execution_id", h.m.ExecutionID),
		slog.String("workflow_id", h.m.WorkflowID),
		slog.String("node_id", h.m.CurrentNode),
		slog.Int("attempt", h.m.Attempt),
	}
	if l := Lineage(h.m.LineageStack); l != "" {
		a = append(a, slog.String("lineage", l))
	}
	return a
}

func (h stepHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.h.Enabled(ctx, l) }

func (h stepHandler) Handle(ctx context.Context, r slog.Record) error {
	r = r.Clone()
	r.AddAttrs(h.attrs()...)
	return h.h.Handle(ctx, r)
}

func (h stepHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return stepHandler{h: h.h.WithAttrs(as), m: h.m}
}

// WithGroup adds the message's attributes first: they stay at the top
// level rather than inside the group.
func (h stepHandler) WithGroup(name string) slog.Handler {
	return h.h.WithAttrs(h.attrs()).WithGroup(name)
}
