package main

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/rune-org/rune/message"
)

// redrawEvery bounds how often the live table is redrawn: a split may report
// thousands of statuses a second.
const redrawEvery = 50 * time.Millisecond

// progress shows node statuses on stderr as they happen: one line per status
// when stderr is a file or pipe (plain mode), a live table redrawn in place
// on a terminal. The table is always current: a redraw that the rate limit
// holds back is drawn when the limit passes. Its rows are cut to the
// terminal's width, never wrapped, so that redrawing in place stays exact.
type progress struct {
	w     io.Writer
	quiet bool
	live  bool
	// width returns the terminal's columns (0: unknown).
	width func() int
	start time.Time

	mu      sync.Mutex
	order   []string
	nodes   map[string]*nodeProgress
	drawn   int // lines drawn by the last redraw
	last    time.Time
	pending *time.Timer // a redraw held back by the rate limit
	done    bool
}

type nodeProgress struct {
	status string
	detail string
	counts map[string]int // statuses seen, for nodes that run once per split item
	// waitingSince is when a wait or delay started waiting: its success
	// shows how long it waited, not the instant its resumption took.
	waitingSince time.Time
}

func newProgress(w io.Writer, quiet bool) *progress {
	p := &progress{w: w, quiet: quiet, start: time.Now(), nodes: map[string]*nodeProgress{}}
	if f, ok := w.(*os.File); ok && isTerminal(f) {
		p.live = true
		p.width = func() int { return terminalWidth(f) }
	}
	return p
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
	if s.Status == message.StatusWaiting && s.ResumeAt != nil && np.waitingSince.IsZero() {
		np.waitingSince = at(s)
	}
	np.status, np.detail = s.Status, describe(s, np.waitingSince)
	if s.Status != message.StatusWaiting && s.Status != message.StatusRunning {
		np.waitingSince = time.Time{}
	}
	np.counts[s.Status]++
	if !p.live {
		fmt.Fprintf(p.w, "%8.3fs  %-24s %-9s %s\n", time.Since(p.start).Seconds(), nodeLabel(s), s.Status, np.detail)
		return
	}
	p.schedule()
}

// schedule redraws now, or when the rate limit passes if a redraw was
// drawn less than redrawEvery ago. Called with mu held.
func (p *progress) schedule() {
	if p.pending != nil || p.done {
		return // the pending redraw will show this status too
	}
	if wait := redrawEvery - time.Since(p.last); wait > 0 {
		p.pending = time.AfterFunc(wait, func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			p.pending = nil
			if !p.done {
				p.redraw()
			}
		})
		return
	}
	p.redraw()
}

// report ends an execution's table (finish) and reports how it ended: err
// (the execution was not followed to its end), or its completion
// (reportCompletion; asJSON: as is).
func (p *progress) report(env *cliEnv, comp *message.Completion, err error, asJSON bool) error {
	p.finish(comp)
	if err != nil {
		return err
	}
	return reportCompletion(env, comp, asJSON)
}

// finish draws the final table. The completion itself is reported once, by
// reportCompletion.
func (p *progress) finish(*message.Completion) {
	if p.quiet {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pending != nil {
		p.pending.Stop()
		p.pending = nil
	}
	if p.live && !p.done {
		p.redraw()
	}
	p.done = true
}

// Write writes log lines: on a terminal above the live table, which is then
// drawn again below them, so that logs and the table never overwrite each
// other. It is safe to call from any goroutine.
func (p *progress) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.live || p.drawn == 0 || p.done {
		return p.w.Write(b)
	}
	// Up to the table's first line, erase it and everything below.
	if _, err := fmt.Fprintf(p.w, "\x1b[%dA\r\x1b[J", p.drawn); err != nil {
		return 0, err
	}
	p.drawn = 0
	n, err := p.w.Write(b)
	if err == nil && p.pending == nil {
		p.redraw()
	}
	return n, err
}

func (p *progress) redraw() {
	p.last = time.Now()
	width := 0
	if p.width != nil {
		width = p.width()
	}
	if width <= 0 {
		width = 80
	}
	idw := 0
	for _, id := range p.order {
		idw = max(idw, utf8.RuneCountInString(id))
	}
	// The id column takes at most a third of a narrow terminal.
	idw = min(idw, 24, max(8, width/3))
	var b strings.Builder
	if p.drawn > 0 {
		fmt.Fprintf(&b, "\x1b[%dA", p.drawn) // back to the top of the table
	}
	for _, id := range p.order {
		np := p.nodes[id]
		// One column is left free: a character in the last column makes
		// some terminals wrap on the next one.
		text := fmt.Sprintf("%s %-9s %s%s", pad(id, idw), np.status, np.detail, counts(np.counts))
		fmt.Fprintf(&b, "\r\x1b[2K  %s %s\n", symbol(np.status), cut(text, width-5))
	}
	p.drawn = len(p.order)
	io.WriteString(p.w, b.String())
}

// pad cuts or pads s to exactly n columns.
func pad(s string, n int) string {
	s = cut(s, n)
	return s + strings.Repeat(" ", n-utf8.RuneCountInString(s))
}

// cut shortens s to at most n columns, ending it with "…" when cut.
func cut(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
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

// at is when a status happened: its executed_at, or now when it has none.
func at(s *message.NodeStatus) time.Time {
	if s.ExecutedAt.IsZero() {
		return time.Now()
	}
	return s.ExecutedAt
}

// describe is the detail shown after a status. waitingSince, when set, is
// when the node started waiting for its timer.
func describe(s *message.NodeStatus, waitingSince time.Time) string {
	switch s.Status {
	case message.StatusSuccess:
		if !waitingSince.IsZero() {
			end := at(s).Add(time.Duration(s.DurationMS) * time.Millisecond)
			return "waited " + roundDuration(end.Sub(waitingSince)).String()
		}
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
			return fmt.Sprintf("%s, until %s", roundDuration(s.ResumeAt.Sub(at(s))), s.ResumeAt.Local().Format(time.TimeOnly))
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

// roundDuration keeps a duration readable: tenths of a second, whole
// seconds past a minute.
func roundDuration(d time.Duration) time.Duration {
	if d < 0 {
		return 0
	}
	if d >= time.Minute {
		return d.Round(time.Second)
	}
	return d.Round(100 * time.Millisecond)
}

// isTerminal reports whether f is a terminal.
func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// terminalWidth is f's width in columns, 0 when unknown.
func terminalWidth(f *os.File) int {
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil {
		return 0
	}
	return int(ws.Col)
}
