package console

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/store"
	"github.com/rune-org/rune/workflow"
)

// statuses are the execution statuses the list filters by.
var statuses = []string{store.StatusEnqueued, store.StatusProcessing, store.StatusWaiting,
	store.StatusCompleted, store.StatusFailed, store.StatusHalted, store.StatusCancelled}

var funcs = template.FuncMap{
	// when and ago write a time as a <time> element, in UTC; the page's
	// script rewrites it in the zone the user chose (UTC or local), with
	// when the absolute time first and ago the relative one ("3 min ago").
	"when": func(t any) template.HTML { return timeElem(t, "abs") },
	"ago":  func(t any) template.HTML { return timeElem(t, "rel") },
	// clock is when's time of day alone (the timeline's column).
	"clock":   func(t any) template.HTML { return timeElem(t, "clock") },
	"word":    func(status string) string { return cmp.Or(stateWords[status], status) },
	"ms":      durMS,
	"dur":     func(d time.Duration) string { return d.String() },
	"pretty":  prettyJSON,
	"failure": failureOf,
	"join":    strings.Join,
	"num":     thousands,
	"add":     func(a, b int) int { return a + b },
	"half":    func(a int) int { return a / 2 },
}

// durMS writes a duration in milliseconds as people read it: "< 1 ms",
// "120 ms", "2.5s".
func durMS(ms int64) string {
	switch {
	case ms < 1:
		return "< 1 ms"
	case ms < 1000:
		return strconv.FormatInt(ms, 10) + " ms"
	}
	return (time.Duration(ms) * time.Millisecond).String()
}

// timeElem renders a time (time.Time or *time.Time; nothing for a zero or
// nil one) as <time datetime=… data-t=kind>, its text the UTC time for a
// page read without script.
func timeElem(t any, kind string) template.HTML {
	var v time.Time
	switch x := t.(type) {
	case time.Time:
		v = x
	case *time.Time:
		if x != nil {
			v = *x
		}
	}
	if v.IsZero() {
		return ""
	}
	v = v.UTC()
	return template.HTML(`<time datetime="` + v.Format(time.RFC3339Nano) + `" data-t="` + kind + `">` +
		v.Format("2006-01-02 15:04:05.000") + ` UTC</time>`)
}

// failureOf is the failure_reason of a stored completion (nil when it has
// none): what the execution page's failure banner shows.
func failureOf(completion json.RawMessage) *message.Failure {
	var c struct {
		FailureReason *message.Failure `json:"failure_reason"`
	}
	if len(completion) == 0 || json.Unmarshal(completion, &c) != nil {
		return nil
	}
	return c.FailureReason
}

// prettyJSON indents a JSON value for display ("" for none).
func prettyJSON(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return string(raw)
	}
	return b.String()
}

// render executes template name with data, plus what every page needs.
func (c *Console) render(w http.ResponseWriter, r *http.Request, name string, data map[string]any) {
	if data == nil {
		data = map[string]any{}
	}
	data["Mode"] = c.cfg.Mode
	data["HasDLQ"] = c.cfg.DeadLetters != nil
	data["HasStats"] = c.stats() != nil
	if s := sessionOf(r); s != "" {
		data["CSRF"] = csrfToken(s)
		data["LoggedIn"] = true
		data["Can"] = accessOf(r)
	}
	var b bytes.Buffer
	if err := c.tmpl.ExecuteTemplate(&b, name, data); err != nil {
		c.log.Error("console: render", "page", name, "err", err)
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(b.Bytes())
}

// fail answers a page's error: 404 for what does not exist, else 500
// (logged; the message shown is generic).
func (c *Console) fail(w http.ResponseWriter, r *http.Request, what string, err error) {
	if errors.Is(err, store.ErrNotFound) {
		w.WriteHeader(http.StatusNotFound)
		c.render(w, r, "error", map[string]any{"Title": "Not found", "Message": what + " does not exist."})
		return
	}
	if errors.Is(err, store.ErrInvalid) {
		w.WriteHeader(http.StatusBadRequest)
		c.render(w, r, "error", map[string]any{"Title": "Bad request", "Message": err.Error()})
		return
	}
	c.log.Error("console: read failed", "what", what, "err", err)
	w.WriteHeader(http.StatusInternalServerError)
	c.render(w, r, "error", map[string]any{"Title": "Error", "Message": "Reading " + what + " failed; see the server log."})
}

// row is an execution as the list shows it.
type row struct {
	*store.Execution
	Started  time.Time
	Duration string
}

func (c *Console) row(x *store.Execution) row {
	start := x.CreatedAt
	if x.DispatchedAt != nil {
		start = *x.DispatchedAt
	}
	end := c.cfg.Now()
	if x.FinishedAt != nil {
		end = *x.FinishedAt
	}
	d := ""
	if x.DispatchedAt != nil || x.FinishedAt != nil {
		d = end.Sub(start).Round(time.Millisecond).String()
	}
	return row{Execution: x, Started: start, Duration: d}
}

// listQuery reads the list's filters: workflow, status, created after and
// before (datetime-local or RFC 3339), q (an execution id or idempotency
// key) and cursor.
type listQuery struct {
	Workflow, Status, After, Before, Q, Cursor string
	// Trigger and Where filter by trigger and input values (issue 38,
	// search.go).
	Trigger, Where string
}

func parseListQuery(r *http.Request) listQuery {
	v := r.URL.Query()
	return listQuery{Workflow: v.Get("workflow"), Status: v.Get("status"), After: v.Get("after"),
		Before: v.Get("before"), Q: strings.TrimSpace(v.Get("q")), Cursor: v.Get("cursor"),
		Trigger: strings.TrimSpace(v.Get("trigger")), Where: strings.TrimSpace(v.Get("where"))}
}

func parseWhen(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	for _, layout := range []string{time.RFC3339, "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, time.UTC); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%w: %q is not a time (want 2006-01-02T15:04 in UTC)", store.ErrInvalid, s)
}

// Values renders the filters as a query string (without the cursor).
func (q listQuery) Values() string {
	v := url.Values{}
	for k, s := range map[string]string{"workflow": q.Workflow, "status": q.Status, "after": q.After, "before": q.Before, "q": q.Q,
		"trigger": q.Trigger, "where": q.Where} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return v.Encode()
}

// listPage reads one page of executions for q. A q naming an execution id
// shows that execution; otherwise q is an idempotency key.
func (c *Console) listPage(ctx context.Context, acc Access, q listQuery) ([]row, string, error) {
	if q.Status != "" && !slices.Contains(statuses, q.Status) {
		return nil, "", fmt.Errorf("%w: status %q is not one of %v", store.ErrInvalid, q.Status, statuses)
	}
	if q.Q != "" {
		x, err := c.cfg.Store.GetExecution(ctx, q.Q)
		if err == nil && acc.sees(x.WorkflowID) {
			return []row{c.row(x)}, "", nil
		}
		if !errors.Is(err, store.ErrNotFound) {
			return nil, "", err
		}
	}
	after, err := parseWhen(q.After)
	if err != nil {
		return nil, "", err
	}
	before, err := parseWhen(q.Before)
	if err != nil {
		return nil, "", err
	}
	input, err := parseWhere(q.Where)
	if err != nil {
		return nil, "", err
	}
	page, err := c.cfg.Store.ListExecutions(ctx, store.ExecutionFilter{WorkflowID: q.Workflow, Status: q.Status,
		IdempotencyKey: q.Q, CreatedAfter: after, CreatedBefore: before, Limit: 50, Cursor: q.Cursor,
		Trigger: q.Trigger, Input: input})
	if err != nil {
		return nil, "", err
	}
	rows := make([]row, 0, len(page.Items))
	for _, x := range page.Items {
		if acc.sees(x.WorkflowID) {
			rows = append(rows, c.row(x))
		}
	}
	return rows, page.Next, nil
}

func (c *Console) executionsPage(w http.ResponseWriter, r *http.Request) {
	q := parseListQuery(r)
	// The stream starts after the newest event, read before the page: no
	// change between the read and the stream is missed.
	last, err := latestEventID(r.Context(), c.cfg.Store, "")
	if err != nil {
		c.fail(w, r, "the event log", err)
		return
	}
	rows, next, err := c.listPage(r.Context(), accessOf(r), q)
	if err != nil {
		c.fail(w, r, "the executions", err)
		return
	}
	c.render(w, r, "executions", map[string]any{"Title": "Executions", "Rows": rows, "Next": next, "Q": q,
		"Statuses": statuses, "LastEvent": last, "Live": q.Cursor == "", "Done": r.URL.Query().Get("done")})
}

// executionRows is the list's table body alone, for the live refresh.
func (c *Console) executionRows(w http.ResponseWriter, r *http.Request) {
	rows, _, err := c.listPage(r.Context(), accessOf(r), parseListQuery(r))
	if err != nil {
		c.fail(w, r, "the executions", err)
		return
	}
	c.render(w, r, "rows", map[string]any{"Rows": rows})
}

// latestEventID is the id of the newest event (of execution execID, or of
// all): where a live page's stream starts.
func latestEventID(ctx context.Context, st store.Store, execID string) (int64, error) {
	return store.LatestEventID(ctx, st, execID)
}

// executionData is what the execution page and its live state read.
type executionData struct {
	X      *store.Execution
	Runs   []*store.NodeRun
	Graph  *graph
	States map[string]nodeState
	Def    *workflow.Definition
	// Failure is what the failure banner shows (nil: none).
	Failure *message.Failure
	// Timeline is the execution's history, its first timelineMax events;
	// TimelineMore is set when there are more.
	Timeline     []timelineEntry
	TimelineMore bool
	// TimelineKey changes when Timeline does: a live refresh that has it
	// already is not sent it again (past timelineMax events, a large
	// split's timeline no longer changes).
	TimelineKey string
	// Queue says why an enqueued execution waits (flow.go).
	Queue string
	// Parent and Children link the execution to the one whose workflow
	// node started it and to those its workflow nodes started (issue 34).
	Parent   string
	Children []*store.ChildLink
}

func (c *Console) loadExecution(ctx context.Context, acc Access, id string) (*executionData, error) {
	x, err := c.cfg.Store.GetExecution(ctx, id)
	if err != nil {
		return nil, err
	}
	if !acc.sees(x.WorkflowID) {
		return nil, fmt.Errorf("execution %s: %w", id, store.ErrNotFound)
	}
	runs, err := c.cfg.Store.NodeRuns(ctx, id)
	if err != nil {
		return nil, err
	}
	// Splits derive from the runs (store.SplitsOf, as both stores compute
	// them): one read of the history, not two.
	splits := store.SplitsOf(runs)
	wf, err := c.cfg.Store.GetWorkflow(ctx, x.WorkflowID, x.Version)
	if err != nil {
		return nil, err
	}
	evs, more, err := executionEvents(ctx, c.cfg.Store, id, timelineMax)
	if err != nil {
		return nil, err
	}
	d := &executionData{X: x, Runs: runs, States: nodeStates(runs, splits), Failure: failureOfExecution(x, runs),
		Timeline: timeline(x, evs), TimelineMore: more}
	d.TimelineKey = fmt.Sprintf("%d.%t", len(evs), x.DispatchedAt != nil)
	if len(evs) > 0 {
		d.TimelineKey += fmt.Sprintf(".%d", evs[len(evs)-1].ID)
	}
	def, err := workflow.Decode(wf.Definition)
	if err != nil {
		return nil, fmt.Errorf("workflow %s version %d: %w", x.WorkflowID, x.Version, err)
	}
	d.Def = def
	if d.Queue, err = queueReason(ctx, c.cfg.Store, x, time.Now()); err != nil {
		return nil, err
	}
	if d.Parent, d.Children, err = c.family(ctx, id); err != nil { // issue 34
		return nil, err
	}
	d.Graph = layout(def)
	d.Graph.apply(d.States)
	return d, nil
}

func (c *Console) executionPage(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	last, err := latestEventID(r.Context(), c.cfg.Store, id)
	if err != nil {
		c.fail(w, r, "the event log", err)
		return
	}
	d, err := c.loadExecution(r.Context(), accessOf(r), id)
	if err != nil {
		c.fail(w, r, "execution "+id, err)
		return
	}
	c.render(w, r, "execution", map[string]any{"Title": "Execution " + id, "D": d, "Row": c.row(d.X),
		"Final": store.Final(d.X.Status), "LastEvent": last, "Input": prettyJSON(d.X.Input),
		"ExecPaused": c.execPaused(r, d.X.ID)}) // issue 34 (pause.go)
}

// executionState is the live part of the execution page: each node's
// state and the summary, re-read after events arrive.
func (c *Console) executionState(w http.ResponseWriter, r *http.Request) {
	d, err := c.loadExecution(r.Context(), accessOf(r), r.PathValue("id"))
	if err != nil {
		http.Error(w, "execution not readable", http.StatusNotFound)
		return
	}
	data := map[string]any{"D": d, "Row": c.row(d.X), "Final": store.Final(d.X.Status), "Can": accessOf(r),
		"ExecPaused": c.execPaused(r, d.X.ID)} // issue 34 (pause.go)
	var sum, tl bytes.Buffer
	err = c.tmpl.ExecuteTemplate(&sum, "summary", data)
	same := r.URL.Query().Get("timeline") == d.TimelineKey
	if err == nil && !same {
		err = c.tmpl.ExecuteTemplate(&tl, "timeline", data)
	}
	if err != nil {
		c.log.Error("console: render summary", "err", err)
		http.Error(w, "render failed", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	out := map[string]any{"status": d.X.Status, "final": store.Final(d.X.Status),
		"nodes": d.States, "summary": sum.String(), "timeline_key": d.TimelineKey}
	if !same {
		out["timeline"] = tl.String()
	}
	_ = json.NewEncoder(w).Encode(out)
}

// panelRunsMax bounds the runs a node's panel lists (a node inside a
// 10,000-item split has 10,000).
const panelRunsMax = 200

// nodePanel shows a node's runs (one per split branch), and one run in
// full: its input context, output, error, attempts and times.
func (c *Console) nodePanel(w http.ResponseWriter, r *http.Request) {
	d, err := c.loadExecution(r.Context(), accessOf(r), r.PathValue("id"))
	if err != nil {
		http.Error(w, "execution not readable", http.StatusNotFound)
		return
	}
	node := r.PathValue("node")
	status := r.URL.Query().Get("status")
	var all, shown []*store.NodeRun
	counts := map[string]int{}
	for _, run := range d.Runs {
		if run.NodeID != node {
			continue
		}
		all = append(all, run)
		counts[run.Status]++
		if (status == "" || run.Status == status) && len(shown) < panelRunsMax {
			shown = append(shown, run)
		}
	}
	var sel *store.NodeRun
	if b, ok := r.URL.Query()["branch"]; ok {
		for _, run := range all {
			if run.Branch == b[0] {
				sel = run
			}
		}
	} else if len(all) == 1 {
		sel = all[0]
	}
	data := map[string]any{"X": d.X, "Node": node, "Runs": shown, "Total": len(all), "Counts": counts, "Status": status, "Sel": sel}
	for _, n := range d.Graph.Nodes {
		if n != nil && n.ID == node {
			data["G"] = n
		}
	}
	if sel != nil {
		data["Context"] = prettyJSON(inputContext(d, sel))
		if rc := rerunContext(d, sel); rc != nil {
			data["RerunContext"] = string(rc) // "Re-run from here" (rerun.go)
		}
		evs, more, err := executionEvents(r.Context(), c.cfg.Store, d.X.ID, attemptsScanMax)
		if err != nil {
			c.log.Error("console: read events", "execution", d.X.ID, "err", err)
		}
		data["Attempts"], data["AttemptsMore"] = attemptsOf(evs, node, sel.Branch), more
		data["Sends"] = c.sendsOf(r.Context(), d.X.ID, node, sel.Branch) // delivery status (issue 36)
		for i := range d.Def.Nodes {
			if d.Def.Nodes[i].ID == node {
				data["MaxAttempts"] = d.Def.Nodes[i].RetrySettings().MaxAttempts
			}
		}
	}
	c.render(w, r, "panel", data)
}

// inputContext rebuilds what a run saw: the trigger payload and the output
// of every earlier node on its branch (the run's own branch or one it was
// split from), by node id as expressions name them.
func inputContext(d *executionData, run *store.NodeRun) json.RawMessage {
	ctx := map[string]json.RawMessage{"trigger": d.X.Input}
	for _, o := range d.Runs {
		if o == run || o.NodeID == run.NodeID || len(o.Output) == 0 {
			continue
		}
		if o.Branch != run.Branch && !strings.HasPrefix(run.Branch, o.Branch+"/") && o.Branch != "" {
			continue
		}
		if o.FinishedAt == nil || run.StartedAt == nil || o.FinishedAt.After(*run.StartedAt) {
			continue
		}
		ctx[o.NodeID] = o.Output
	}
	b, _ := json.Marshal(ctx)
	return b
}

func (c *Console) workflowsPage(w http.ResponseWriter, r *http.Request) {
	page, err := c.cfg.Store.ListWorkflows(r.Context(), 100, r.URL.Query().Get("cursor"))
	if err != nil {
		c.fail(w, r, "the workflows", err)
		return
	}
	acc := accessOf(r)
	page.Items = slices.DeleteFunc(page.Items, func(wf *store.Workflow) bool { return !acc.sees(wf.ID) })
	c.render(w, r, "workflows", map[string]any{"Title": "Workflows", "Items": page.Items, "Next": page.Next})
}

// workflowPage shows a workflow's versions, one version's graph and
// definition, and the trigger form.
func (c *Console) workflowPage(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	version := 0
	if v := r.URL.Query().Get("version"); v != "" {
		if _, err := fmt.Sscan(v, &version); err != nil || version < 1 {
			c.fail(w, r, "version "+v, fmt.Errorf("%w: version %q is not a positive number", store.ErrInvalid, v))
			return
		}
	}
	if !accessOf(r).sees(id) {
		c.fail(w, r, "workflow "+id, fmt.Errorf("workflow %s: %w", id, store.ErrNotFound))
		return
	}
	wf, err := c.cfg.Store.GetWorkflow(r.Context(), id, version)
	if err != nil {
		c.fail(w, r, "workflow "+id, err)
		return
	}
	// An edit saved from this page is of the latest version as it loaded:
	// the save sends it as If-Match, so that it cannot overwrite a version
	// another editor saved meanwhile (412).
	base := wf.Version
	if version != 0 {
		latest, err := c.cfg.Store.GetWorkflow(r.Context(), id, 0)
		if err != nil {
			c.fail(w, r, "workflow "+id, err)
			return
		}
		base = latest.Version
	}
	versions, err := c.cfg.Store.ListVersions(r.Context(), id, versionsShown, r.URL.Query().Get("older"))
	if err != nil {
		c.fail(w, r, "workflow "+id, err)
		return
	}
	c.renderWorkflow(w, r, wf, base, versions, wf.Definition, nil)
}

// versionsShown is how many versions a workflow page links, newest first
// (the rest a page at a time): the list carries no definitions.
const versionsShown = 50

// renderWorkflow renders version wf of a workflow with def in its editor;
// base is the latest version when the edit began (the save's If-Match).
func (c *Console) renderWorkflow(w http.ResponseWriter, r *http.Request, wf *store.Workflow, base int, versions store.Page[*store.Workflow], def []byte, problems []workflow.Problem) {
	data := map[string]any{"Title": "Workflow " + wf.ID, "W": wf, "Base": base, "Versions": versions.Items, "OlderVersions": versions.Next,
		"Definition": prettyJSON(def), "CanCheck": c.cfg.Validate != nil, "Checked": problems != nil}
	if d, err := workflow.Decode(def); err == nil {
		g := layout(d)
		g.markProblems(problems)
		data["Graph"] = g
	} else {
		data["DecodeError"] = err.Error()
	}
	c.pauseData(r, wf.ID, data) // issue 34 (rerun.go)
	c.render(w, r, "workflow", data)
}

// checkWorkflow validates an edited definition and shows its problems on
// its graph; storing it is the API's PUT, from the page.
func (c *Console) checkWorkflow(w http.ResponseWriter, r *http.Request) {
	if c.cfg.Validate == nil {
		http.NotFound(w, r)
		return
	}
	id := r.PathValue("id")
	if !accessOf(r).sees(id) {
		c.fail(w, r, "workflow "+id, fmt.Errorf("workflow %s: %w", id, store.ErrNotFound))
		return
	}
	wf, err := c.cfg.Store.GetWorkflow(r.Context(), id, 0)
	if err != nil {
		c.fail(w, r, "workflow "+id, err)
		return
	}
	versions, err := c.cfg.Store.ListVersions(r.Context(), id, versionsShown, r.URL.Query().Get("older"))
	if err != nil {
		c.fail(w, r, "workflow "+id, err)
		return
	}
	def := []byte(r.PostFormValue("definition"))
	// The check keeps the version the edit began from (the form's base).
	base := wf.Version
	if b, err := strconv.Atoi(r.PostFormValue("base")); err == nil && b > 0 && b <= wf.Version {
		base = b
	}
	problems := []workflow.Problem{}
	if err := c.cfg.Validate(def); err != nil {
		var ps workflow.Problems
		if errors.As(err, &ps) {
			problems = ps
		} else {
			problems = append(problems, workflow.Problem{Message: err.Error()})
		}
	}
	c.renderWorkflow(w, r, wf, base, versions, def, problems)
}

func (c *Console) dlqPage(w http.ResponseWriter, r *http.Request) {
	if accessOf(r).Scoped {
		c.fail(w, r, "the dead-letter queue", fmt.Errorf("dead letters of every workflow: %w", store.ErrNotFound))
		return
	}
	data := map[string]any{"Title": "Dead letters", "Enabled": c.cfg.DeadLetters != nil, "Done": r.URL.Query().Get("done")}
	if c.cfg.DeadLetters != nil {
		dls, total, err := c.cfg.DeadLetters.List(r.Context(), 200)
		if err != nil {
			c.log.Error("console: dead letters", "err", err)
			data["Error"] = "Reading the dead-letter queue failed; see the server log."
		}
		data["Items"], data["Total"] = dls, total
	}
	c.render(w, r, "dlq", data)
}

// dlqAction replays the selected dead letters, or purges the queue.
func (c *Console) dlqAction(w http.ResponseWriter, r *http.Request) {
	if c.cfg.DeadLetters == nil {
		http.NotFound(w, r)
		return
	}
	acc := accessOf(r)
	action := r.PostFormValue("action")
	if acc.Scoped || action == "replay" && !acc.Replay || action == "purge" && !acc.Purge {
		http.Error(w, "your token's role may not "+action+" dead letters", http.StatusForbidden)
		return
	}
	ids := r.PostForm["id"]
	var done string
	switch action {
	case "replay":
		got, err := c.cfg.DeadLetters.Replay(r.Context(), ids)
		if err != nil {
			c.log.Error("console: replay dead letters", "err", err)
			done = "replay failed: " + err.Error()
		} else {
			done = fmt.Sprintf("replayed %d", len(got))
		}
	case "purge":
		if r.PostFormValue("confirm") != "yes" {
			done = "purge not done: tick the confirmation box"
			break
		}
		n, err := c.cfg.DeadLetters.Purge(r.Context())
		if err != nil {
			c.log.Error("console: discard dead letters", "err", err)
			done = "discard failed: " + err.Error()
		} else {
			done = fmt.Sprintf("discarded %d", n)
		}
	default:
		http.Error(w, "action must be replay or purge", http.StatusBadRequest)
		return
	}
	http.Redirect(w, r, "/dlq?done="+url.QueryEscape(done), http.StatusSeeOther)
}
