package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/rune-org/rune/client"
	"github.com/rune-org/rune/embedded"
	"github.com/rune-org/rune/engine"
	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/workflow"
)

// runChildren starts the child executions of a `rune run` (the workflow
// node, issue 34) from the workflow files of a directory (--workflows):
// a waiting status asking for a child starts it, once, in this process,
// and its end is delivered to the parent. The files hold one version
// each: a node's "version" is not looked at. Without a directory, a child
// is refused (UNSUPPORTED_NODE) rather than waited for forever.
type runChildren struct {
	ctx  context.Context
	rt   *embedded.Runtime
	defs map[string]*engine.Workflow // by workflow id; nil: no --workflows
	log  *slog.Logger

	mu      sync.Mutex
	started map[string]bool
	wg      sync.WaitGroup
}

// loadWorkflowDir compiles every *.json file of dir that is a valid
// workflow, by workflow id; other files are skipped (a directory of
// examples holds payloads too). Two files of one id are an error.
func loadWorkflowDir(eng *engine.Engine, dir string) (map[string]*engine.Workflow, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, usagef("--workflows %s: %v", dir, err)
	}
	if _, err := os.Stat(dir); err != nil {
		return nil, usagef("--workflows: %v", err)
	}
	defs := map[string]*engine.Workflow{}
	from := map[string]string{}
	for _, p := range paths {
		raw, err := readFileLimited(p, workflow.MaxDefinitionSize)
		if err != nil {
			return nil, usagef("--workflows: %v", err)
		}
		wf, err := eng.Compile(raw)
		if err != nil {
			continue
		}
		if other, dup := from[wf.Def.ID]; dup {
			return nil, usagef("--workflows: %s and %s both define workflow %q", other, p, wf.Def.ID)
		}
		defs[wf.Def.ID], from[wf.Def.ID] = wf, p
	}
	return defs, nil
}

// follow returns the status callback of an execution whose workflow ids
// above it (itself included) are chain.
func (c *runChildren) follow(chain []string, then func(*message.NodeStatus)) func(*message.NodeStatus) {
	return func(st *message.NodeStatus) {
		if then != nil {
			then(st)
		}
		if st.Status != message.StatusWaiting || st.Child == nil {
			return
		}
		c.mu.Lock()
		seen := c.started[st.Child.ExecutionID]
		c.started[st.Child.ExecutionID] = true
		c.mu.Unlock()
		if !seen {
			c.wg.Go(func() { c.run(st, chain) })
		}
	}
}

// run runs the child st asks for and delivers its end.
func (c *runChildren) run(st *message.NodeStatus, chain []string) {
	req := st.Child
	refuse := func(code, msg string) {
		c.deliver(req, engine.ChildEnd{ExecutionID: req.ExecutionID, Status: message.CompletionFailed, FinalContext: map[string]any{},
			FailureReason: &message.Failure{Error: message.Error{Code: code, Message: msg}}})
	}
	wf, ok := c.defs[req.WorkflowID]
	switch {
	case c.defs == nil:
		refuse("UNSUPPORTED_NODE", fmt.Sprintf("node %q starts workflow %q: rune run starts child workflows only with --workflows DIR", st.NodeID, req.WorkflowID))
		return
	case len(chain) > engine.MaxChildDepth:
		refuse(engine.CodeChildDepth, fmt.Sprintf("node %q would start a child at depth %d; children nest at most %d deep", st.NodeID, len(chain), engine.MaxChildDepth))
		return
	case slices.Contains(chain, req.WorkflowID):
		refuse(engine.CodeChildCycle, fmt.Sprintf("node %q would start workflow %q, which is already running above it (%s)", st.NodeID, req.WorkflowID,
			strings.Join(append(slices.Clone(chain), req.WorkflowID), " → ")))
		return
	case !ok:
		refuse(engine.CodeChildNotFound, fmt.Sprintf("workflow %q is in no file of the --workflows directory", req.WorkflowID))
		return
	}
	comp, err := client.Run(c.ctx, c.rt.Broker, c.rt.Engine, wf, req.ExecutionID, req.Input, c.follow(append(slices.Clone(chain), req.WorkflowID), nil))
	if err != nil {
		if c.ctx.Err() == nil {
			refuse("START_REFUSED", fmt.Sprintf("child workflow %q: %v", req.WorkflowID, err))
		}
		return
	}
	status := comp.Status
	if status == message.CompletionHalted && comp.FailureReason != nil && comp.FailureReason.Code == engine.CodeCancelled {
		status = "cancelled"
	}
	c.deliver(req, engine.ChildEnd{ExecutionID: req.ExecutionID, Status: status, FinalContext: comp.FinalContext, FailureReason: comp.FailureReason})
}

func (c *runChildren) deliver(req *message.ChildStart, end engine.ChildEnd) {
	if !req.Wait {
		return
	}
	if err := c.rt.Engine.DeliverChild(c.ctx, req.Wake, end); err != nil && c.ctx.Err() == nil {
		c.log.Error("deliver the end of a child execution", "child", req.ExecutionID, "err", err)
	}
}
