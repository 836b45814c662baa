package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/creack/pty"

	"github.com/rune-org/rune/message"
)

// screen is the little of a terminal the live table needs: printing with
// automatic wrap at the width, \r, \n, cursor up (CSI n A), erase line (CSI
// 2K, CSI K) and erase below (CSI J); colours are ignored. It records the
// rows where a wrap continued a line, which the table must never cause.
type screen struct {
	mu       sync.Mutex
	width    int
	lines    [][]rune
	row, col int
	wrapped  []int  // rows that a wrap continued onto
	esc      []byte // an escape sequence being read
	partial  []byte // an incomplete UTF-8 sequence
}

func (s *screen) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	data := append(s.partial, b...)
	s.partial = nil
	for len(data) > 0 {
		if s.esc != nil {
			c := data[0]
			data = data[1:]
			s.esc = append(s.esc, c)
			if len(s.esc) >= 2 && c >= 0x40 && c <= 0x7e && (len(s.esc) > 2 || c != '[') {
				s.control(string(s.esc[2:len(s.esc)-1]), c)
				s.esc = nil
			}
			continue
		}
		if !utf8.FullRune(data) {
			s.partial = append([]byte(nil), data...)
			break
		}
		r, n := utf8.DecodeRune(data)
		data = data[n:]
		switch r {
		case 0x1b:
			s.esc = []byte{0x1b}
		case '\r':
			s.col = 0
		case '\n':
			s.row++
		default:
			if s.col >= s.width {
				s.row, s.col = s.row+1, 0
				s.wrapped = append(s.wrapped, s.row)
			}
			s.line()
			for len(s.lines[s.row]) <= s.col {
				s.lines[s.row] = append(s.lines[s.row], ' ')
			}
			s.lines[s.row][s.col] = r
			s.col++
		}
	}
	return len(b), nil
}

func (s *screen) line() {
	for len(s.lines) <= s.row {
		s.lines = append(s.lines, nil)
	}
}

func (s *screen) control(params string, final byte) {
	n, err := strconv.Atoi(params)
	if err != nil {
		n = 0
	}
	switch final {
	case 'A':
		s.row = max(0, s.row-max(n, 1))
	case 'K':
		s.line()
		if n == 2 {
			s.lines[s.row] = nil
		} else if s.col < len(s.lines[s.row]) {
			s.lines[s.row] = s.lines[s.row][:s.col]
		}
	case 'J':
		s.line()
		if s.col < len(s.lines[s.row]) {
			s.lines[s.row] = s.lines[s.row][:s.col]
		}
		s.lines = s.lines[:s.row+1]
	}
}

// text is the screen's lines, trailing blanks trimmed.
func (s *screen) text() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.lines))
	for _, l := range s.lines {
		out = append(out, strings.TrimRight(string(l), " "))
	}
	for len(out) > 0 && out[len(out)-1] == "" {
		out = out[:len(out)-1]
	}
	return out
}

// rowOf returns the one line that starts a table row for node id (a
// prefix of it when cut), failing when there are several.
func rowOf(t *testing.T, lines []string, id string, idCols int) (string, bool) {
	t.Helper()
	prefix := cut(id, idCols)
	var found []string
	for _, l := range lines {
		if r := []rune(l); len(r) > 4 && strings.HasPrefix(string(r[4:]), prefix+" ") && strings.HasPrefix(l, "  ") {
			found = append(found, l)
		}
	}
	if len(found) > 1 {
		t.Fatalf("node %s has %d rows, want 1:\n%s", id, len(found), strings.Join(lines, "\n"))
	}
	if len(found) == 0 {
		return "", false
	}
	return found[0], true
}

// waitWorkflow is trigger → log → a wait of secs seconds → log, with a node
// id longer than a 40-column terminal can show.
func waitWorkflow(t *testing.T, secs int) string {
	t.Helper()
	wf := fmt.Sprintf(`{"id": "tty", "nodes": [
		{"id": "start", "type": "trigger", "trigger": true},
		{"id": "announce", "type": "log", "parameters": {"message": "waiting a while"}},
		{"id": "wait_for_the_approval_of_the_manager_on_duty", "type": "wait", "parameters": {"amount": %d, "unit": "seconds"}},
		{"id": "done", "type": "log", "parameters": {"message": "done"}}
	], "edges": [
		{"id": "e1", "src": "start", "dst": "announce"},
		{"id": "e2", "src": "announce", "dst": "wait_for_the_approval_of_the_manager_on_duty"},
		{"id": "e3", "src": "wait_for_the_approval_of_the_manager_on_duty", "dst": "done"}
	]}`, secs)
	path := filepath.Join(t.TempDir(), "tty.json")
	if err := os.WriteFile(path, []byte(wf), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestRunLiveTableInATerminal runs `rune run` with stderr on a
// pseudo-terminal of 40, 60 and 120 columns: while the wait waits, every
// node that ran has one row, current, cut to the width; nothing wraps; the
// log lines stay above the table; the wait's row says how long it waited.
func TestRunLiveTableInATerminal(t *testing.T) {
	t.Parallel()
	for _, cols := range []int{40, 60, 120} {
		t.Run(strconv.Itoa(cols), func(t *testing.T) {
			t.Parallel()
			ptmx, tty, err := pty.Open()
			if err != nil {
				if os.Getenv("CI") != "" {
					t.Fatalf("no pseudo-terminal: %v; CI must have one", err)
				}
				t.Skipf("no pseudo-terminal: %v", err)
			}
			defer ptmx.Close()
			if err := pty.Setsize(tty, &pty.Winsize{Rows: 50, Cols: uint16(cols)}); err != nil {
				t.Fatal(err)
			}
			scr := &screen{width: cols}
			copied := make(chan struct{})
			go func() {
				defer close(copied)
				buf := make([]byte, 4096)
				for {
					n, err := ptmx.Read(buf)
					scr.Write(buf[:n])
					if err != nil {
						return
					}
				}
			}()
			const wait = 3
			path := waitWorkflow(t, wait)
			var stdout bytes.Buffer
			env := &cliEnv{stdout: &stdout, stderr: tty, getenv: func(string) string { return "" }}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			code := make(chan int, 1)
			began := time.Now()
			go func() { code <- runMain(ctx, env, []string{"run", path}) }()

			ids := []string{"start", "announce", "wait_for_the_approval_of_the_manager_on_duty"}
			idCols := min(24, max(8, cols/3))
			var lines []string
			deadline := time.Now().Add(wait * time.Second)
			for {
				lines = scr.text()
				all := true
				for _, id := range ids {
					if _, ok := rowOf(t, lines, id, idCols); !ok {
						all = false
					}
				}
				r, _ := rowOf(t, lines, ids[2], idCols)
				if all && strings.Contains(r, "waiting") {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("after %s, while the wait waits, the table lacks a row:\n%s", time.Since(began), strings.Join(lines, "\n"))
				}
				time.Sleep(20 * time.Millisecond)
			}
			if len(code) > 0 || time.Since(began) >= wait*time.Second {
				t.Fatalf("the rows appeared only after the wait (%s)", time.Since(began))
			}
			if r, _ := rowOf(t, lines, ids[2], idCols); !strings.Contains(r, "◷") || (cols >= 60 && !strings.Contains(r, "3s, until")) {
				t.Errorf("the wait's row: %q", r)
			}
			if c := <-code; c != 0 {
				t.Fatalf("exit %d; screen:\n%s", c, strings.Join(scr.text(), "\n"))
			}
			tty.Close()
			<-copied
			lines = scr.text()
			// Log lines above the table may wrap; the table's rows may not.
			table := len(lines)
			for i, l := range lines {
				if strings.HasPrefix(l, "  ") {
					table = min(table, i)
				}
			}
			for i, l := range lines[table:] {
				if n := utf8.RuneCountInString(l); n >= cols {
					t.Errorf("row of %d columns in a %d-column terminal: %q", n, cols, l)
				}
				if slices.Contains(scr.wrapped, table+i) {
					t.Errorf("row %q wrapped", l)
				}
			}
			for _, id := range append(ids, "done") {
				r, ok := rowOf(t, lines, id, idCols)
				if !ok || !strings.Contains(r, "✔") {
					t.Errorf("node %s: row %q, want one success row", id, r)
				}
			}
			if r, _ := rowOf(t, lines, ids[2], idCols); cols >= 60 && !strings.Contains(r, "waited 3") {
				t.Errorf("the wait's final row %q does not say it waited 3 s", r)
			}
			// The log lines are above the table, whole.
			first := -1
			for i, l := range lines {
				if strings.HasPrefix(l, "  ") && first < 0 {
					first = i
				}
				if strings.Contains(l, "msg=") && first >= 0 {
					t.Errorf("a log line below the table's first row: %q\n%s", l, strings.Join(lines, "\n"))
				}
			}
			if !strings.Contains(strings.Join(lines, ""), `msg="waiting a while"`) {
				t.Errorf("the log node's line is missing:\n%s", strings.Join(lines, "\n"))
			}
			if n := strings.Count(stdout.String(), " completed in "); n != 1 {
				t.Errorf("the completion is reported %d times on stdout:\n%s", n, stdout.String())
			}
			if strings.Contains(strings.Join(lines, "\n"), "completed in") {
				t.Errorf("the completion is reported on the terminal too:\n%s", strings.Join(lines, "\n"))
			}
		})
	}
}

// TestProgressDrawsHeldBackStatuses: a status that comes within the rate
// limit of the last redraw is drawn when the limit passes, without any
// later status to carry it.
func TestProgressDrawsHeldBackStatuses(t *testing.T) {
	t.Parallel()
	scr := &screen{width: 80}
	p := &progress{w: scr, live: true, width: func() int { return 80 }, start: time.Now(), nodes: map[string]*nodeProgress{}}
	p.status(&message.NodeStatus{NodeID: "a", Status: message.StatusSuccess})
	p.status(&message.NodeStatus{NodeID: "b", Status: message.StatusRunning})
	deadline := time.Now().Add(10 * time.Second)
	for {
		lines := scr.text()
		if r, ok := rowOf(t, lines, "b", 8); ok && strings.Contains(r, "running") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the held-back status was never drawn:\n%s", strings.Join(lines, "\n"))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestProgressPlainWhenNotATerminal: on a file or pipe each status is one
// plain line, without escape sequences, and a wait's success says how long
// it waited.
func TestProgressPlainWhenNotATerminal(t *testing.T) {
	t.Parallel()
	f, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p := newProgress(f, false)
	if p.live {
		t.Fatal("a regular file is taken for a terminal")
	}
	t0 := time.Now()
	resume := t0.Add(2 * time.Second)
	p.status(&message.NodeStatus{NodeID: "pause", Status: message.StatusWaiting, ExecutedAt: t0, ResumeAt: &resume})
	p.status(&message.NodeStatus{NodeID: "pause", Status: message.StatusSuccess, ExecutedAt: resume.Add(3 * time.Millisecond)})
	p.finish(nil)
	out, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	if bytes.ContainsRune(out, 0x1b) {
		t.Errorf("escape sequences in plain output: %q", out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "waiting   2s, until") || !strings.HasSuffix(lines[1], "success   waited 2s") {
		t.Errorf("plain lines:\n%s", out)
	}
	if _, err := p.Write([]byte("a log line\n")); err != nil || errors.Is(err, os.ErrClosed) {
		t.Fatal(err)
	}
}
