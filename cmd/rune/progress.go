package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rune-org/rune/message"
)

// progress shows node statuses on stderr as they happen: one line per status
// when stderr is a file or pipe, a live table redrawn in place on a terminal.
type progress struct {
	w     io.Writer
	quiet bool
	live  bool
	start time.Time

	mu    sync.Mutex
	order []string
	nodes map[string]*nodeProgress
	drawn int // lines drawn by the last redraw
	last  time.Time
}

type nodeProgress struct {
	status string
	detail string
	counts map[string]int // statuses seen, for nodes that run once per split item
}

func newProgress(w io.Writer, quiet bool) *progress {
	return &progress{w: w, quiet: quiet, live: isTerminal(w), start: time.Now(), nodes: map[string]*nodeProgress{}}
}

// status records one status; it is safe to call from any goroutine.
func (p *progress) status(s *message.NodeStatus) {
	if p.quiet {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	np := p.nodes[s.NodeID]
	if np == nil {
		np = &nodeProgress{counts: map[string]int{}}
		p.nodes[s.NodeID] = np
		p.order = append(p.order, s.NodeID)
	}
	np.status, np.detail = s.Status, describe(s)
	np.counts[s.Status]++
	if !p.live {
		fmt.Fprintf(p.w, "%8.3fs  %-24s %-9s %s\n", time.Since(p.start).Seconds(), nodeLabel(s), s.Status, np.detail)
		return
	}
	// Redraw at most 20 times a second: a split may report thousands of statuses.
	if time.Since(p.last) >= 50*time.Millisecond {
		p.redraw()
	}
}

// finish draws the final table and a summary line.
func (p *progress) finish(c *message.Completion) {
	if p.quiet {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.live {
		p.redraw()
	}
	if c != nil {
		fmt.Fprintf(p.w, "%s %s in %s\n", c.ExecutionID, c.Status, time.Duration(c.TotalDurationMS)*time.Millisecond)
	}
}

func (p *progress) redraw() {
	p.last = time.Now()
	var b strings.Builder
	if p.drawn > 0 {
		fmt.Fprintf(&b, "\x1b[%dA", p.drawn) // back to the top of the table
	}
	for _, id := range p.order {
		np := p.nodes[id]
		fmt.Fprintf(&b, "\x1b[2K  %s %-24s %-9s %s%s\n", symbol(np.status), id, np.status, np.detail, counts(np.counts))
	}
	p.drawn = len(p.order)
	io.WriteString(p.w, b.String())
}

func symbol(status string) string {
	switch status {
	case message.StatusSuccess:
		return "\x1b[32m✔\x1b[0m"
	case message.StatusFailed:
		return "\x1b[31m✘\x1b[0m"
	case message.StatusRunning:
		return "\x1b[36m…\x1b[0m"
	case message.StatusRetrying, message.StatusWaiting:
		return "\x1b[33m◷\x1b[0m"
	}
	return "·"
}

// counts summarises a node that ran more than once (inside a split).
func counts(c map[string]int) string {
	total := 0
	for _, n := range c {
		total += n
	}
	if c[message.StatusRunning] <= 1 {
		return ""
	}
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, c[k])
	}
	return " [" + strings.Join(parts, ", ") + "]"
}

func nodeLabel(s *message.NodeStatus) string {
	if n := len(s.LineageStack); n > 0 {
		return fmt.Sprintf("%s[%d]", s.NodeID, s.LineageStack[n-1].ItemIndex)
	}
	return s.NodeID
}

// describe is the detail shown after a status.
func describe(s *message.NodeStatus) string {
	switch s.Status {
	case message.StatusSuccess:
		return fmt.Sprintf("%d ms", s.DurationMS)
	case message.StatusFailed:
		if s.Error != nil {
			return s.Error.Code + ": " + s.Error.Message
		}
	case message.StatusRetrying:
		msg := fmt.Sprintf("attempt %d failed", s.Attempt)
		if s.Error != nil {
			msg += " (" + s.Error.Code + ")"
		}
		if s.NextAttemptAt != nil {
			msg += fmt.Sprintf("; next attempt in %s", time.Until(*s.NextAttemptAt).Round(100*time.Millisecond))
		}
		return msg
	case message.StatusWaiting:
		if s.ResumeAt != nil {
			return "until " + s.ResumeAt.Format(time.RFC3339)
		}
		if d := s.Details; d != nil {
			if t, ok := d["total"]; ok {
				return fmt.Sprintf("%v/%v processed", d["processed"], t)
			}
			if e, ok := d["expected"]; ok {
				return fmt.Sprintf("%v/%v arrived", d["arrived"], e)
			}
		}
	}
	return ""
}
