package worker

import (
	"context"
	"errors"
	"time"

	"github.com/rune-org/rune/broker"
	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/publish"
)

// DeadLettered is the error code of the failed status a worker reports for
// a node whose message it dead-lettered: the execution can no longer
// complete, and whoever follows it (rune start --wait) learns so at once
// rather than at its timeout.
const DeadLettered = message.CodeDeadLettered

// reportDeadLetter publishes that m is being dead-lettered for reason. It
// is best effort: the message goes to the dead-letter queue either way.
func reportDeadLetter(ctx context.Context, cfg Config, m *message.NodeExecution, reason error) {
	st := &message.NodeStatus{
		WorkflowID: m.WorkflowID, ExecutionID: m.ExecutionID, NodeID: m.CurrentNode,
		Status: message.StatusFailed, ExecutedAt: time.Now().UTC(), Attempt: max(m.Attempt, 1),
		LineageStack: m.LineageStack,
		Error:        &message.Error{Code: DeadLettered, Message: reason.Error()},
	}
	if st.Validate() != nil {
		return // ids too broken to report under; the dead letter says it all
	}
	p := publish.New(publish.Config{Broker: cfg.Broker})
	p.Status(ctx, st)
	if err := p.Sync(ctx); err != nil && !errors.Is(err, context.Canceled) {
		cfg.Logger.Warn("could not report a dead-lettered message", "message_id", m.MessageID, "execution_id", m.ExecutionID, "err", err)
	}
}

// rejected reports whether a handler's error dead-letters the message.
func rejected(err error) bool { return errors.Is(err, broker.ErrReject) }
