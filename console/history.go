package console

import (
	"context"
	"encoding/json"
	"time"

	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/store"
)

// Bounds of the event-log reads behind the execution page: the timeline
// shows an execution's first timelineMax events (a split of 10,000
// branches has 30,000), and a node's attempts are searched among the first
// attemptsScanMax.
const (
	timelineMax     = 500
	attemptsScanMax = 20_000
	eventsPage      = 5_000
)

// executionEvents reads up to max of execution id's events, oldest first,
// and whether more exist.
func executionEvents(ctx context.Context, st store.Store, id string, max int) ([]store.Event, bool, error) {
	var out []store.Event
	var after int64
	for len(out) < max {
		n := min(eventsPage, max-len(out)+1)
		evs, err := st.Events(ctx, store.EventFilter{ExecutionID: id, AfterID: after, Limit: n})
		if err != nil {
			return nil, false, err
		}
		out = append(out, evs...)
		if len(evs) < n {
			return out, false, nil
		}
		after = evs[len(evs)-1].ID
	}
	return out[:max], true, nil
}

// attempt is one attempt of one node run, from its statuses in the event
// log: the engine reports a running status as it starts, and retrying,
// failed, success, skipped or waiting as it ends.
type attempt struct {
	N          int
	Status     string
	Start, End *time.Time
	DurationMS int64
	Error      *message.Error
	// NextAt and Backoff: when the next attempt was due, and the wait
	// from this attempt's end until then (retrying attempts only).
	NextAt  *time.Time
	Backoff time.Duration
	// ResumeAt is when a waiting run resumes.
	ResumeAt *time.Time
}

// attemptsOf folds the status events of node's run on branch into its
// attempts, in order.
func attemptsOf(evs []store.Event, node, branch string) []*attempt {
	var out []*attempt
	byN := map[int]*attempt{}
	for _, ev := range evs {
		if ev.Kind != "status" {
			continue
		}
		var st message.NodeStatus
		if json.Unmarshal(ev.Body, &st) != nil || st.NodeID != node || store.BranchKey(st.LineageStack) != branch {
			continue
		}
		n := max(st.Attempt, 1)
		a := byN[n]
		if a == nil {
			a = &attempt{N: n}
			byN[n] = a
			out = append(out, a)
		}
		at := st.ExecutedAt
		a.Status = st.Status
		switch st.Status {
		case message.StatusRunning:
			a.Start = &at
			continue
		case message.StatusWaiting:
			a.ResumeAt = st.ResumeAt
			continue
		}
		a.End = &at
		a.Error = st.Error
		a.DurationMS = st.DurationMS
		if a.Start == nil {
			// A fast node's running status may never be published (the
			// worker holds it back and drops it when the node ends first).
			s := at.Add(-time.Duration(st.DurationMS) * time.Millisecond)
			a.Start = &s
		} else if a.DurationMS == 0 {
			a.DurationMS = at.Sub(*a.Start).Milliseconds()
		}
		if st.Status == message.StatusRetrying && st.NextAttemptAt != nil {
			a.NextAt = st.NextAttemptAt
			a.Backoff = st.NextAttemptAt.Sub(at).Round(time.Millisecond)
		}
	}
	return out
}

// timelineEntry is one line of an execution's timeline.
type timelineEntry struct {
	At time.Time
	// Kind is created, dispatched, status, completion, or an
	// ExecutionChange's change (cancel_requested, cancelled).
	Kind    string
	Node    string
	Branch  string
	Status  string
	Attempt int
	Error   *message.Error
	// Note: a retry's next attempt, a wait's resume time.
	Next *time.Time
}

// timeline lists what happened to x: its creation and dispatch, then every
// event of its log in order (evs), as Temporal's event history does.
func timeline(x *store.Execution, evs []store.Event) []timelineEntry {
	out := []timelineEntry{{At: x.CreatedAt, Kind: "created", Status: x.Trigger}}
	if x.DispatchedAt != nil {
		out = append(out, timelineEntry{At: *x.DispatchedAt, Kind: "dispatched"})
	}
	for _, ev := range evs {
		e := timelineEntry{At: ev.At, Kind: ev.Kind}
		switch ev.Kind {
		case "status":
			var st message.NodeStatus
			if json.Unmarshal(ev.Body, &st) != nil {
				continue
			}
			e.Node, e.Branch, e.Status, e.Attempt, e.Error = st.NodeID, store.BranchKey(st.LineageStack), st.Status, st.Attempt, st.Error
			e.Next = st.NextAttemptAt
			if st.ResumeAt != nil {
				e.Next = st.ResumeAt
			}
		case "completion":
			var c message.Completion
			if json.Unmarshal(ev.Body, &c) != nil {
				continue
			}
			e.Status = c.Status
			if f := c.FailureReason; f != nil {
				e.Node = f.NodeID
				e.Error = &message.Error{Code: f.Code, Message: f.Message}
			}
		case "execution":
			var ch store.ExecutionChange
			if json.Unmarshal(ev.Body, &ch) != nil {
				continue
			}
			e.Kind = ch.Change
		}
		out = append(out, e)
	}
	return out
}

// failureOfExecution is what the failure banner shows: the completion's
// failure_reason, or, for a failed execution without one (a dead-lettered
// node whose completion has not come), its first failed node run's error.
func failureOfExecution(x *store.Execution, runs []*store.NodeRun) *message.Failure {
	if f := failureOf(x.Completion); f != nil {
		return f
	}
	if x.Status != store.StatusFailed && x.Status != store.StatusHalted {
		return nil
	}
	for _, r := range runs {
		if r.Status != message.StatusFailed {
			continue
		}
		f := &message.Failure{NodeID: r.NodeID}
		_ = json.Unmarshal(r.Error, &f.Error)
		return f
	}
	return nil
}
