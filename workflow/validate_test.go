package workflow

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
)

// validDef is a small valid workflow; tests edit copies of it.
//
//	nodes: 0 start, 1 fetch, 2 check, 3 notify, 4 failed
//	edges: 0 e1 start→fetch, 1 e2 fetch→check, 2 e_fail fetch→failed, 3 e_yes check→notify
func validDef() *Definition {
	return &Definition{
		ID: "order_followup",
		Nodes: []Node{
			{ID: "start", Type: "trigger", Trigger: true},
			{ID: "fetch", Type: "http",
				Error:   &ErrorPolicy{Type: ErrorBranch, ErrorEdge: "e_fail"},
				Retry:   &RetryPolicy{MaxAttempts: 3, InitialDelay: "PT2S", Multiplier: 2},
				Timeout: "30s", Credentials: &CredentialRef{Ref: "crm_api"}},
			{ID: "check", Type: "conditional", Parameters: map[string]any{"true_edge_id": "e_yes"}},
			{ID: "notify", Type: "log"},
			{ID: "failed", Type: "log"},
		},
		Edges: []Edge{
			{ID: "e1", Src: "start", Dst: "fetch"},
			{ID: "e2", Src: "fetch", Dst: "check"},
			{ID: "e_fail", Src: "fetch", Dst: "failed"},
			{ID: "e_yes", Src: "check", Dst: "notify"},
		},
	}
}

// fakeTypes knows a few node types and checks the conditional's edges the
// way the real node types do.
type fakeTypes struct{}

func (fakeTypes) CheckNode(c *NodeCheck) {
	switch c.Node.Type {
	case "trigger", "http":
	case "log":
		// Stands for a message template reading these names.
		refs, _ := c.Node.Parameters["refs"].([]any)
		names := make([]string, len(refs))
		for i, r := range refs {
			names[i], _ = r.(string)
		}
		c.References("parameters.message", names)
	case "conditional":
		for _, k := range []string{"true_edge_id", "false_edge_id"} {
			if id, ok := c.Node.Parameters[k].(string); ok && !c.LeavesNode(id) {
				c.Report("parameters."+k, "edge %q does not leave node %q", id, c.Node.ID)
			}
		}
	default:
		c.Report("type", "unknown node type %q", c.Node.Type)
	}
}

// problemsOf returns the Problems in err, failing the test if err is another error.
func problemsOf(t *testing.T, err error) Problems {
	t.Helper()
	if err == nil {
		return nil
	}
	var ps Problems
	if !errors.As(err, &ps) {
		t.Fatalf("error is %T, want Problems: %v", err, err)
	}
	return ps
}

// expectProblems checks that got holds exactly the wanted problems: same
// paths, messages containing the wanted text.
func expectProblems(t *testing.T, got Problems, want []Problem) {
	t.Helper()
	used := make([]bool, len(got))
	for _, w := range want {
		found := false
		for i, g := range got {
			if !used[i] && g.Path == w.Path && strings.Contains(g.Message, w.Message) {
				used[i], found = true, true
				break
			}
		}
		if !found {
			t.Errorf("missing problem %s: …%s…", w.Path, w.Message)
		}
	}
	for i, g := range got {
		if !used[i] {
			t.Errorf("unexpected problem %s", g)
		}
	}
}

func TestValidateAcceptsValid(t *testing.T) {
	if err := Validate(validDef(), fakeTypes{}); err != nil {
		t.Fatalf("valid definition rejected: %v", err)
	}
	if err := Validate(validDef(), nil); err != nil {
		t.Fatalf("valid definition rejected without types: %v", err)
	}
}

func TestValidateProblems(t *testing.T) {
	tests := []struct {
		name string
		edit func(d *Definition)
		want []Problem
	}{
		{"missing workflow id", func(d *Definition) { d.ID = "" },
			[]Problem{{"id", "missing workflow id"}}},
		{"bad workflow id", func(d *Definition) { d.ID = "order followup" },
			[]Problem{{"id", `"order followup" is not a valid workflow id`}}},
		{"workflow id too long", func(d *Definition) { d.ID = strings.Repeat("a", 65) },
			[]Problem{{"id", "is not a valid workflow id"}}},
		{"bad node id", func(d *Definition) { d.Nodes[3].ID = "3notify"; d.Edges[3].Dst = "3notify" },
			[]Problem{{"nodes[3].id", `"3notify" is not a valid node id`}}},
		{"node id too long", func(d *Definition) {
			id := "n" + strings.Repeat("x", 64)
			d.Nodes[3].ID = id
			d.Edges[3].Dst = id
		}, []Problem{{"nodes[3].id", "is not a valid node id"}}},
		{"reserved node id", func(d *Definition) { d.Nodes[3].ID = "item"; d.Edges[3].Dst = "item" },
			[]Problem{{"nodes[3].id", `node id "item" is reserved`}}},
		{"missing node id", func(d *Definition) { d.Nodes = append(d.Nodes, Node{Type: "log"}) },
			[]Problem{{"nodes[5].id", "missing node id"}, {"nodes[5]", `node "" is not reachable`}}},
		{"duplicate node id", func(d *Definition) { d.Nodes = append(d.Nodes, Node{ID: "check", Type: "log"}) },
			[]Problem{{"nodes[5].id", `duplicate node id "check" (first used by nodes[2])`}}},
		{"missing node type", func(d *Definition) { d.Nodes[3].Type = "" },
			[]Problem{{"nodes[3].type", "missing node type"}}},
		{"duplicate edge id", func(d *Definition) { d.Edges = append(d.Edges, Edge{ID: "e2", Src: "check", Dst: "failed"}) },
			[]Problem{{"edges[4].id", `duplicate edge id "e2" (first used by edges[1])`}}},
		{"empty edge id", func(d *Definition) { d.Edges = append(d.Edges, Edge{Src: "check", Dst: "failed"}) },
			[]Problem{{"edges[4].id", "missing edge id"}}},
		{"edge src names no node", func(d *Definition) { d.Edges[3].Src = "zzz" },
			[]Problem{{"edges[3].src", `no node "zzz"`}, {"nodes[3]", `node "notify" is not reachable from the trigger "start"`},
				{"nodes[2].parameters.true_edge_id", `edge "e_yes" does not leave node "check"`}}},
		// A near miss is taken for the node it resembles: one problem, with
		// the guess, and none of the follow-on ones above.
		{"edge src misspelled", func(d *Definition) { d.Edges[3].Src = "chekc" },
			[]Problem{{"edges[3].src", `no node "chekc"; did you mean "check"?`}}},
		{"edge dst misspelled", func(d *Definition) { d.Edges[0].Dst = "fetc" },
			[]Problem{{"edges[0].dst", `no node "fetc"; did you mean "fetch"?`}}},
		{"references", func(d *Definition) {
			d.Nodes[3].Parameters = map[string]any{"refs": []any{"$trigger", "$fetch", "$node.check", "$item", "$vars", "$env",
				"$fecth", "$nosuch", "$start", "$node.nosuch", "$node.start", "$node.trigger"}}
		}, []Problem{
			{"nodes[3].parameters.message", `$fecth: no node "fecth" in this workflow; did you mean $fetch?`},
			{"nodes[3].parameters.message", `$nosuch: no node "nosuch" in this workflow`},
			{"nodes[3].parameters.message", `$start: the trigger's output is $trigger, whatever the trigger node's id`},
			{"nodes[3].parameters.message", `$node.nosuch: no node "nosuch" in this workflow`},
			{"nodes[3].parameters.message", `$node.start: the trigger's output is $node.trigger`},
		}},
		{"edge dst names no node", func(d *Definition) { d.Edges[3].Dst = "x" },
			[]Problem{{"edges[3].dst", `no node "x"`}, {"nodes[3]", "not reachable"}}},
		{"edge without src and dst", func(d *Definition) { d.Edges = append(d.Edges, Edge{ID: "e9"}) },
			[]Problem{{"edges[4].src", "missing"}, {"edges[4].dst", "missing"}}},
		{"cycle", func(d *Definition) { d.Edges = append(d.Edges, Edge{ID: "back", Src: "notify", Dst: "fetch"}) },
			[]Problem{{"edges[4]", "closes a cycle: fetch -> check -> notify -> fetch"}}},
		{"self loop", func(d *Definition) { d.Edges = append(d.Edges, Edge{ID: "loop", Src: "notify", Dst: "notify"}) },
			[]Problem{{"edges[4]", "closes a cycle: notify -> notify"}}},
		{"unreachable node", func(d *Definition) { d.Nodes = append(d.Nodes, Node{ID: "orphan", Type: "log"}) },
			[]Problem{{"nodes[5]", `node "orphan" is not reachable from the trigger "start"`}}},
		{"unreachable island with its own edges", func(d *Definition) {
			d.Nodes = append(d.Nodes, Node{ID: "i1", Type: "log"}, Node{ID: "i2", Type: "log"})
			d.Edges = append(d.Edges, Edge{ID: "ie", Src: "i1", Dst: "i2"})
		}, []Problem{{"nodes[5]", `"i1" is not reachable`}, {"nodes[6]", `"i2" is not reachable`}}},
		{"no trigger", func(d *Definition) { d.Nodes[0].Trigger = false; d.Nodes[0].Type = "log" },
			[]Problem{{"nodes", "no trigger node"}}},
		{"several triggers", func(d *Definition) {
			d.Nodes = append(d.Nodes, Node{ID: "start2", Type: "trigger", Trigger: true})
			d.Edges = append(d.Edges, Edge{ID: "e9", Src: "start2", Dst: "check"})
		}, []Problem{{"nodes", `2 trigger nodes: "start" (nodes[0]), "start2" (nodes[5])`}}},
		{"trigger of another type", func(d *Definition) { d.Nodes[0].Type = "http" },
			[]Problem{{"nodes[0].type", `the trigger node must have type "trigger", got "http"`}}},
		{"trigger type without trigger flag", func(d *Definition) {
			d.Nodes = append(d.Nodes, Node{ID: "t2", Type: "trigger"})
			d.Edges = append(d.Edges, Edge{ID: "e9", Src: "notify", Dst: "t2"})
		}, []Problem{{"nodes[5].trigger", `a node of type "trigger" must have "trigger": true`}}},
		{"edge into the trigger", func(d *Definition) { d.Edges = append(d.Edges, Edge{ID: "e9", Src: "notify", Dst: "start"}) },
			[]Problem{{"edges[4].dst", `edge into the trigger node "start"`}, {"edges[4]", "closes a cycle: start -> fetch -> check -> notify -> start"}}},
		{"unknown error strategy", func(d *Definition) { d.Nodes[3].Error = &ErrorPolicy{Type: "retry"} },
			[]Problem{{"nodes[3].error.type", `unknown error strategy "retry": want "halt", "ignore" or "branch"`}}},
		{"branch without error edge", func(d *Definition) { d.Nodes[1].Error.ErrorEdge = "" },
			[]Problem{{"nodes[1].error.error_edge", `required when error.type is "branch"`}}},
		{"error edge that does not leave the node", func(d *Definition) { d.Nodes[1].Error.ErrorEdge = "e_yes" },
			[]Problem{{"nodes[1].error.error_edge", `edge "e_yes" does not leave node "fetch"`}}},
		{"error edge that does not exist", func(d *Definition) { d.Nodes[1].Error.ErrorEdge = "e404" },
			[]Problem{{"nodes[1].error.error_edge", `edge "e404" does not leave node "fetch"`}}},
		{"error edge without branch", func(d *Definition) { d.Nodes[1].Error.Type = ErrorIgnore },
			[]Problem{{"nodes[1].error.error_edge", `only followed when error.type is "branch" (it is "ignore")`}}},
		{"error edge with default strategy", func(d *Definition) { d.Nodes[1].Error.Type = "" },
			[]Problem{{"nodes[1].error.error_edge", `(it is "halt")`}}},
		{"malformed timeout", func(d *Definition) { d.Nodes[1].Timeout = "30 seconds" },
			[]Problem{{"nodes[1].timeout", `invalid duration "30 seconds"`}}},
		{"negative timeout", func(d *Definition) { d.Nodes[1].Timeout = "-5s" },
			[]Problem{{"nodes[1].timeout", "negative duration"}}},
		{"zero timeout", func(d *Definition) { d.Nodes[1].Timeout = "PT0S" },
			[]Problem{{"nodes[1].timeout", "longer than zero"}}},
		{"malformed initial delay", func(d *Definition) { d.Nodes[1].Retry.InitialDelay = "P1M" },
			[]Problem{{"nodes[1].retry.initial_delay", "months have no fixed length"}}},
		{"max attempts below 1", func(d *Definition) { d.Nodes[1].Retry.MaxAttempts = -1 },
			[]Problem{{"nodes[1].retry.max_attempts", "-1 is out of range: want 1 to 100"}}},
		{"max attempts above 100", func(d *Definition) { d.Nodes[1].Retry.MaxAttempts = 101 },
			[]Problem{{"nodes[1].retry.max_attempts", "101 is out of range"}}},
		{"multiplier below 1", func(d *Definition) { d.Nodes[1].Retry.Multiplier = 0.5 },
			[]Problem{{"nodes[1].retry.multiplier", "0.5 is out of range"}}},
		{"multiplier NaN", func(d *Definition) { d.Nodes[1].Retry.Multiplier = math.NaN() },
			[]Problem{{"nodes[1].retry.multiplier", "NaN is out of range"}}},
		{"multiplier infinite", func(d *Definition) { d.Nodes[1].Retry.Multiplier = math.Inf(1) },
			[]Problem{{"nodes[1].retry.multiplier", "out of range"}}},
		{"credentials without ref", func(d *Definition) { d.Nodes[1].Credentials.Ref = "" },
			[]Problem{{"nodes[1].credentials.ref", "missing"}}},
		{"error edge misspelled", func(d *Definition) { d.Nodes[1].Error.ErrorEdge = "e_fial" },
			[]Problem{{"nodes[1].error.error_edge", `edge "e_fial" does not leave node "fetch"; did you mean "e_fail"?`}}},
		{"node type problem", func(d *Definition) { d.Nodes[2].Parameters["true_edge_id"] = "e9" },
			[]Problem{{"nodes[2].parameters.true_edge_id", `edge "e9" does not leave node "check"`}}},
		{"unknown node type", func(d *Definition) { d.Nodes[3].Type = "teleport" },
			[]Problem{{"nodes[3].type", `unknown node type "teleport"`}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := validDef()
			tt.edit(d)
			expectProblems(t, problemsOf(t, Validate(d, fakeTypes{})), tt.want)
		})
	}
}

func TestValidateReportsEverythingAtOnce(t *testing.T) {
	d := validDef()
	d.ID = "bad id"
	d.Nodes[1].Retry.MaxAttempts = 0 // unset: fine
	d.Nodes[1].Retry.Multiplier = 0.1
	d.Nodes[3].Timeout = "soon"
	d.Nodes = append(d.Nodes, Node{ID: "fetch", Type: "log"})
	d.Edges = append(d.Edges, Edge{ID: "e1", Src: "failed", Dst: "ghost"})
	d.Nodes[2].Parameters["false_edge_id"] = "e1"
	ps := problemsOf(t, Validate(d, fakeTypes{}))
	expectProblems(t, ps, []Problem{
		{"id", "not a valid workflow id"},
		{"nodes[1].retry.multiplier", "out of range"},
		{"nodes[3].timeout", `invalid duration "soon"`},
		{"nodes[5].id", `duplicate node id "fetch"`},
		{"edges[4].id", `duplicate edge id "e1"`},
		{"edges[4].dst", `no node "ghost"`},
		{"nodes[2].parameters.false_edge_id", `edge "e1" does not leave node "check"`},
	})
	msg := ps.Error()
	if !strings.HasPrefix(msg, "invalid workflow: 7 problem(s):") || !strings.Contains(msg, "\n  edges[4].dst: no node \"ghost\"") {
		t.Errorf("Error() = %q", msg)
	}
}

func TestValidatePassesOutgoingEdgesToTypes(t *testing.T) {
	d := validDef()
	var seen []string
	Validate(d, checkerFunc(func(c *NodeCheck) {
		ids := make([]string, len(c.Outgoing))
		for i, e := range c.Outgoing {
			ids[i] = e.ID
		}
		seen = append(seen, fmt.Sprintf("%s %s %v", c.Path, c.Node.ID, ids))
		c.Outgoing = append(c.Outgoing, Edge{ID: "scribble"}) // must not corrupt another node's edges
	}))
	want := []string{"nodes[0] start [e1]", "nodes[1] fetch [e2 e_fail]", "nodes[2] check [e_yes]", "nodes[3] notify []", "nodes[4] failed []"}
	if fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Errorf("checker saw %v, want %v", seen, want)
	}
}

type checkerFunc func(*NodeCheck)

func (f checkerFunc) CheckNode(c *NodeCheck) { f(c) }

func TestValidateNil(t *testing.T) {
	expectProblems(t, problemsOf(t, Validate(nil, nil)), []Problem{{"", "no workflow definition"}})
	// A zero definition has nil slices and maps everywhere.
	expectProblems(t, problemsOf(t, Validate(&Definition{}, fakeTypes{})), []Problem{{"id", "missing"}, {"nodes", "no trigger node"}})
}

func TestValidateLimits(t *testing.T) {
	d := validDef()
	d.Nodes = make([]Node, MaxNodes+1)
	expectProblems(t, problemsOf(t, Validate(d, fakeTypes{})), []Problem{{"nodes", "10001 nodes, over the limit of 10000"}})

	d = validDef()
	d.Edges = make([]Edge, MaxEdges+1)
	expectProblems(t, problemsOf(t, Validate(d, fakeTypes{})), []Problem{{"edges", "100001 edges, over the limit of 100000"}})
}

// TestValidateLargeGraph runs the biggest graph allowed: a chain of MaxNodes
// nodes (deep enough to overflow a recursive search) with MaxEdges edges,
// closed into one long cycle.
func TestValidateLargeGraph(t *testing.T) {
	d := &Definition{ID: "big"}
	d.Nodes = make([]Node, MaxNodes)
	for i := range d.Nodes {
		d.Nodes[i] = Node{ID: fmt.Sprintf("n%d", i), Type: "log"}
	}
	d.Nodes[0].Type, d.Nodes[0].Trigger = "trigger", true
	for i := 1; i < MaxNodes; i++ {
		d.Edges = append(d.Edges, Edge{ID: fmt.Sprintf("c%d", i), Src: d.Nodes[i-1].ID, Dst: d.Nodes[i].ID})
	}
	// Forward skip edges keep it acyclic and fill it up to the limit.
	for len(d.Edges) < MaxEdges {
		i := len(d.Edges) % (MaxNodes - 5)
		d.Edges = append(d.Edges, Edge{ID: fmt.Sprintf("s%d", len(d.Edges)), Src: d.Nodes[i+1].ID, Dst: d.Nodes[i+5].ID})
	}
	if err := Validate(d, fakeTypes{}); err != nil {
		t.Fatalf("large valid graph rejected: %v", err)
	}
	d.Edges[len(d.Edges)-1] = Edge{ID: "back", Src: "n9999", Dst: "n1"}
	ps := problemsOf(t, Validate(d, fakeTypes{}))
	expectProblems(t, ps, []Problem{{fmt.Sprintf("edges[%d]", len(d.Edges)-1), "closes a cycle: n1 -> n2"}})
	if msg := ps[0].Message; len(msg) > 400 || !strings.Contains(msg, "more)") || !strings.HasSuffix(msg, "n9999 -> n1") {
		t.Errorf("long cycle not abbreviated: %q", msg)
	}
}

func TestValidateTruncatesHugeValues(t *testing.T) {
	d := validDef()
	huge := strings.Repeat("x", 1<<20)
	for i := 0; i < 100; i++ {
		d.Edges = append(d.Edges, Edge{ID: fmt.Sprintf("h%d", i), Src: "notify", Dst: huge})
	}
	ps := problemsOf(t, Validate(d, nil))
	if len(ps) != 100 {
		t.Fatalf("got %d problems, want 100", len(ps))
	}
	if n := len(ps.Error()); n > 100*200 {
		t.Errorf("error is %d bytes: huge values are not truncated", n)
	}
}

func TestValidIDs(t *testing.T) {
	for id, want := range map[string]bool{
		"a": true, "_x": true, "Fetch_User2": true, strings.Repeat("a", 64): true,
		"": false, "2a": false, "a-b": false, "a b": false, "é": false, strings.Repeat("a", 65): false,
	} {
		if got := ValidNodeID(id); got != want {
			t.Errorf("ValidNodeID(%q) = %v, want %v", id, got, want)
		}
	}
	for id, want := range map[string]bool{
		"a": true, "2a": true, "wf-1_B": true, strings.Repeat("a", 64): true,
		"": false, "a b": false, "a.b": false, strings.Repeat("a", 65): false,
	} {
		if got := ValidWorkflowID(id); got != want {
			t.Errorf("ValidWorkflowID(%q) = %v, want %v", id, got, want)
		}
	}
}

func TestValidateReportsOneCyclePerComponent(t *testing.T) {
	d := validDef()
	d.Edges = append(d.Edges,
		// fetch, check and notify form one component with two cycles.
		Edge{ID: "b1", Src: "notify", Dst: "fetch"},
		Edge{ID: "b2", Src: "check", Dst: "fetch"},
		// failed loops on itself: a second component.
		Edge{ID: "b3", Src: "failed", Dst: "failed"},
	)
	expectProblems(t, problemsOf(t, Validate(d, nil)), []Problem{
		{"edges[5]", "closes a cycle: fetch -> check -> fetch"},
		{"edges[6]", "closes a cycle: failed -> failed"},
	})
}
