package workflow

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

var fuzzSeeds = []string{
	sampleJSON,
	`{"id":"w","nodes":[{"id":"t","type":"trigger","trigger":true},{"id":"a","type":"log"}],"edges":[{"id":"e","src":"t","dst":"a"}]}`,
	// cycle, edge into the trigger, duplicates, dangling edges
	`{"id":"w","nodes":[{"id":"t","type":"trigger","trigger":true},{"id":"a","type":"log"},{"id":"b","type":"log"},{"id":"a","type":"log"}],
	  "edges":[{"id":"e","src":"t","dst":"a"},{"id":"e","src":"a","dst":"b"},{"id":"f","src":"b","dst":"a"},{"id":"g","src":"b","dst":"t"},{"id":"","src":"x","dst":""}]}`,
	// several triggers, bad policies, bad durations
	`{"id":"w!","nodes":[{"id":"t","type":"trigger","trigger":true},{"id":"u","type":"http","trigger":true,
	  "error":{"type":"branch","error_edge":"zz"},"retry":{"max_attempts":101,"initial_delay":"P1M","multiplier":0.5},"timeout":"PT"},
	  {"id":"c","type":"conditional","parameters":{"true_edge_id":"e9","false_edge_id":7}}],"edges":[{"id":"e1","src":"t","dst":"c"}]}`,
	`{"id":"w","nodes":[{"id":"t","type":"trigger","trigger":true,"output":{"x":[1,2]}},{"id":"s","type":"log","error":{"type":"ignore","error_edge":"e"}}],"edges":[{"id":"e","src":"t","dst":"s","label":"l"}]}`,
	`{"id":"w","nodes":[{"id":"a","type":"log","retry":{"max_attempts":"3"}},{"ID":"b"}],"edges":{}}`,
	`{"id":"w","nodes":[null,1,"x",[]],"edges":[null]}`,
	`{"nodes":[{"retry":{"max_attempts":0,"multiplier":0}}]}`,
	`{"id": "w", "nodes": [,]}`,
	`[]`, `null`, `""`, `{}`, ``,
}

// FuzzDecodeValidate checks that no input makes Decode or Validate panic, that
// their errors are well-formed, and that whatever Validate accepts really is
// a DAG reachable from one trigger, which a Graph indexes faithfully, and
// which survives a JSON round trip.
func FuzzDecodeValidate(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := Decode(data)
		if err != nil {
			if d != nil {
				t.Fatal("Decode returned a definition and an error")
			}
			var ps Problems
			if errors.As(err, &ps) && len(ps) == 0 {
				t.Fatal("Decode returned empty Problems")
			}
			return
		}
		err = Validate(d, fakeTypes{})
		cyclic := hasCycle(d)
		if err != nil {
			var ps Problems
			if !errors.As(err, &ps) || len(ps) == 0 {
				t.Fatalf("Validate returned %T %v", err, err)
			}
			reported := false
			for _, p := range ps {
				if p.Message == "" {
					t.Fatalf("problem without a message at %q", p.Path)
				}
				reported = reported || strings.Contains(p.Message, "closes a cycle")
			}
			if cyclic != reported && len(d.Nodes) <= MaxNodes && len(d.Edges) <= MaxEdges {
				t.Fatalf("graph has a cycle: %v, cycle reported: %v\n%v", cyclic, reported, err)
			}
			return
		}
		if cyclic {
			t.Fatal("Validate accepted a cycle")
		}
		checkValidGraph(t, d)

		again, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		d2, err := Load(again, fakeTypes{})
		if err != nil {
			t.Fatalf("re-encoded definition rejected: %v\n%s", err, again)
		}
		for i := range d.Nodes {
			// Marshal compacts raw JSON (output is unused anyway) and omits
			// empty parameters, which decode as nil.
			d.Nodes[i].Output, d2.Nodes[i].Output = nil, nil
			if len(d.Nodes[i].Parameters) == 0 {
				d.Nodes[i].Parameters = nil
			}
		}
		if !reflect.DeepEqual(d, d2) {
			t.Fatalf("round trip changed the definition\n%s", again)
		}
	})
}

// hasCycle is Kahn's algorithm over the edges whose ends exist, an
// independent check of Validate's cycle detection.
func hasCycle(d *Definition) bool {
	idx := map[string]int{}
	for i, n := range d.Nodes {
		if _, dup := idx[n.ID]; !dup {
			idx[n.ID] = i
		}
	}
	indeg := make([]int, len(d.Nodes))
	succ := make([][]int, len(d.Nodes))
	for _, e := range d.Edges {
		s, ok1 := idx[e.Src]
		t, ok2 := idx[e.Dst]
		if ok1 && ok2 {
			succ[s] = append(succ[s], t)
			indeg[t]++
		}
	}
	var queue []int
	for i, k := range indeg {
		if k == 0 {
			queue = append(queue, i)
		}
	}
	done := 0
	for len(queue) > 0 {
		u := queue[0]
		queue = queue[1:]
		done++
		for _, w := range succ[u] {
			if indeg[w]--; indeg[w] == 0 {
				queue = append(queue, w)
			}
		}
	}
	return done < len(d.Nodes)
}

func checkValidGraph(t *testing.T, d *Definition) {
	t.Helper()
	g := NewGraph(d)
	tr := g.Trigger()
	if tr == nil || tr.Type != "trigger" || len(g.Incoming(tr.ID)) != 0 {
		t.Fatalf("valid definition has trigger %v", tr)
	}
	seen := map[string]bool{tr.ID: true}
	queue := []string{tr.ID}
	for len(queue) > 0 {
		id := queue[0]
		queue = queue[1:]
		for _, e := range g.Outgoing(id) {
			if e.Src != id {
				t.Fatalf("Outgoing(%s) holds %v", id, e)
			}
			if _, ok := g.Node(e.Dst); !ok {
				t.Fatalf("edge %v leads nowhere", e)
			}
			if !seen[e.Dst] {
				seen[e.Dst] = true
				queue = append(queue, e.Dst)
			}
		}
	}
	for i := range d.Nodes {
		n := &d.Nodes[i]
		if got, ok := g.Node(n.ID); !ok || got != n {
			t.Fatalf("Node(%s) = %v", n.ID, got)
		}
		if !seen[n.ID] {
			t.Fatalf("node %s is not reachable", n.ID)
		}
		if ee := n.ErrorEdge(); ee != "" {
			if e, ok := g.Edge(ee); !ok || e.Src != n.ID {
				t.Fatalf("error edge %s of %s is %v", ee, n.ID, e)
			}
		}
		if n.Timeout != "" && n.TimeoutDuration() <= 0 {
			t.Fatalf("timeout %q accepted but unusable", n.Timeout)
		}
		r := n.RetrySettings()
		if r.MaxAttempts < 1 || r.MaxAttempts > MaxAttempts || r.Multiplier < 1 || r.InitialDelay < 0 {
			t.Fatalf("retry settings %+v", r)
		}
		for a := 1; a < r.MaxAttempts; a++ {
			if b := r.Backoff(a); b < 0 || b > MaxBackoff || a > 1 && b < r.Backoff(a-1) {
				t.Fatalf("Backoff(%d) = %v for %+v", a, b, r)
			}
		}
	}
}
