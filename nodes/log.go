package nodes

import (
	"context"
	"encoding/json"
	"log/slog"

	"github.com/rune-org/rune/expr"
	"github.com/rune-org/rune/node"
	"github.com/rune-org/rune/workflow"
)

// logType writes a rendered message to the log.
type logType struct {
	logger *slog.Logger
}

var logLevels = map[string]slog.Level{
	"debug": slog.LevelDebug,
	"info":  slog.LevelInfo,
	"warn":  slog.LevelWarn,
	"error": slog.LevelError,
}

func (*logType) Check(c *workflow.NodeCheck) {
	p := node.CheckParams(c, "message", "level")
	if msg, ok := p.String("message", true); ok {
		p.Template("parameters.message", msg)
	}
	if lvl, ok := p.String("level", false); ok {
		if _, known := logLevels[lvl]; !known {
			c.Report("parameters.level", "unknown level %q (known: debug, info, warn, error)", lvl)
		}
	}
}

func (t *logType) Compile(n *workflow.Node, c *expr.Compiler) (node.Runner, error) {
	msg, _ := n.Parameters["message"].(string)
	v, err := c.Value(msg)
	if err != nil {
		return nil, node.CompileError(n, "message", err)
	}
	level, _ := n.Parameters["level"].(string)
	if level == "" {
		level = "info"
	}
	return &logRunner{logger: t.logger, message: v, level: level, slevel: logLevels[level]}, nil
}

type logRunner struct {
	logger  *slog.Logger
	message expr.Value
	level   string
	slevel  slog.Level
}

func (r *logRunner) Run(ctx context.Context, in *node.Input) (node.Result, error) {
	v, err := r.message.Eval(in.Env)
	if err != nil {
		return node.Result{}, node.ExprError("message", err)
	}
	msg, ok := v.(string)
	if !ok {
		// A message that is exactly one {{ }} may yield any JSON value.
		b, err := json.Marshal(v)
		if err != nil {
			return node.Result{}, node.InvalidParam("message", "cannot render %s as text", expr.TypeName(v))
		}
		msg = string(b)
	}
	switch {
	case r.logger == nil && in.Logger != nil:
		// The engine's logger carries the run's ids and lineage.
		in.Logger.LogAttrs(ctx, r.slevel, msg)
	default:
		logger := r.logger
		if logger == nil {
			logger = slog.Default()
		}
		logger.LogAttrs(ctx, r.slevel, msg,
			slog.String("execution_id", in.ExecutionID),
			slog.String("node_id", in.NodeID))
	}
	return node.Result{Output: map[string]any{"message": msg, "level": r.level}}, nil
}
