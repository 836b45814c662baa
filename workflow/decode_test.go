package workflow

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

const sampleJSON = `{
  "id": "order_followup",
  "name": "Order follow-up",
  "nodes": [
    {"id": "start", "type": "trigger", "trigger": true},
    {"id": "fetch", "name": "Fetch", "type": "http",
     "parameters": {"method": "GET", "url": "https://x/{{ $trigger.id }}", "timeout": 5},
     "credentials": {"ref": "crm_api"},
     "error": {"type": "branch", "error_edge": "e_fail"},
     "retry": {"max_attempts": 3, "initial_delay": "PT2S", "multiplier": 2},
     "timeout": "30s",
     "output": {}},
    {"id": "check", "type": "conditional", "parameters": {"true_edge_id": "e_yes"}},
    {"id": "notify", "type": "log"},
    {"id": "failed", "type": "log"}
  ],
  "edges": [
    {"id": "e1", "src": "start", "dst": "fetch"},
    {"id": "e2", "src": "fetch", "dst": "check", "label": "ok"},
    {"id": "e_fail", "src": "fetch", "dst": "failed"},
    {"id": "e_yes", "src": "check", "dst": "notify"}
  ]
}`

func TestDecode(t *testing.T) {
	d, err := Decode([]byte(sampleJSON))
	if err != nil {
		t.Fatal(err)
	}
	want := validDef()
	want.Name = "Order follow-up"
	want.Nodes[1].Name = "Fetch"
	want.Nodes[1].Parameters = map[string]any{"method": "GET", "url": "https://x/{{ $trigger.id }}", "timeout": 5.0}
	want.Nodes[1].Output = json.RawMessage(`{}`)
	want.Edges[1].Label = "ok"
	if !reflect.DeepEqual(d, want) {
		got, _ := json.MarshalIndent(d, "", " ")
		t.Fatalf("decoded\n%s", got)
	}
	if err := Validate(d, fakeTypes{}); err != nil {
		t.Fatal(err)
	}
}

func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []Problem
	}{
		{"wrong type in retry", `{"id":"w","nodes":[{"id":"a"},{"id":"b"},{"id":"c","retry":{"max_attempts":"3"}}]}`,
			[]Problem{{"nodes[2].retry.max_attempts", "want a number, got string"}}},
		{"fractional attempts", `{"nodes":[{"retry":{"max_attempts":1.5}}]}`,
			[]Problem{{"nodes[0].retry.max_attempts", "want a whole number within range, got 1.5"}}},
		{"wrong types everywhere", `{"id":1,"name":[],"nodes":{},"edges":[{"id":true,"src":null,"dst":2}]}`,
			[]Problem{{"id", "want a string, got number"}, {"name", "want a string, got array"}, {"nodes", "want an array, got object"},
				{"edges[0].id", "want a string, got boolean"}, {"edges[0].dst", "want a string, got number"}}},
		{"wrong node field types", `{"nodes":[{"trigger":"yes","parameters":[1],"error":"halt","retry":[],"credentials":"k","timeout":30}]}`,
			[]Problem{{"nodes[0].trigger", "want true or false, got string"}, {"nodes[0].parameters", "want an object, got array"},
				{"nodes[0].error", "want an object, got string"}, {"nodes[0].retry", "want an object, got array"},
				{"nodes[0].credentials", "want an object, got string"}, {"nodes[0].timeout", "want a string, got number"}}},
		{"node not an object", `{"nodes":[1, null]}`,
			[]Problem{{"nodes[0]", "want an object, got number"}, {"nodes[1]", "want a node object, got null"}}},
		{"edge not an object", `{"edges":["e1", null]}`,
			[]Problem{{"edges[0]", "want an object, got string"}, {"edges[1]", "want an edge object, got null"}}},
		{"unknown top-level field", `{"id":"w","version":2}`,
			[]Problem{{"version", "unknown field (workflow fields: id, name, nodes, edges, settings)"}}},
		{"unknown node field", `{"nodes":[{"id":"a"},{"id":"b","params":{}}]}`,
			[]Problem{{"nodes[1].params", "unknown field (node fields: id, name, type"}}},
		{"unknown edge field", `{"edges":[{"id":"e","from":"a"}]}`,
			[]Problem{{"edges[0].from", "unknown field (edge fields: id, src, dst, label)"}}},
		{"unknown nested fields", `{"nodes":[{"error":{"type":"halt","edge":"x"},"retry":{"delay":"5s"},"credentials":{"ref":"a","secret":"s"}}]}`,
			[]Problem{{"nodes[0].error.edge", "unknown field"}, {"nodes[0].retry.delay", "unknown field"}, {"nodes[0].credentials.secret", "unknown field"}}},
		{"wrong case", `{"ID":"w"}`,
			[]Problem{{"ID", `unknown field; did you mean "id"?`}}},
		{"explicit zero attempts", `{"nodes":[{"retry":{"max_attempts":0}}]}`,
			[]Problem{{"nodes[0].retry.max_attempts", "0 is out of range: want 1 to 100"}}},
		{"explicit zero multiplier", `{"nodes":[{"retry":{"multiplier":0}}]}`,
			[]Problem{{"nodes[0].retry.multiplier", "0 is out of range"}}},
		{"not an object", `[{"id":"w"}]`,
			[]Problem{{"", "a workflow definition must be a JSON object, got array"}}},
		{"null", ` null `,
			[]Problem{{"", "a workflow definition must be a JSON object, got null"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Decode([]byte(tt.in))
			if d != nil {
				t.Errorf("Decode returned a definition with an error")
			}
			expectProblems(t, problemsOf(t, err), tt.want)
		})
	}
}

func TestDecodeNulls(t *testing.T) {
	d, err := Decode([]byte(`{"id":"w","name":null,"nodes":null,"edges":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	if d.Nodes != nil || d.Edges == nil || len(d.Edges) != 0 {
		t.Errorf("nodes %v edges %v", d.Nodes, d.Edges)
	}
	d, err = Decode([]byte(`{"nodes":[{"id":"a","error":null,"retry":null,"credentials":null,"output":null}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if n := d.Nodes[0]; n.Error != nil || n.Retry != nil || n.Credentials != nil {
		t.Errorf("null objects decoded as %+v", n)
	}
}

func TestDecodeSyntaxError(t *testing.T) {
	_, err := Decode([]byte("{\n  \"id\": \"w\",\n  \"nodes\": [,]\n}"))
	if err == nil || !strings.Contains(err.Error(), "line 3, column 13") || !strings.Contains(err.Error(), "not valid JSON") {
		t.Fatalf("err = %v, want line 3, column 13", err)
	}
	_, err = Decode([]byte(`{"id": "w"`))
	if err == nil || !strings.Contains(err.Error(), "unexpected end of JSON input") {
		t.Fatalf("err = %v", err)
	}
	_, err = Decode([]byte(`{"id": "w"} {}`))
	if err == nil || !strings.Contains(err.Error(), "line 1, column 13") {
		t.Fatalf("trailing data: err = %v", err)
	}
	for _, in := range []string{"", "  \n"} {
		if _, err := Decode([]byte(in)); err == nil || !strings.Contains(err.Error(), "empty") {
			t.Errorf("Decode(%q) err = %v", in, err)
		}
	}
}

func TestDecodeSizeLimit(t *testing.T) {
	pad := func(n int) []byte {
		prefix := `{"id":"w","name":"`
		return []byte(prefix + strings.Repeat("a", n-len(prefix)-2) + `"}`)
	}
	if _, err := Decode(pad(MaxDefinitionSize)); err != nil {
		t.Fatalf("definition of exactly the limit rejected: %v", err)
	}
	_, err := Decode(pad(MaxDefinitionSize + 1))
	if err == nil || !strings.Contains(err.Error(), "5242881 bytes, over the limit of 5242880") {
		t.Fatalf("err = %v", err)
	}
}

func TestDecodeDoesNotAliasInput(t *testing.T) {
	in := []byte(`{"nodes":[{"id":"a","output":{"k":1}}]}`)
	d, err := Decode(in)
	if err != nil {
		t.Fatal(err)
	}
	for i := range in {
		in[i] = ' '
	}
	if string(d.Nodes[0].Output) != `{"k":1}` {
		t.Errorf("output changed with the input buffer: %q", d.Nodes[0].Output)
	}
}

func TestLoad(t *testing.T) {
	if _, err := Load([]byte(sampleJSON), fakeTypes{}); err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(sampleJSON, `"dst": "notify"`, `"dst": "nobody"`, 1)
	_, err := Load([]byte(bad), fakeTypes{})
	expectProblems(t, problemsOf(t, err), []Problem{{"edges[3].dst", `no node "nobody"`}, {"nodes[3]", "not reachable"}})
	bad = strings.Replace(sampleJSON, `"max_attempts": 3`, `"max_attempts": "3"`, 1)
	_, err = Load([]byte(bad), fakeTypes{})
	expectProblems(t, problemsOf(t, err), []Problem{{"nodes[1].retry.max_attempts", "want a number, got string"}})
}

// TestLoadListsUnknownFieldsWithEverythingElse: an unknown field leaves the
// rest of the definition whole, so it does not hide the other problems.
func TestLoadListsUnknownFieldsWithEverythingElse(t *testing.T) {
	bad := strings.Replace(sampleJSON, `"id": "order_followup"`, `"id": "order followup", "nmae": "x", "colour": "red"`, 1)
	bad = strings.Replace(bad, `"dst": "notify"`, `"dst": "nobody"`, 1)
	_, err := Load([]byte(bad), fakeTypes{})
	expectProblems(t, problemsOf(t, err), []Problem{
		{"colour", "unknown field (workflow fields: id, name, nodes, edges, settings)"},
		{"nmae", `unknown field; did you mean "name"?`},
		{"id", `"order followup" is not a valid workflow id`},
		{"edges[3].dst", `no node "nobody"`}, {"nodes[3]", "not reachable"},
	})
	// Decode alone still fails on the unknown fields.
	if _, err := Decode([]byte(bad)); err == nil {
		t.Error("Decode accepted unknown fields")
	}
}

func TestDecodeLimits(t *testing.T) {
	many := func(field, elem string, n int) []byte {
		return []byte(`{"` + field + `":[` + strings.TrimSuffix(strings.Repeat(elem+",", n), ",") + `]}`)
	}
	_, err := Decode(many("nodes", "{}", MaxNodes+1))
	expectProblems(t, problemsOf(t, err), []Problem{{"nodes", "10001 nodes, over the limit of 10000"}})
	_, err = Decode(many("edges", "{}", MaxEdges+1))
	expectProblems(t, problemsOf(t, err), []Problem{{"edges", "100001 edges, over the limit of 100000"}})
	if d, err := Decode(many("nodes", `{"id":"a"}`, MaxNodes)); err != nil || len(d.Nodes) != MaxNodes {
		t.Fatalf("nodes at the limit: %v", err)
	}

	// Problems are listed up to a bound, then the list says it stopped.
	var b strings.Builder
	b.WriteString(`{"nodes":[{`)
	for i := 0; i < 5000; i++ {
		fmt.Fprintf(&b, `"x%d":1,`, i)
	}
	b.WriteString(`"id":"a"}]}`)
	ps := problemsOf(t, func() error { _, err := Decode([]byte(b.String())); return err }())
	if len(ps) != maxDecodeProblems+1 || !strings.Contains(ps[len(ps)-1].Message, "stopped listing") {
		t.Fatalf("%d problems, last %v", len(ps), ps[len(ps)-1])
	}
}

// BenchmarkLoadLarge decodes and validates a definition near the size limit.
func BenchmarkLoadLarge(b *testing.B) {
	d := &Definition{ID: "big"}
	for i := 0; i < MaxNodes; i++ {
		d.Nodes = append(d.Nodes, Node{ID: fmt.Sprintf("n%d", i), Type: "log", Parameters: map[string]any{"message": "hello {{ $trigger.name }}"}})
	}
	d.Nodes[0].Type, d.Nodes[0].Trigger = "trigger", true
	for i := 0; len(d.Edges) < MaxEdges; i++ {
		s := i % (MaxNodes - 1)
		dst := s + 1 // a chain first, then forward skips
		if i >= MaxNodes-1 {
			dst = min(s+2+i%3, MaxNodes-1)
		}
		d.Edges = append(d.Edges, Edge{ID: fmt.Sprintf("e%d", i), Src: d.Nodes[s].ID, Dst: d.Nodes[dst].ID})
	}
	data, err := json.Marshal(d)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := Load(data, fakeTypes{}); err != nil {
			b.Fatal(err.Error()[:min(len(err.Error()), 500)])
		}
	}
}
