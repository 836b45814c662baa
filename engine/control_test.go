package engine

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/rune-org/rune/expr"
	"github.com/rune-org/rune/internal/nodetest"
	"github.com/rune-org/rune/node"
	"github.com/rune-org/rune/workflow"
)

func TestWaitAndDelayCheck(t *testing.T) {
	cases := []struct {
		name   string
		typ    string
		params map[string]any
		want   map[string]string
	}{
		{"amount and unit", "wait", map[string]any{"amount": 2.0, "unit": "hours"}, nil},
		{"until time", "wait", map[string]any{"until": "2026-12-24T18:00:00Z"}, nil},
		{"until expression", "wait", map[string]any{"until": "{{ $trigger.at }}"}, nil},
		{"neither: amount 1 (RFC 006)", "wait", map[string]any{}, nil},
		{"unit alone: amount 1", "wait", map[string]any{"unit": "minutes", "resume": "time_interval"}, nil},
		{"specific_time without until", "wait", map[string]any{"resume": "specific_time"}, map[string]string{"nodes[1].parameters.until": "required when resume is specific_time"}},
		{"unit with until", "wait", map[string]any{"until": "2026-12-24T18:00:00Z", "unit": "hours"}, map[string]string{"nodes[1].parameters.unit": "unit goes with amount, not with until"}},
		{"both", "wait", map[string]any{"amount": 1.0, "until": "2026-12-24T18:00:00Z"}, map[string]string{"nodes[1].parameters": "not both"}},
		{"negative amount", "wait", map[string]any{"amount": -5.0}, map[string]string{"nodes[1].parameters.amount": "must not be negative"}},
		{"amount as text", "wait", map[string]any{"amount": "soon"}, map[string]string{"nodes[1].parameters.amount": "must be a number"}},
		{"unknown unit", "wait", map[string]any{"amount": 1.0, "unit": "weeks"}, map[string]string{"nodes[1].parameters.unit": `unknown unit "weeks"`}},
		{"malformed until", "wait", map[string]any{"until": "tomorrow"}, map[string]string{"nodes[1].parameters.until": "not an RFC 3339 time"}},
		{"delayMs", "delay", map[string]any{"delayMs": 1500.0}, nil},
		{"go duration", "delay", map[string]any{"duration": "90s"}, nil},
		{"iso duration", "delay", map[string]any{"duration": "PT1H30M"}, nil},
		{"negative delayMs", "delay", map[string]any{"delayMs": -1.0}, map[string]string{"nodes[1].parameters.delayMs": "at least 0"}},
		{"malformed duration", "delay", map[string]any{"duration": "an hour"}, map[string]string{"nodes[1].parameters.duration": "an hour"}},
		{"negative duration", "delay", map[string]any{"duration": "-5s"}, map[string]string{"nodes[1].parameters.duration": "-5s"}},
		{"delay neither: 1 second", "delay", map[string]any{}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ps := checkNode(t, workflow.Node{ID: "w", Type: c.typ, Parameters: c.params})
			wantProblems(t, ps, c.want)
		})
	}
}

func TestWaitResumeTimes(t *testing.T) {
	reg := WithControls(node.NewRegistry())
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	cases := []struct {
		name   string
		typ    string
		params map[string]any
		env    map[string]any
		want   time.Time
	}{
		{"amount minutes", "wait", map[string]any{"amount": 3.0, "unit": "minutes"}, nil, now.Add(3 * time.Minute)},
		{"amount default unit seconds", "wait", map[string]any{"amount": 1.5}, nil, now.Add(1500 * time.Millisecond)},
		{"amount from expression", "wait", map[string]any{"amount": "{{ $trigger.days }}", "unit": "days"}, map[string]any{"$trigger": map[string]any{"days": 2.0}}, now.Add(48 * time.Hour)},
		{"until in the past resumes at once", "wait", map[string]any{"until": "2020-01-01T00:00:00Z"}, nil, time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)},
		{"until from expression", "wait", map[string]any{"until": "{{ $trigger.at }}"}, map[string]any{"$trigger": map[string]any{"at": "2026-11-23T08:00:00+01:00"}}, time.Date(2026, 11, 23, 7, 0, 0, 0, time.UTC)},
		{"no amount: 1 second (RFC 006 §3)", "wait", map[string]any{"resume": "time_interval"}, nil, now.Add(time.Second)},
		{"no amount, unit hours: 1 hour", "wait", map[string]any{"unit": "hours"}, nil, now.Add(time.Hour)},
		{"delay without delayMs or duration: 1 second", "delay", map[string]any{}, nil, now.Add(time.Second)},
		{"delayMs", "delay", map[string]any{"delayMs": 250.0}, nil, now.Add(250 * time.Millisecond)},
		{"go duration", "delay", map[string]any{"duration": "1h30m"}, nil, now.Add(90 * time.Minute)},
		{"iso duration", "delay", map[string]any{"duration": "PT1H30M"}, nil, now.Add(90 * time.Minute)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := compileNode(t, reg, workflow.Node{ID: "w", Type: c.typ, Parameters: c.params})
			res, err := r.Run(context.Background(), &node.Input{Env: c.env, NodeID: "w", Now: now})
			if err != nil {
				t.Fatal(err)
			}
			got, err := ResumeTime(res.Output)
			if err != nil || !got.Equal(c.want) {
				t.Fatalf("resume_at %v (%v), want %v", got, err, c.want)
			}
		})
	}
}

func TestWaitBadRuntimeValues(t *testing.T) {
	reg := WithControls(node.NewRegistry())
	r := compileNode(t, reg, workflow.Node{ID: "w", Type: "wait", Parameters: map[string]any{"until": "{{ $trigger.at }}"}})
	_, err := r.Run(context.Background(), &node.Input{Env: map[string]any{"$trigger": map[string]any{"at": "next week"}}, Now: time.Now()})
	nodeError(t, err, node.CodeInvalidParameter, false)
	r = compileNode(t, reg, workflow.Node{ID: "w", Type: "wait", Parameters: map[string]any{"amount": "{{ $trigger.n }}"}})
	_, err = r.Run(context.Background(), &node.Input{Env: map[string]any{"$trigger": map[string]any{"n": -3.0}}, Now: time.Now()})
	nodeError(t, err, node.CodeInvalidParameter, false)
}

// checkNode runs the engine's check of n (the control types and no other)
// and returns the problems.
func checkNode(t *testing.T, n workflow.Node) workflow.Problems {
	t.Helper()
	var ps workflow.Problems
	WithControls(node.NewRegistry()).CheckNode(workflow.NewNodeCheck(&n, "nodes[1]", nil, &ps))
	return ps
}

// wantProblems and nodeError are nodetest's.
var (
	wantProblems = nodetest.WantProblems
	nodeError    = nodetest.NodeError
)

func compileNode(t *testing.T, reg *node.Registry, n workflow.Node) node.Runner {
	t.Helper()
	return nodetest.Compile(t, reg, n, checkNode(t, n))
}

// fakeType is a registry's type that claims a control node's name.
type fakeType struct{}

func (fakeType) Check(c *workflow.NodeCheck) { c.Report("type", "fake") }
func (fakeType) Compile(*workflow.Node, *expr.Compiler) (node.Runner, error) {
	return nil, errors.New("fake")
}

// TestControlTypes: the engine checks and compiles the control nodes
// itself, beside the registry's types, and a registry's type of the same
// name does not replace one.
func TestControlTypes(t *testing.T) {
	reg := node.NewRegistry()
	reg.Register("http", fakeType{})
	reg.Register("split", fakeType{})
	want := []string{"aggregator", "delay", "digest", "http", "merge", "split", "wait", "wait_for_event", "workflow"}
	all := WithControls(reg)
	if got := all.Names(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Names() = %v, want %v", got, want)
	}
	if typ, _ := all.Lookup("split"); typ != (splitType{}) {
		t.Errorf("split is %T, want the engine's splitType", typ)
	}
	if typ, _ := all.Lookup("http"); typ != (fakeType{}) {
		t.Errorf("http is %T, want the registry's", typ)
	}
	for _, name := range want {
		if isControl(name) == (name == "http") {
			t.Errorf("isControl(%q) = %v", name, isControl(name))
		}
	}
}

// TestControlCheckNeverPanics feeds every control type parameters of every
// wrong shape.
func TestControlCheckNeverPanics(t *testing.T) {
	odd := []any{nil, 1.0, -1.0, "x", "{{", true, []any{nil, 1.0, map[string]any{}}, map[string]any{"": nil, "x": []any{map[string]any{"y": "{{ +"}}}}
	for name := range controlTypes() {
		for _, param := range []string{"input_array", "timeout", "value", "wait_mode", "mode", "resume", "amount", "unit", "until",
			"delayMs", "duration", "unknown"} {
			for _, v := range odd {
				checkNode(t, workflow.Node{ID: "n", Type: name, Parameters: map[string]any{param: v}})
			}
		}
		checkNode(t, workflow.Node{ID: "n", Type: name})
	}
}

// TestControlRunnersArePure: the control runners do no I/O, so the engine
// runs them without a deadline of their own (they still never fuse).
func TestControlRunnersArePure(t *testing.T) {
	reg := WithControls(node.NewRegistry())
	for typ, params := range map[string]map[string]any{
		"wait":       {"amount": 1.0},
		"delay":      {"delayMs": 1.0},
		"split":      {"input_array": []any{}},
		"aggregator": {"value": "{{ $item }}"},
	} {
		r := compileNode(t, reg, workflow.Node{ID: "n", Type: typ, Parameters: params})
		if _, ok := r.(node.Pure); !ok {
			t.Errorf("%s runner is not node.Pure", typ)
		}
	}
}
