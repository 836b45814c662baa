package server_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rune-org/rune/broker"
	"github.com/rune-org/rune/embedded"
	"github.com/rune-org/rune/expr"
	"github.com/rune-org/rune/node"
	"github.com/rune-org/rune/nodes"
	"github.com/rune-org/rune/server"
	"github.com/rune-org/rune/store"
	"github.com/rune-org/rune/store/sqlite"
	"github.com/rune-org/rune/workflow"
)

// fakeEmail stands in for a notification node type named "email": it
// succeeds with what it "sent", recorded as the email node's is, under
// $vars.email_<node id> (node.Vars).
type fakeEmail struct{ id string }

func (fakeEmail) Check(*workflow.NodeCheck) {}
func (fakeEmail) Compile(n *workflow.Node, _ *expr.Compiler) (node.Runner, error) {
	return fakeEmail{id: n.ID}, nil
}
func (f fakeEmail) VarName() string { return "email_" + f.id }
func (fakeEmail) Run(context.Context, *node.Input) (node.Result, error) {
	return node.Result{Output: map[string]any{"message_id": "m-1", "to": "ada@example.com"}}, nil
}

// TestVarsRecordNotificationResults: the success output of an email node is
// recorded in the execution's vars as email_<node id> (seed 003); other
// nodes' outputs are not. The execution shows completed with its node runs.
func TestVarsRecordNotificationResults(t *testing.T) {
	t.Parallel()
	checkRuns(t, notifyRun(t, nil, 0))
}

// TestVarsWholeWhenStatusesTrailTheCompletion: the statuses a worker
// publishes with a completion travel on another queue and can come after it;
// past History.HoldMax the completion is recorded without them, and the vars
// are whole all the same. Here no status reaches the server until the test
// has read the completed execution.
func TestVarsWholeWhenStatusesTrailTheCompletion(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	notifyRun(t, func(b broker.Broker) broker.Broker { return heldStatuses{b, release} }, 100*time.Millisecond)
	close(release)
}

// TestCompletedWithEveryNodeRun: on a loaded machine the statuses of an
// execution's last nodes can reach the server a while after its completion
// (they travel on another queue). The completion is held until they are
// recorded, so the first time the execution shows completed, every node of
// it has its run. Here the statuses come a second after the completion.
func TestCompletedWithEveryNodeRun(t *testing.T) {
	t.Parallel()
	late := &lateStatuses{release: make(chan struct{}), delay: time.Second}
	checkRuns(t, notifyRun(t, func(b broker.Broker) broker.Broker { late.Broker = b; return late }, 0))
}

// checkRuns fails unless every node of notifyRun's workflow has a success run.
func checkRuns(t *testing.T, x *execution) {
	t.Helper()
	for _, id := range []string{"start", "welcome", "s"} {
		if !slices.ContainsFunc(x.Nodes, func(r nodeRun) bool { return r.NodeID == id && r.Status == "success" }) {
			t.Fatalf("execution shows %s without a success run of node %s: %+v", x.Status, id, x.Nodes)
		}
	}
}

// heldStatuses hands status messages to the server's consumer only once
// release is closed.
type heldStatuses struct {
	broker.Broker
	release <-chan struct{}
}

func (b heldStatuses) Consume(ctx context.Context, topic broker.Topic, opts broker.ConsumeOptions, h broker.Handler) error {
	if topic != broker.Status {
		return b.Broker.Consume(ctx, topic, opts, h)
	}
	return b.Broker.Consume(ctx, topic, opts, func(ctx context.Context, d *broker.Delivery) error {
		select {
		case <-b.release:
			return h(ctx, d)
		case <-ctx.Done():
			return ctx.Err()
		}
	})
}

// lateStatuses hands status messages to the server's consumer delay after
// the first completion reached it.
type lateStatuses struct {
	broker.Broker
	once    sync.Once
	release chan struct{} // closed delay after the first completion
	delay   time.Duration
}

func (b *lateStatuses) Consume(ctx context.Context, topic broker.Topic, opts broker.ConsumeOptions, h broker.Handler) error {
	if topic == broker.Completion {
		return b.Broker.Consume(ctx, topic, opts, func(ctx context.Context, d *broker.Delivery) error {
			b.once.Do(func() { time.AfterFunc(b.delay, func() { close(b.release) }) })
			return h(ctx, d)
		})
	}
	return heldStatuses{b.Broker, b.release}.Consume(ctx, topic, opts, h)
}

// notifyRun triggers, through a server whose broker wrap may change and
// whose History.HoldMax is holdMax (0: the default), a workflow with an email
// node, checks its vars the first time it shows completed, and returns that
// view of it.
func notifyRun(t *testing.T, wrap func(broker.Broker) broker.Broker, holdMax time.Duration) *execution {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "rune.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	reg := nodes.NewRegistry(nodes.Options{})
	reg.Register("email", fakeEmail{})
	rt, err := embedded.New(embedded.Options{Registry: reg, ConsumeEvents: true})
	if err != nil {
		t.Fatal(err)
	}
	var b broker.Broker = rt.Broker
	if wrap != nil {
		b = wrap(b)
	}
	s, err := server.New(server.Config{Store: st, Broker: b, Engine: rt.Engine, APIToken: "t", History: server.HistoryConfig{HoldMax: holdMax}})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(runCtx) }()
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(func() { hs.Close(); cancel(); <-done; rt.Close() })
	a := newAPI(t, &target{url: hs.URL, token: "t", store: st})
	a.pushWorkflow(wfDef("notify", `{"id":"welcome","type":"email","parameters":{"to":"ada@example.com","subject":"Welcome"}},{"id":"s","type":"set","parameters":{"values":{"v":1}}}`,
		`{"id":"e1","src":"start","dst":"welcome"},{"id":"e2","src":"welcome","dst":"s"}`))
	x := a.trigger("notify", `{}`)
	completed := a.waitStatus(x.ID, "completed")
	var got map[string]any
	if err := json.Unmarshal(completed.Vars["email_welcome"], &got); err != nil || got["message_id"] != "m-1" {
		t.Fatalf("vars %s, want email_welcome with the node's output", mustJSON(completed.Vars))
	}
	if len(completed.Vars) != 1 {
		t.Fatalf("vars %s, want only email_welcome", mustJSON(completed.Vars))
	}
	return completed
}

func mustJSON(v any) string { b, _ := json.Marshal(v); return string(b) }

// TestDispatchOfUncompilableVersionFails: a stored version that no longer
// compiles (its node type is not in this build) ends failed with
// INVALID_WORKFLOW instead of being claimed again after every lease.
func TestDispatchOfUncompilableVersionFails(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "rune.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	def := wfDef("gone", `{"id":"welcome","type":"email","parameters":{"to":"ada@example.com","subject":"Welcome"}}`, `{"id":"e1","src":"start","dst":"welcome"}`)
	if _, err := st.CreateWorkflow(ctx, store.WorkflowInput{ID: "gone", Definition: []byte(def), At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	rt, err := embedded.New(embedded.Options{ConsumeEvents: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	s, err := server.New(server.Config{Store: st, Broker: rt.Broker, Engine: rt.Engine, APIToken: "t"})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(runCtx) }()
	defer func() { cancel(); <-done }()
	hs := httptest.NewServer(s.Handler())
	defer hs.Close()
	a := newAPI(t, &target{url: hs.URL, token: "t", store: st})
	x := a.trigger("gone", `{}`)
	failed := a.waitStatus(x.ID, "failed")
	if !strings.Contains(string(failed.Completion), "INVALID_WORKFLOW") {
		t.Fatalf("completion %s, want INVALID_WORKFLOW", failed.Completion)
	}
}
