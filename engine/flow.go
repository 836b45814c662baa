package engine

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/rune-org/rune/coord"
	"github.com/rune-org/rune/expr"
	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/node"
	"github.com/rune-org/rune/workflow"
)

// Flow control by key on a node (issues 35 and 36): before a node with a
// rate_limit or a throttle runs, the coordinator's Limiter says whether it
// may start now. A rate-limited run reserves the next start slot of its key
// (coord.Limiter.Reserve: GCRA) and, when the slot is ahead, is deferred to
// it (defer.go); a throttled run over its window's limit is skipped with
// {"sent": false, "reason": "THROTTLED"} or, with "on_limit": "wait",
// deferred until the window has room.

// flowControl is a node's compiled rate_limit and throttle.
type flowControl struct {
	rateKey  expr.Value // nil: no rate limit
	rate     coord.Rate
	thrKey   expr.Value // nil: no throttle
	throttle coord.Rate
	wait     bool // throttle's on_limit is wait
}

// Throttled is the output of a node a throttle kept from running.
func Throttled() map[string]any {
	return map[string]any{"sent": false, "reason": message.ReasonThrottled}
}

// maxInlineDefer is the longest a worker waits for a slot in hand rather
// than defer the run to the timer store: shorter than a scheduler's round
// trip, and longer than the clocks of workers and schedulers may disagree
// (a run coming back from the timer store finds its slot within it).
const maxInlineDefer = 200 * time.Millisecond

// compileFlow compiles the flow control of wf's nodes.
func (wf *Workflow) compileFlow(c *expr.Compiler) error {
	var ps workflow.Problems
	for i := range wf.Def.Nodes {
		n := &wf.Def.Nodes[i]
		if n.RateLimit == nil && n.Throttle == nil {
			continue
		}
		p := fmt.Sprintf("nodes[%d]", i)
		fc := &flowControl{}
		var err error
		if r := n.RateLimit; r != nil {
			if fc.rateKey, err = c.Value(r.Key); err != nil {
				ps = append(ps, workflow.Problem{Path: p + ".rate_limit.key", Message: err.Error()})
			}
			fc.rate = coord.Rate{Limit: r.Limit, Per: workflow.FlowPer(r.Per), Burst: r.Burst}
		}
		if t := n.Throttle; t != nil {
			_, router := wf.runners[n.ID].(node.Router)
			if router || n.Type == "split" {
				// Skipped, it would have no route to follow nor items to
				// fan out.
				ps = append(ps, workflow.Problem{Path: p + ".throttle", Message: fmt.Sprintf("a %s node chooses where its branch goes and cannot be throttled; throttle the node after it", n.Type)})
				continue
			}
			if fc.thrKey, err = c.Value(t.Key); err != nil {
				ps = append(ps, workflow.Problem{Path: p + ".throttle.key", Message: err.Error()})
			}
			fc.throttle = coord.Rate{Limit: t.Limit, Per: workflow.FlowPer(t.Per)}
			fc.wait = t.OnLimit == workflow.OnLimitWait
		}
		if wf.flow == nil {
			wf.flow = map[string]*flowControl{}
		}
		wf.flow[n.ID] = fc
	}
	if len(ps) > 0 {
		return ps
	}
	return nil
}

// holdBack applies the node's flow control before it runs. held says the
// step is over: the run was deferred, skipped by its throttle, or failed
// (its key could not be evaluated); otherwise the node runs now.
func (s *step) holdBack(ctx context.Context, fc *flowControl) (held bool, err error) {
	fail := func(code, format string, args ...any) (bool, error) {
		now := s.e.cfg.Now()
		return true, s.settle(ctx, &record{StartedAt: now, FinishedAt: now,
			Err: &message.Error{Code: code, Message: fmt.Sprintf(format, args...)}}, unverified{})
	}
	if s.e.cfg.Limiter == nil {
		return fail("UNSUPPORTED_NODE", "node %q has a rate_limit or throttle, but this runtime has no limiter", s.node.ID)
	}
	acc, err := s.e.resolve(ctx, s.m.ExecutionID, s.m.AccumulatedContext, nil)
	var ie *infraError
	if errors.As(err, &ie) {
		return true, err
	}
	if err != nil {
		return fail("CONTEXT_REFERENCE", "%v", err)
	}
	env := s.env(acc, s.e.cfg.Now())
	if fc.thrKey != nil {
		key, err := flowKey(fc.thrKey, env)
		if err != nil {
			return fail(node.CodeInvalidParameter, "node %q: throttle.key: %v", s.node.ID, err)
		}
		for {
			now := s.e.cfg.Now()
			a, err := s.e.cfg.Limiter.Admit(ctx, key, s.idempotencyKey(), fc.throttle, now)
			if err != nil {
				return true, fmt.Errorf("engine: throttle of message %s: %w", s.m.MessageID, err)
			}
			if a.OK {
				break
			}
			if !fc.wait {
				s.e.cfg.Metrics.NodeDeferred(s.m.WorkflowID, "THROTTLED_SKIPPED", 0)
				return true, s.settle(ctx, &record{Output: Throttled(), StartedAt: now, FinishedAt: now}, unverified{})
			}
			if a.RetryAt.Sub(now) > maxInlineDefer {
				return true, s.deferRun(ctx, a.RetryAt, message.ReasonThrottled)
			}
			if err := sleepUntil(ctx, a.RetryAt, now); err != nil {
				return true, err
			}
		}
	}
	if fc.rateKey != nil {
		key, err := flowKey(fc.rateKey, env)
		if err != nil {
			return fail(node.CodeInvalidParameter, "node %q: rate_limit.key: %v", s.node.ID, err)
		}
		now := s.e.cfg.Now()
		// One slot per run: a retry is a run of its own (its own
		// message id), a redelivery or a deferred run coming back is not.
		start, err := s.e.cfg.Limiter.Reserve(ctx, key, s.m.MessageID, fc.rate, now)
		if err != nil {
			return true, fmt.Errorf("engine: rate limit of message %s: %w", s.m.MessageID, err)
		}
		if start.Sub(now) > maxInlineDefer {
			return true, s.deferRun(ctx, start, message.ReasonRateLimited)
		}
		if err := sleepUntil(ctx, start, now); err != nil {
			return true, err
		}
		return s.startWindow(ctx, key, fc.rate)
	}
	return false, nil
}

// startWindow keeps a rate-limited run from starting while its key's last
// window of Per already holds Limit starts: a run whose slot passed while
// it waited for a worker or a scheduler (a stall, a backlog) would
// otherwise start together with the runs of the slots after it. The starts
// are counted as a throttle's (coord.Limiter.Admit) under a key of their
// own; a limit above coord.MaxThrottleLimit is not checked so (the GCRA
// alone spaces its runs).
func (s *step) startWindow(ctx context.Context, key string, r coord.Rate) (held bool, err error) {
	if r.Limit > coord.MaxThrottleLimit {
		return false, nil
	}
	for {
		now := s.e.cfg.Now()
		a, err := s.e.cfg.Limiter.Admit(ctx, startsKey+key, s.m.MessageID, coord.Rate{Limit: r.Limit, Per: r.Per}, now)
		if err != nil {
			return true, fmt.Errorf("engine: rate limit of message %s: %w", s.m.MessageID, err)
		}
		if a.OK {
			return false, nil
		}
		if a.RetryAt.Sub(now) > maxInlineDefer {
			return true, s.deferRun(ctx, a.RetryAt, message.ReasonRateLimited)
		}
		if err := sleepUntil(ctx, a.RetryAt, now); err != nil {
			return true, err
		}
	}
}

// startsKey starts the throttle key under which a rate limit's starts are
// counted: no key a template gives starts with a NUL.
const startsKey = "\x00starts\x00"

// flowKey evaluates a rate_limit's or throttle's key.
func flowKey(v expr.Value, env map[string]any) (string, error) {
	k, err := v.Eval(env)
	if err != nil {
		return "", err
	}
	var s string
	switch x := k.(type) {
	case string:
		s = x
	case float64:
		s = strconv.FormatFloat(x, 'f', -1, 64)
	case bool:
		s = strconv.FormatBool(x)
	default:
		return "", fmt.Errorf("want a string, got %s", expr.TypeName(k))
	}
	switch {
	case s == "":
		return "", errors.New("the key is empty")
	case len(s) > workflow.MaxFlowKey:
		return "", fmt.Errorf("the key is %d bytes, longer than %d", len(s), workflow.MaxFlowKey)
	}
	return s, nil
}

// sleepUntil waits until t (at most maxInlineDefer from now) or ctx's end.
func sleepUntil(ctx context.Context, t, now time.Time) error {
	d := t.Sub(now)
	if d <= 0 {
		return nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}
