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

// scriptCall is one caller's script in the queue.
type scriptCall struct {
	ctx    context.Context
	script *goredis.Script
	keys   []string
	args   []any
	cmd    *goredis.Cmd
	// lead, set under mu before wake closes, says this call sends the next
	// pipeline; otherwise wake closing means cmd is done.
	lead bool
	wake chan struct{}
}

// run runs script as Script.Run does, sharing a round trip with concurrent
// calls.
func (p *pipeline) run(ctx context.Context, script *goredis.Script, keys []string, args ...any) *goredis.Cmd {
	c := &scriptCall{ctx: ctx, script: script, keys: keys, args: args, wake: make(chan struct{})}
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
				cmd := goredis.NewCmd(ctx)
				cmd.SetErr(ctx.Err())
				return cmd
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
	if goredis.HasErrorPrefix(c.cmd.Err(), "NOSCRIPT") {
		// Redis does not hold the script yet (first use, or after a
		// restart): EVAL runs and caches it, as Script.Run's fallback does.
		return script.Eval(ctx, p.client, keys, args...)
	}
	return c.cmd
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
		c.cmd = p.client.EvalSha(ctx, c.script.Hash(), c.keys, c.args...)
	} else {
		pipe := p.client.Pipeline()
		for _, c := range batch {
			c.cmd = pipe.EvalSha(ctx, c.script.Hash(), c.keys, c.args...)
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
