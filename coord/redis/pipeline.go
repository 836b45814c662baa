package redis

import (
	"context"
	"slices"
	"sync"

	goredis "github.com/redis/go-redis/v9"
)

// maxPipeline bounds the scripts of one pipeline, so that a queue that grew
// behind a slow reply does not become one very long reply.
const maxPipeline = 128

// pipeline sends the scripts that concurrent callers run as one Redis
// pipeline: one write and one read for many scripts, where each script on its
// own costs a write and a read on both sides (most of a worker's time in
// Finish went to those system calls). A call made while no pipeline is out
// goes at once, alone, so an idle caller waits no longer than before; calls
// made while one is out queue, and the first of them sends the queue when
// that one returns. No goroutine of its own: a caller sends.
//
// Each script still runs atomically and once per call, as Script.Run would
// run it; a pipeline only shares the round trip. A network failure fails
// every call of its pipeline, as it would fail each call on its own.
type pipeline struct {
	client goredis.UniversalClient

	mu    sync.Mutex
	busy  bool // a caller is sending; queue is empty when it is not
	queue []*scriptCall
}

// scriptCall is one caller's script, or plain command, in the queue.
type scriptCall struct {
	ctx    context.Context
	script *goredis.Script // nil: plain is the command
	keys   []string
	args   []any
	cmd    *goredis.Cmd
	plain  goredis.Cmder
	// lead, set under mu before wake closes, says this call sends the next
	// pipeline; otherwise wake closing means cmd is done.
	lead bool
	wake chan struct{}
}

// run runs script as Script.Run does, sharing a round trip with concurrent
// calls.
func (p *pipeline) run(ctx context.Context, script *goredis.Script, keys []string, args ...any) *goredis.Cmd {
	c := &scriptCall{ctx: ctx, script: script, keys: keys, args: args, wake: make(chan struct{})}
	if !p.queued(c) {
		cmd := goredis.NewCmd(ctx)
		cmd.SetErr(ctx.Err())
		return cmd
	}
	if goredis.HasErrorPrefix(c.cmd.Err(), "NOSCRIPT") {
		// Redis does not hold the script yet (first use, or after a
		// restart): EVAL runs and caches it, as Script.Run's fallback does.
		return script.Eval(ctx, p.client, keys, args...)
	}
	return c.cmd
}

// process runs cmd, a plain command (a read such as EXISTS or HGET),
// sharing a round trip with concurrent calls, and returns its error.
func (p *pipeline) process(ctx context.Context, cmd goredis.Cmder) error {
	c := &scriptCall{ctx: ctx, plain: cmd, wake: make(chan struct{})}
	if !p.queued(c) {
		cmd.SetErr(ctx.Err())
	}
	return cmd.Err()
}

// queued sends c, alone or in a pipeline, and returns once it is done; false
// when ctx ended while c was still queued (it was never sent).
func (p *pipeline) queued(c *scriptCall) bool {
	ctx := c.ctx
	p.mu.Lock()
	p.queue = append(p.queue, c)
	if !p.busy {
		p.busy = true
		p.mu.Unlock()
		p.send()
	} else {
		p.mu.Unlock()
		select {
		case <-c.wake:
		case <-ctx.Done():
			p.mu.Lock()
			if i := slices.Index(p.queue, c); i >= 0 && !c.lead {
				p.queue = slices.Delete(p.queue, i, i+1)
				p.mu.Unlock()
				return false
			}
			p.mu.Unlock()
			// Already sent, or chosen to send: it must go on, and the
			// client's timeouts bound the wait.
			<-c.wake
		}
		if c.lead {
			p.send()
		}
	}
	return true
}

// send sends the head of the queue, whose first call is the caller's, then
// wakes its calls and hands the sending on to the next queued call, if any.
func (p *pipeline) send() {
	p.mu.Lock()
	n := min(len(p.queue), maxPipeline)
	batch := p.queue[:n:n]
	p.queue = slices.Clone(p.queue[n:])
	p.mu.Unlock()

	// The first caller's cancellation must not fail the others' scripts.
	ctx := context.WithoutCancel(batch[0].ctx)
	if n == 1 {
		c := batch[0]
		if c.script == nil {
			_ = p.client.Process(ctx, c.plain) // the cmd holds its error
		} else {
			c.cmd = p.client.EvalSha(ctx, c.script.Hash(), c.keys, c.args...)
		}
	} else {
		pipe := p.client.Pipeline()
		for _, c := range batch {
			if c.script == nil {
				_ = pipe.Process(ctx, c.plain)
			} else {
				c.cmd = pipe.EvalSha(ctx, c.script.Hash(), c.keys, c.args...)
			}
		}
		_, _ = pipe.Exec(ctx) // each cmd holds its own error
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range batch[1:] {
		close(c.wake)
	}
	if len(p.queue) == 0 {
		p.busy = false
		return
	}
	next := p.queue[0]
	next.lead = true
	close(next.wake)
}
