package store

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rune-org/rune/message"
)

// The history rules: how statuses change node runs and how a batch of events
// changes an execution. Both implementations load what a batch touches, call
// ApplyBatch inside their transaction and write back what it returns, so the
// rules exist once.

// BranchKey is the stable key of the branch a lineage stack names: its frames
// as "split:item" joined by "/" ("" outside every split), e.g.
// "split_users:5/split_orders:2".
func BranchKey(lineage []message.Frame) string {
	if len(lineage) == 0 {
		return ""
	}
	var b strings.Builder
	for i, f := range lineage {
		if i > 0 {
			b.WriteByte('/')
		}
		b.WriteString(f.SplitNodeID)
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(f.ItemIndex))
	}
	return b.String()
}

// RunKey identifies a node run: one node on one branch of one execution.
type RunKey struct {
	ExecutionID, NodeID, Branch string
}

// Key returns r's RunKey.
func (r *NodeRun) Key() RunKey { return RunKey{r.ExecutionID, r.NodeID, r.Branch} }

// StatusRunKey returns the RunKey a status updates.
func StatusRunKey(st *message.NodeStatus) RunKey {
	return RunKey{st.ExecutionID, st.NodeID, BranchKey(st.LineageStack)}
}

// rank orders the statuses of one attempt: running, then waiting, then the
// attempt's end (success, failed, skipped, or retrying: the next attempt
// follows).
func rank(status string) int {
	switch status {
	case "":
		return -1
	case message.StatusRunning:
		return 0
	case message.StatusWaiting:
		return 1
	case message.StatusPaused:
		// Issue 34: after waiting (a wait's timer came due while paused);
		// a parked node's running status after its resume is then not
		// shown, its end is.
		return 2
	}
	return 3
}

// finished reports whether a run in status s is over (retrying is not: the
// next attempt follows).
func finished(s string) bool {
	return s == message.StatusSuccess || s == message.StatusFailed || s == message.StatusSkipped
}

// barrierProgress reports whether st is a merge's or aggregator's progress
// report: a waiting status with Details and no resume time. The engine sends
// it on behalf of each arriving branch, with that branch's attempt, so its
// attempt says nothing about the barrier node's own attempts.
func barrierProgress(st *message.NodeStatus) bool {
	return st.Status == message.StatusWaiting && st.ResumeAt == nil && len(st.Details) > 0
}

// ApplyStatus applies st to run and reports whether it changed anything.
// A new run is the zero NodeRun (its key fields are filled in here).
//
// A run failed with code DEAD_LETTERED (its message was dead-lettered)
// takes any later status of its attempt or a later one that is not itself
// a dead letter: the message was replayed (`rune dlq replay`) and runs again.
//
// Statuses never regress: a run's statuses are ordered by (attempt, rank)
// with rank running < waiting < final (success, failed, skipped, retrying),
// and a status not after the run's current one changes nothing (a duplicate,
// a late running after success, a second final of one attempt), except a
// waiting status with new Details (barrier progress), which updates them.
// Barrier progress belongs to no attempt: it applies while the run has not
// yet started (or is still waiting), never after.
//
// Times: StartedAt comes from the first running status (or, for a run first
// reported finished, its time less its duration); FinishedAt and DurationMS
// from the final status; NextAttemptAt from retrying and ResumeAt from
// waiting statuses (both kept once the run moves on, as history).
func ApplyStatus(run *NodeRun, st *message.NodeStatus) bool {
	attempt := max(st.Attempt, 1)
	if barrierProgress(st) {
		if run.Status != "" && run.Status != message.StatusWaiting {
			return false
		}
		details := marshalJSON(st.Details)
		if run.Status == message.StatusWaiting && (bytes.Equal(details, run.Details) || st.ExecutedAt.Before(run.ReportedAt)) {
			return false
		}
		fillKey(run, st)
		run.Status = message.StatusWaiting // Attempt stays 0 until the node runs
		run.Details = details
		run.ReportedAt = st.ExecutedAt
		if run.StartedAt == nil {
			run.StartedAt = timePtr(st.ExecutedAt)
		}
		return true
	}
	replayed := deadLetteredRun(run) && !st.DeadLetter() && attempt >= run.Attempt
	if replayed {
		// Its message was replayed from the dead-letter queue: the run
		// starts again with the same attempt.
		run.StartedAt, run.FinishedAt, run.Error = nil, nil, nil
	} else if run.Status != "" {
		cur, next := [2]int{run.Attempt, rank(run.Status)}, [2]int{attempt, rank(st.Status)}
		if next[0] < cur[0] || next[0] == cur[0] && next[1] < cur[1] {
			return false
		}
		if next == cur {
			// A later waiting of the same attempt may carry new details or
			// a new resume time; anything else equal is a duplicate.
			if st.Status != message.StatusWaiting || run.Status != message.StatusWaiting || st.ExecutedAt.Before(run.ReportedAt) {
				return false
			}
			details := marshalJSON(st.Details)
			if bytes.Equal(details, run.Details) && equalTime(run.ResumeAt, st.ResumeAt) {
				return false
			}
		}
	}
	fillKey(run, st)
	newAttempt := attempt != run.Attempt
	run.Status = st.Status
	run.Attempt = attempt
	run.ReportedAt = st.ExecutedAt
	if newAttempt {
		run.FinishedAt = nil
	}
	switch st.Status {
	case message.StatusRunning:
		if run.StartedAt == nil {
			run.StartedAt = timePtr(st.ExecutedAt)
		}
	case message.StatusWaiting:
		if st.ResumeAt != nil {
			run.ResumeAt = timePtr(*st.ResumeAt)
		}
		if st.Details != nil {
			run.Details = marshalJSON(st.Details)
		}
		if st.Reason != "" { // a deferred run (issue 35): see RunReason
			run.Details = marshalJSON(map[string]any{"reason": st.Reason})
		}
	default: // success, failed, skipped, retrying
		if run.StartedAt == nil {
			run.StartedAt = timePtr(st.ExecutedAt.Add(-time.Duration(st.DurationMS) * time.Millisecond))
		}
		run.DurationMS = st.DurationMS
		run.Output = marshalJSON(st.Output)
		run.Error = nil
		if st.Error != nil {
			run.Error = marshalJSON(st.Error)
		}
		if st.Status == message.StatusRetrying {
			if st.NextAttemptAt != nil {
				run.NextAttemptAt = timePtr(*st.NextAttemptAt)
			}
		} else {
			run.FinishedAt = timePtr(st.ExecutedAt)
		}
	}
	return true
}

// deadLettered is the pseudo-status under which Execution.Unfinished counts
// a node run whose message was dead-lettered: not finished (a replay runs
// it again), yet not running either. It is never a run's Status.
const deadLettered = "dead_lettered"

// deadLetteredRun reports whether run ended with its message dead-lettered.
func deadLetteredRun(run *NodeRun) bool {
	if run.Status != message.StatusFailed || !bytes.Contains(run.Error, []byte(message.CodeDeadLettered)) {
		return false
	}
	var e message.Error
	return json.Unmarshal(run.Error, &e) == nil && e.Code == message.CodeDeadLettered
}

// runState is the state under which Unfinished counts run: its status, or
// deadLettered.
func runState(run *NodeRun) string {
	if deadLetteredRun(run) {
		return deadLettered
	}
	return run.Status
}

func fillKey(run *NodeRun, st *message.NodeStatus) {
	if run.Status == "" {
		run.ExecutionID = st.ExecutionID
		run.NodeID = st.NodeID
		run.Branch = BranchKey(st.LineageStack)
		run.Lineage = slices.Clone(st.LineageStack)
	}
}

// Batch is what ApplyBatch reads: the executions and node runs a batch of
// events touches, as stored before it, and the events already recorded.
type Batch struct {
	// Executions by id; events of executions not in it are ignored (statuses
	// of executions this store did not create, e.g. from `rune start`).
	Executions map[string]*Execution
	// Runs holds the stored runs among those the events name.
	Runs map[RunKey]*NodeRun
	// Recorded reports whether an event with this DedupeKey was recorded for
	// the execution before the batch (nil: none was).
	Recorded func(executionID, dedupeKey string) bool
	// Now stamps UpdatedAt.
	Now time.Time
}

// Applied is what a batch changes, for the implementation to write back.
type Applied struct {
	Runs       []*NodeRun   // new or changed runs(a new one has Seq 0)
	Executions []*Execution // changed executions
	// Events to record in this order (Body filled in when it was empty).
	Events []Event
	// DedupeKeys of Events, in the same order.
	DedupeKeys []string
}

// ApplyBatch applies events, in order, to the executions and runs of b,
// changing them in place, and returns what changed. An event without
// exactly one message of its own execution is ignored. Each event is recorded
// once per (execution, DedupeKey) (an empty key is never a duplicate); a
// duplicate changes nothing, even with other content.
//
// Executions: Status moves from processing to waiting while every unfinished
// node run waits or retries, and back; the completion makes it completed,
// failed or halted (cancelled when CancelRequested and halted), stores the
// CompletionMessage verbatim and ends the execution; a second completion is
// ignored. A status reporting a dead-lettered message (code DEAD_LETTERED:
// no completion will come, RFC 001 §9.2) makes it failed at once, with a
// completion the history makes (failure_reason: the node and the dead
// letter's reason); once no run is dead-lettered any more (the message was
// replayed and its node reports again) it is running again, and a completion
// ends it as usual, replacing the one the history made. Cursor lists the
// nodes with a run running, waiting or retrying (or dead-lettered).
// Attempts is the next attempt's number of the latest retrying status (or
// the attempt of a later running one); AvailableAt the latest retrying
// status's next_attempt_at or waiting status's resume_at. Vars are merged
// (later values win). Statuses that arrive after the completion still update
// their runs, not the execution.
func ApplyBatch(events []HistoryEvent, b Batch) Applied {
	var out Applied
	seen := map[[2]string]bool{}
	runChanged := map[RunKey]bool{}
	execChanged := map[string]bool{}
	var runOrder []RunKey
	var execOrder []string
	for i := range events {
		ev := &events[i]
		x := b.Executions[ev.ExecutionID]
		if x == nil || !wellFormed(ev) {
			continue
		}
		if ev.DedupeKey != "" {
			k := [2]string{ev.ExecutionID, ev.DedupeKey}
			if seen[k] || (b.Recorded != nil && b.Recorded(ev.ExecutionID, ev.DedupeKey)) {
				continue
			}
			seen[k] = true
		}
		at := cmpTime(ev.ReceivedAt, b.Now)
		changed := false
		kind := "status"
		if st := ev.Status; st != nil {
			key := StatusRunKey(st)
			run := b.Runs[key]
			if run == nil {
				run = &NodeRun{}
			}
			prev := runState(run)
			if ApplyStatus(run, st) {
				run.UpdatedAt = at
				b.Runs[key] = run
				if !runChanged[key] {
					runChanged[key] = true
					runOrder = append(runOrder, key)
				}
				changed = track(x, prev, runState(run), st) || changed
				if st.DeadLetter() && !Final(x.Status) {
					failDeadLettered(x, st, at)
					changed = true
				}
			}
		} else {
			kind = "completion"
			if deadLetterEnd(x) {
				reopen(x) // the real completion replaces the history's
			}
			if x.Completion != nil {
				continue // exactly one completion per execution
			}
			completeExecution(x, ev)
			changed = true
		}
		if len(ev.Vars) > 0 {
			if x.Vars == nil {
				x.Vars = map[string]json.RawMessage{}
			}
			maps.Copy(x.Vars, ev.Vars)
			changed = true
		}
		if changed {
			x.UpdatedAt = at
			if !execChanged[x.ID] {
				execChanged[x.ID] = true
				execOrder = append(execOrder, x.ID)
			}
		}
		body := ev.Body
		if len(body) == 0 {
			if ev.Status != nil {
				body = marshalJSON(ev.Status)
			} else {
				body = marshalJSON(ev.Completion)
			}
		}
		out.Events = append(out.Events, Event{ExecutionID: ev.ExecutionID, Kind: kind, Body: body, At: at})
		out.DedupeKeys = append(out.DedupeKeys, ev.DedupeKey)
	}
	for _, k := range runOrder {
		out.Runs = append(out.Runs, b.Runs[k])
	}
	for _, id := range execOrder {
		x := b.Executions[id]
		if x.Unfinished != nil && (!Final(x.Status) || deadLetterEnd(x)) {
			derive(x) // once per batch, not per status
		}
		out.Executions = append(out.Executions, x)
	}
	return out
}

// wellFormed reports whether ev carries exactly one message, of its own
// execution.
func wellFormed(ev *HistoryEvent) bool {
	switch {
	case ev.Status != nil && ev.Completion == nil:
		return ev.Status.ExecutionID == ev.ExecutionID
	case ev.Completion != nil && ev.Status == nil:
		return ev.Completion.ExecutionID == ev.ExecutionID
	}
	return false
}

// track moves x's unfinished-run counts from a run's previous state (its
// status, or deadLettered) to its new one, reported by st, and sets Attempts
// and AvailableAt; ApplyBatch derives Status and Cursor from the counts at
// the end of the batch. An execution failed by a dead letter is still
// tracked: a replay takes it up again where it was.
func track(x *Execution, prev, next string, st *message.NodeStatus) bool {
	if Final(x.Status) && !deadLetterEnd(x) {
		return false
	}
	if x.Unfinished == nil {
		x.Unfinished = map[string]map[string]int{}
	}
	if prev != "" && !finished(prev) {
		if c := x.Unfinished[st.NodeID]; c != nil {
			if c[prev]--; c[prev] <= 0 {
				delete(c, prev)
			}
			if len(c) == 0 {
				delete(x.Unfinished, st.NodeID)
			}
		}
	}
	if !finished(next) {
		c := x.Unfinished[st.NodeID]
		if c == nil {
			c = map[string]int{}
			x.Unfinished[st.NodeID] = c
		}
		c[next]++
	}
	switch {
	case st.Status == message.StatusRetrying:
		x.Attempts = max(st.Attempt, 1) + 1
		if st.NextAttemptAt != nil {
			x.AvailableAt = *st.NextAttemptAt
		}
	case st.Status == message.StatusRunning && st.Attempt > 1:
		x.Attempts = st.Attempt
	case st.Status == message.StatusWaiting && st.ResumeAt != nil:
		x.AvailableAt = *st.ResumeAt
	}
	return true
}

// derive sets x's Status and Cursor from its unfinished-run counts. An
// execution failed by a dead letter stays failed while a run is
// dead-lettered, and runs again once none is.
func derive(x *Execution) {
	running, waiting, dead := 0, 0, 0
	x.Cursor = x.Cursor[:0]
	for node, c := range x.Unfinished {
		running += c[message.StatusRunning]
		waiting += c[message.StatusWaiting] + c[message.StatusRetrying]
		dead += c[deadLettered]
		x.Cursor = append(x.Cursor, node)
	}
	slices.Sort(x.Cursor)
	if Final(x.Status) {
		if dead > 0 {
			return
		}
		reopen(x)
	}
	if running == 0 && waiting > 0 {
		x.Status = StatusWaiting
	} else {
		// Between two nodes nothing runs yet nothing waits: still processing.
		x.Status = StatusProcessing
	}
}

// failDeadLettered ends x failed for st, the report of a dead-lettered
// message, with a completion of the history's own: no worker will send one
// (RFC 001 §9.2). The counts stay (track), so that a replay can take the
// execution up again (derive).
func failDeadLettered(x *Execution, st *message.NodeStatus, at time.Time) {
	end := cmpTime(st.ExecutedAt, at)
	c := &message.Completion{WorkflowID: x.WorkflowID, ExecutionID: x.ID, Status: message.CompletionFailed,
		FinalContext: map[string]any{}, CompletedAt: end, TotalDurationMS: max(0, end.Sub(x.CreatedAt).Milliseconds()),
		FailureReason: &message.Failure{NodeID: st.NodeID, Error: *st.Error}}
	x.Status = StatusFailed
	x.Completion = marshalJSON(c)
	x.FinishedAt = timePtr(end)
}

// deadLetterEnd reports whether x ended by failDeadLettered (rather than
// by a completion).
func deadLetterEnd(x *Execution) bool {
	if x.Status != StatusFailed || !bytes.Contains(x.Completion, []byte(message.CodeDeadLettered)) {
		return false
	}
	var c struct {
		FailureReason *message.Failure `json:"failure_reason"`
	}
	return json.Unmarshal(x.Completion, &c) == nil && c.FailureReason != nil && c.FailureReason.Code == message.CodeDeadLettered
}

// reopen takes up an execution failed by a dead letter whose message was
// replayed: it runs again (derive or the completion set its status).
func reopen(x *Execution) {
	x.Status = StatusProcessing
	x.Completion = nil
	x.FinishedAt = nil
}

func completeExecution(x *Execution, ev *HistoryEvent) {
	c := ev.Completion
	x.Completion = ev.Body
	if len(x.Completion) == 0 {
		x.Completion = marshalJSON(c)
	}
	if !Final(x.Status) {
		switch {
		case c.Status == message.CompletionHalted && x.CancelRequested:
			x.Status = StatusCancelled
		case c.Status == message.CompletionCompleted:
			x.Status = StatusCompleted
		case c.Status == message.CompletionFailed:
			x.Status = StatusFailed
		default:
			x.Status = StatusHalted
		}
	}
	if x.FinishedAt == nil {
		x.FinishedAt = timePtr(cmpTime(c.CompletedAt, ev.ReceivedAt))
	}
	x.Cursor = nil
	x.Unfinished = nil
}

// SplitsOf computes the fan-out progress of every split from an execution's
// node runs: a split's item counts as done, failed or skipped once no run
// on its branch (or a branch nested in it) is unfinished, by its runs: failed
// if one failed, done if one succeeded, skipped otherwise. An item between
// two nodes may count as ended early; the aggregator's waiting status
// (Details processed/total) is the barrier's exact count.
func SplitsOf(runs []*NodeRun) []SplitProgress {
	type item struct{ unfinished, failed, success bool }
	type group struct {
		p     SplitProgress
		items map[int]*item
	}
	groups := map[[2]string]*group{}
	var order [][2]string
	for _, r := range runs {
		for d, f := range r.Lineage {
			k := [2]string{f.SplitNodeID, BranchKey(r.Lineage[:d])}
			g := groups[k]
			if g == nil {
				g = &group{p: SplitProgress{SplitNodeID: k[0], Branch: k[1]}, items: map[int]*item{}}
				groups[k] = g
				order = append(order, k)
			}
			g.p.Total = max(g.p.Total, f.TotalItems)
			it := g.items[f.ItemIndex]
			if it == nil {
				it = &item{}
				g.items[f.ItemIndex] = it
			}
			switch {
			case !finished(r.Status):
				it.unfinished = true
			case r.Status == message.StatusFailed:
				it.failed = true
			case r.Status == message.StatusSuccess:
				it.success = true
			}
		}
	}
	out := make([]SplitProgress, 0, len(order))
	for _, k := range order {
		g := groups[k]
		for _, it := range g.items {
			switch {
			case it.unfinished:
			case it.failed:
				g.p.Failed++
			case it.success:
				g.p.Done++
			default:
				g.p.Skipped++
			}
		}
		out = append(out, g.p)
	}
	return out
}

func marshalJSON(v any) json.RawMessage {
	if v == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil || string(b) == "null" {
		return nil
	}
	return b
}

func timePtr(t time.Time) *time.Time {
	t = Micro(t)
	return &t
}

func equalTime(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}

func cmpTime(a, b time.Time) time.Time {
	if a.IsZero() {
		return Micro(b)
	}
	return Micro(a)
}

// Micro truncates t to the microsecond in UTC, the precision both databases
// keep, so a value reads back as it was written.
func Micro(t time.Time) time.Time { return t.Truncate(time.Microsecond).UTC() }
