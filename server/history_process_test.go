package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rune-org/rune/broker"
	"github.com/rune-org/rune/broker/amqp"
	"github.com/rune-org/rune/distributed"
	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/store"
)

// TestHistoryExactUnderRedeliveryAndKill: what the workers publish is what
// the API shows, although the history gets every status and completion in
// an order shuffled across node runs, a third of them twice, and the
// `rune server` consuming them is killed with SIGKILL while it writes
// batches (its unacknowledged messages come again to the next server), and
// a quarter of everything is published once more after the restart (a
// worker's redelivery). Every node run has its status, attempt, times and
// output; every execution is completed with its completion; the event log
// holds each status and completion exactly once.
func TestHistoryExactUnderRedeliveryAndKill(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a real process")
	}
	t.Parallel()
	ctx := context.Background()
	d := newDeployment(t)
	st := d.store()
	const execs, nodes, wf = 120, 6, "exact"
	var ns, es []string
	for n := 1; n <= nodes; n++ {
		ns = append(ns, fmt.Sprintf(`{"id":"n%d","type":"set","parameters":{"values":{"v":%d}}}`, n, n))
		src := "start"
		if n > 1 {
			src = fmt.Sprintf("n%d", n-1)
		}
		es = append(es, fmt.Sprintf(`{"id":"e%d","src":%q,"dst":"n%d"}`, n, src, n))
	}
	if _, err := st.CreateWorkflow(ctx, store.WorkflowInput{ID: wf, Definition: []byte(wfDef(wf, strings.Join(ns, ","), strings.Join(es, ","))), At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	ids := make([]string, execs)
	for i := range ids {
		ids[i] = fmt.Sprintf("exec_exact_%03d", i)
		// Enqueued for an hour from now: the dispatcher leaves them alone.
		if _, _, err := st.CreateExecution(ctx, store.ExecutionInput{ID: ids[i], WorkflowID: wf, Input: []byte(`{}`),
			AvailableAt: time.Now().Add(time.Hour), At: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}

	// What the workers publish: per node run a running and a success.
	base := time.Now().UTC().Truncate(time.Millisecond)
	type nodeRunWant struct {
		started, finished time.Time
		output            string
	}
	want := map[string]map[string]nodeRunWant{}
	var runs [][]broker.Message // per node run, in its order
	var completions []broker.Message
	published := func(id string, e int) {
		want[id] = map[string]nodeRunWant{}
		final := map[string]any{"$trigger": map[string]any{}}
		var end time.Time
		for n := 1; n <= nodes; n++ {
			node := fmt.Sprintf("n%d", n)
			at := base.Add(time.Duration(e*100+n*10) * time.Millisecond)
			end = at.Add(5 * time.Millisecond)
			out := map[string]any{"v": e*1000 + n}
			final["$"+node] = out
			want[id][node] = nodeRunWant{started: at, finished: end, output: fmt.Sprintf(`{"v":%d}`, e*1000+n)}
			status := func(s string, at time.Time) broker.Message {
				st := &message.NodeStatus{WorkflowID: wf, ExecutionID: id, NodeID: node, Status: s, Attempt: 1, ExecutedAt: at}
				if s == message.StatusSuccess {
					st.Output, st.DurationMS = out, 5
				}
				return broker.Message{Topic: broker.Status, Key: id, Body: st}
			}
			runs = append(runs, []broker.Message{status(message.StatusRunning, at), status(message.StatusSuccess, end)})
		}
		completions = append(completions, broker.Message{Topic: broker.Completion, ID: id, Key: id, Body: &message.Completion{
			WorkflowID: wf, ExecutionID: id, Status: message.CompletionCompleted, FinalContext: final,
			CompletedAt: end.Add(time.Millisecond), TotalDurationMS: int64(nodes * 10)}})
	}
	for e, id := range ids {
		published(id, e)
	}
	// The order: node runs interleaved at random (each run's own order
	// kept), completions anywhere among them, and a third of the messages
	// again at random places later (a duplicate running may come after its
	// success).
	rng := rand.New(rand.NewPCG(1, 2))
	var order []broker.Message
	pending := append([][]broker.Message(nil), runs...)
	for _, c := range completions {
		pending = append(pending, []broker.Message{c})
	}
	for len(pending) > 0 {
		i := rng.IntN(len(pending))
		order = append(order, pending[i][0])
		if pending[i] = pending[i][1:]; len(pending[i]) == 0 {
			pending[i] = pending[len(pending)-1]
			pending = pending[:len(pending)-1]
		}
	}
	distinct := len(order)
	for _, m := range order[:distinct] {
		if rng.IntN(3) == 0 {
			at := rng.IntN(len(order)+1-distinct/2) + distinct/2
			order = append(order[:at], append([]broker.Message{m}, order[at:]...)...)
		}
	}

	rt, err := distributed.Connect(ctx, distributed.Config{AMQPURL: d.amqpURL, RedisURL: d.redisURL, Prefix: d.prefix,
		Role: amqp.RoleAdmin, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	publish := func(ms []broker.Message) {
		t.Helper()
		for i := 0; i < len(ms); i += 100 {
			if err := rt.Broker.Publish(ctx, ms[i:min(i+100, len(ms))]...).Wait(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	events := func() []store.Event {
		t.Helper()
		var all []store.Event
		for after := int64(0); ; {
			page, err := st.Events(ctx, store.EventFilter{AfterID: after, Limit: 1000})
			if err != nil {
				t.Fatal(err)
			}
			if len(page) == 0 {
				return all
			}
			all = append(all, page...)
			after = page[len(page)-1].ID
		}
	}

	p := d.server()
	d.waitHealthy(p)
	half := len(order) / 2
	publish(order[:half])
	// Killed while it writes: some batches committed, others not.
	deadline := time.Now().Add(60 * time.Second)
	for n := len(events()); n < distinct/8; n = len(events()) {
		if time.Now().After(deadline) {
			t.Fatalf("%d events recorded after 60 s; logs:\n%s", n, d.logs.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	p.kill()
	killedAt := len(events())
	publish(order[half:])
	publish(order[:len(order)/4])
	p2 := d.server()
	d.waitHealthy(p2)
	api := newAPI(t, &target{url: "http://" + p2.addr, token: newToken(t, st, "exact"), store: st, output: d.logs.String})
	// Every distinct message recorded (a lost one would keep the count
	// short until the deadline).
	deadline = time.Now().Add(120 * time.Second)
	for n := len(events()); n < distinct; n = len(events()) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d distinct messages recorded after 120 s", n, distinct)
		}
		time.Sleep(20 * time.Millisecond)
	}
	defer func() {
		// Stopped, the server has committed or returned every message it
		// took: a duplicate recorded late shows now.
		p2.stop()
		if n := len(events()); n != distinct {
			t.Errorf("after the server stopped the event log holds %d events, want %d", n, distinct)
		}
	}()
	evs := events()
	t.Logf("%d distinct messages, %d published (with duplicates and the redelivery); %d recorded when killed, %d at the end",
		distinct, len(order)+len(order)/4, killedAt, len(evs))
	if killedAt >= distinct {
		t.Errorf("killed after everything was recorded (%d events): not mid-stream", killedAt)
	}
	seen := map[string]int{}
	for _, ev := range evs {
		var body struct {
			NodeID string `json:"node_id"`
			Status string `json:"status"`
		}
		if err := json.Unmarshal(ev.Body, &body); err != nil {
			t.Fatal(err)
		}
		seen[ev.ExecutionID+"/"+ev.Kind+"/"+body.NodeID+"/"+body.Status]++
	}
	if len(seen) != distinct {
		t.Errorf("the event log holds %d distinct statuses and completions, want %d", len(seen), distinct)
	}
	for k, n := range seen {
		if n != 1 {
			t.Errorf("event %s recorded %d times", k, n)
		}
	}
	for _, id := range ids {
		var x execution
		api.want(http.StatusOK, "GET", "/v1/executions/"+id, nil, &x)
		if x.Status != "completed" || len(x.Cursor) != 0 {
			t.Errorf("%s: status %s, cursor %v; want completed, none", id, x.Status, x.Cursor)
		}
		var c message.Completion
		if err := json.Unmarshal(x.Completion, &c); err != nil || c.ExecutionID != id || len(c.FinalContext) != nodes+1 {
			t.Errorf("%s: completion %s (%v)", id, x.Completion, err)
		}
		if len(x.Nodes) != nodes {
			t.Errorf("%s: %d node runs, want %d", id, len(x.Nodes), nodes)
		}
		for _, r := range x.Nodes {
			w, ok := want[id][r.NodeID]
			switch {
			case !ok:
				t.Errorf("%s: a run of %s, which no worker reported", id, r.NodeID)
			case r.Status != "success" || r.Attempt != 1 || string(r.Output) != w.output ||
				r.StartedAt == nil || !r.StartedAt.Equal(w.started) || r.FinishedAt == nil || !r.FinishedAt.Equal(w.finished):
				t.Errorf("%s/%s: %s attempt %d output %s started %v finished %v; want success attempt 1 output %s started %v finished %v",
					id, r.NodeID, r.Status, r.Attempt, r.Output, r.StartedAt, r.FinishedAt, w.output, w.started, w.finished)
			}
		}
	}
}
