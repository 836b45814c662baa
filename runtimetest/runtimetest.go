// Package runtimetest is the conformance suite of Rune's runtimes: the same
// workflows, run end to end, must behave the same on the embedded runtime
// and on RabbitMQ + Redis. Each scenario states what a user relies on.
package runtimetest

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rune-org/rune/message"
)

// Runtime runs one workflow to its completion, reporting every status.
type Runtime interface {
	Run(ctx context.Context, def []byte, input any, onStatus func(*message.NodeStatus)) (*message.Completion, error)
}

// Run runs every scenario on runtimes from newRuntime (one per scenario).
func Run(t *testing.T, newRuntime func(t *testing.T) Runtime) {
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			rt := newRuntime(t)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			r := &result{t: t}
			var input any
			if sc.input != "" {
				if err := json.Unmarshal([]byte(sc.input), &input); err != nil {
					t.Fatal(err)
				}
			}
			onStatus := func(s *message.NodeStatus) { r.add(s) }
			c, err := rt.Run(ctx, []byte(sc.def), input, onStatus)
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			r.c = c
			sc.check(r)
		})
	}
}

// result is one run, with assertions that name what went wrong.
type result struct {
	t        *testing.T
	c        *message.Completion
	statuses []*message.NodeStatus
}

func (r *result) add(s *message.NodeStatus) { r.statuses = append(r.statuses, s) }

func (r *result) status(want string) {
	r.t.Helper()
	if r.c.Status != want {
		r.t.Fatalf("completion %s (failure %+v), want %s", r.c.Status, r.c.FailureReason, want)
	}
}

// get reads a path like "$agg.items" from the final context.
func (r *result) get(path string) any {
	r.t.Helper()
	parts := strings.Split(path, ".")
	var cur any = r.c.FinalContext
	for _, p := range parts {
		m, ok := cur.(map[string]any)
		if !ok {
			r.t.Fatalf("final context: %s: %q is not inside an object; final context %s", path, p, r.dump())
		}
		if cur, ok = m[p]; !ok {
			r.t.Fatalf("final context lacks %s (no %q); final context %s", path, p, r.dump())
		}
	}
	return cur
}

// equal compares a final-context value with JSON text.
func (r *result) equal(path, wantJSON string) {
	r.t.Helper()
	var want any
	if err := json.Unmarshal([]byte(wantJSON), &want); err != nil {
		r.t.Fatal(err)
	}
	got := normalise(r.get(path))
	if !reflect.DeepEqual(got, want) {
		g, _ := json.Marshal(got)
		r.t.Fatalf("%s = %s, want %s", path, g, wantJSON)
	}
}

func (r *result) absent(key string) {
	r.t.Helper()
	if _, ok := r.c.FinalContext[key]; ok {
		r.t.Fatalf("final context holds %s, which should not have run", key)
	}
}

// count counts statuses of node with status st.
func (r *result) count(node, st string) int {
	n := 0
	for _, s := range r.statuses {
		if s.NodeID == node && s.Status == st {
			n++
		}
	}
	return n
}

func (r *result) dump() string {
	b, _ := json.Marshal(r.c.FinalContext)
	return string(b)
}

// normalise turns any JSON-compatible value into what encoding/json decodes.
func normalise(v any) any {
	b, _ := json.Marshal(v)
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}

type scenario struct {
	name  string
	def   string
	input string
	check func(r *result)
}

func wf(id string, nodes, edges string) string {
	return fmt.Sprintf(`{"id":%q,"nodes":[{"id":"start","type":"trigger","trigger":true},%s],"edges":[%s]}`, id, nodes, edges)
}

var scenarios = []scenario{
	{
		name: "NestedSplits",
		def: wf("nested", `
			{"id":"users","type":"split","parameters":{"input_array":"{{ $trigger.users }}"}},
			{"id":"orders","type":"split","parameters":{"input_array":"{{ $item.orders }}"}},
			{"id":"price","type":"set","parameters":{"values":{"cents":"{{ $item * 100 }}"}}},
			{"id":"per_user","type":"aggregator","parameters":{"value":"{{ $price.cents }}"}},
			{"id":"user_total","type":"set","parameters":{"values":{"sum":"{{ sum($per_user.items) }}","n":"{{ $per_user.total }}"}}},
			{"id":"all","type":"aggregator"}`,
			`{"id":"e1","src":"start","dst":"users"},{"id":"e2","src":"users","dst":"orders"},{"id":"e3","src":"orders","dst":"price"},
			{"id":"e4","src":"price","dst":"per_user"},{"id":"e5","src":"per_user","dst":"user_total"},{"id":"e6","src":"user_total","dst":"all"}`),
		input: `{"users":[{"orders":[1,2,3]},{"orders":[5]},{"orders":[0.5,0.25]}]}`,
		check: func(r *result) {
			r.status(message.CompletionCompleted)
			r.equal("$all.items", `[{"sum":600,"n":3},{"sum":500,"n":1},{"sum":75,"n":2}]`)
			r.equal("$all.succeeded", `3`)
			r.absent("$per_user") // inner outputs are reachable only through items
			r.absent("$item")
			if n := r.count("price", message.StatusSuccess); n != 6 {
				r.t.Fatalf("price ran %d times, want once per order (6)", n)
			}
			for _, s := range r.statuses {
				if s.NodeID == "price" && len(s.LineageStack) != 2 {
					r.t.Fatalf("a status inside two splits carries %d lineage frames", len(s.LineageStack))
				}
			}
		},
	},
	{
		name: "ConditionalInsideSplitSkipsItems",
		def: wf("condsplit", `
			{"id":"each","type":"split","parameters":{"input_array":"{{ $trigger.n }}"}},
			{"id":"even","type":"conditional","parameters":{"expression":"$item % 2 == 0","true_edge_id":"e_yes"}},
			{"id":"double","type":"set","parameters":{"values":{"v":"{{ $item * 2 }}"}}},
			{"id":"agg","type":"aggregator"}`,
			`{"id":"e1","src":"start","dst":"each"},{"id":"e2","src":"each","dst":"even"},{"id":"e_yes","src":"even","dst":"double"},
			{"id":"e3","src":"double","dst":"agg"}`),
		input: `{"n":[1,2,3,4]}`,
		check: func(r *result) {
			r.status(message.CompletionCompleted)
			r.equal("$agg", `{"items":[null,{"v":4},null,{"v":8}],"total":4,"succeeded":2,"failed":0,"skipped":2}`)
		},
	},
	{
		name: "EmptyArray",
		def: wf("empty", `
			{"id":"each","type":"split","parameters":{"input_array":"{{ $trigger.list }}"}},
			{"id":"work","type":"set","parameters":{"values":{"v":1}}},
			{"id":"agg","type":"aggregator"},
			{"id":"after","type":"set","parameters":{"values":{"count":"{{ $agg.total }}"}}}`,
			`{"id":"e1","src":"start","dst":"each"},{"id":"e2","src":"each","dst":"work"},{"id":"e3","src":"work","dst":"agg"},{"id":"e4","src":"agg","dst":"after"}`),
		input: `{"list":[]}`,
		check: func(r *result) {
			r.status(message.CompletionCompleted)
			r.equal("$agg.items", `[]`)
			r.equal("$after.count", `0`)
			if r.count("work", message.StatusRunning) != 0 {
				r.t.Fatal("a node inside the split ran for an empty array")
			}
		},
	},
	{
		name: "OneFailingItemAmongMany",
		def: wf("partial", `
			{"id":"each","type":"split","parameters":{"input_array":"{{ $trigger.items }}"}},
			{"id":"ratio","type":"set","parameters":{"values":{"v":"{{ $item.a / $item.b }}"}},"retry":{"max_attempts":1}},
			{"id":"agg","type":"aggregator"}`,
			`{"id":"e1","src":"start","dst":"each"},{"id":"e2","src":"each","dst":"ratio"},{"id":"e3","src":"ratio","dst":"agg"}`),
		input: `{"items":[{"a":4,"b":2},{"a":1},{"a":9,"b":3},{"a":8,"b":4},{"a":5,"b":5}]}`,
		check: func(r *result) {
			r.status(message.CompletionCompleted)
			r.equal("$agg.succeeded", `4`)
			r.equal("$agg.failed", `1`)
			items := r.get("$agg.items").([]any)
			e, _ := items[1].(map[string]any)["error"].(map[string]any)
			if e == nil || e["node_id"] != "ratio" || !strings.Contains(fmt.Sprint(e["message"]), "b") {
				r.t.Fatalf("items[1] = %v, want {\"error\": {...}} naming ratio and the missing path", items[1])
			}
			if got := normalise(items[0]); !reflect.DeepEqual(got, map[string]any{"v": 2.0}) {
				r.t.Fatalf("items[0] = %v, want {\"v\": 2}", got)
			}
		},
	},
	{
		name: "AggregatorTimeout",
		def: wf("aggtimeout", `
			{"id":"each","type":"split","parameters":{"input_array":"{{ $trigger.delays }}"}},
			{"id":"pause","type":"wait","parameters":{"amount":"{{ $item / 1000 }}"}},
			{"id":"agg","type":"aggregator","parameters":{"timeout":1}},
			{"id":"after","type":"set","parameters":{"values":{"v":1}}}`,
			`{"id":"e1","src":"start","dst":"each"},{"id":"e2","src":"each","dst":"pause"},{"id":"e3","src":"pause","dst":"agg"},{"id":"e4","src":"agg","dst":"after"}`),
		input: `{"delays":[0,0,4000]}`,
		check: func(r *result) {
			r.status(message.CompletionFailed)
			if f := r.c.FailureReason; f.NodeID != "agg" || f.Code != "TIMEOUT" || !strings.Contains(f.Message, "Timeout exceeded") {
				r.t.Fatalf("failure %+v, want agg failing with TIMEOUT / Timeout exceeded", f)
			}
			r.absent("$after")
			if r.count("agg", message.StatusFailed) != 1 || r.count("agg", message.StatusSuccess) != 0 {
				r.t.Fatalf("agg: %d failed, %d success; want the timeout to fail it once and the late item never to fire it",
					r.count("agg", message.StatusFailed), r.count("agg", message.StatusSuccess))
			}
		},
	},
	{
		name: "MergeTimeout",
		def: wf("mergetimeout", `
			{"id":"fast","type":"set","parameters":{"values":{"v":1}}},
			{"id":"slow","type":"delay","parameters":{"delayMs":4000}},
			{"id":"join","type":"merge","parameters":{"timeout":1},"error":{"type":"branch","error_edge":"e_late"}},
			{"id":"joined","type":"set","parameters":{"values":{"v":1}}},
			{"id":"late","type":"set","parameters":{"values":{"why":"{{ $error.code }}"}}}`,
			`{"id":"e1","src":"start","dst":"fast"},{"id":"e2","src":"start","dst":"slow"},{"id":"e3","src":"fast","dst":"join"},
			{"id":"e4","src":"slow","dst":"join"},{"id":"e_ok","src":"join","dst":"joined"},{"id":"e_late","src":"join","dst":"late"}`),
		check: func(r *result) {
			r.status(message.CompletionCompleted)
			r.equal("$late.why", `"TIMEOUT"`)
			r.absent("$joined")
		},
	},
	{
		// A merge timeout under the halt strategy (the default) ends the
		// execution failed, naming the merge (RFC 005 §5, RFC 001 §9.1).
		name: "MergeTimeoutFails",
		def: wf("mergetimeoutfails", `
			{"id":"fast","type":"set","parameters":{"values":{"v":1}}},
			{"id":"slow","type":"delay","parameters":{"delayMs":4000}},
			{"id":"join","type":"merge","parameters":{"timeout":1}},
			{"id":"joined","type":"set","parameters":{"values":{"v":1}}}`,
			`{"id":"e1","src":"start","dst":"fast"},{"id":"e2","src":"start","dst":"slow"},{"id":"e3","src":"fast","dst":"join"},
			{"id":"e4","src":"slow","dst":"join"},{"id":"e5","src":"join","dst":"joined"}`),
		check: func(r *result) {
			r.status(message.CompletionFailed)
			if f := r.c.FailureReason; f == nil || f.NodeID != "join" || f.Code != "TIMEOUT" {
				r.t.Fatalf("failure %+v, want join failing with TIMEOUT", f)
			}
			r.absent("$joined")
		},
	},
	{
		name: "MergeAfterConditional",
		def: wf("mergecond", `
			{"id":"check","type":"conditional","parameters":{"expression":"$trigger.vip","true_edge_id":"e_yes","false_edge_id":"e_no"}},
			{"id":"gold","type":"set","parameters":{"values":{"tier":"gold"}}},
			{"id":"basic","type":"set","parameters":{"values":{"tier":"basic"}}},
			{"id":"tag","type":"set","parameters":{"values":{"tagged":true}}},
			{"id":"join","type":"merge"},
			{"id":"after","type":"set","parameters":{"values":{"from":"{{ $join.from }}"}}}`,
			`{"id":"e1","src":"start","dst":"check"},{"id":"e_yes","src":"check","dst":"gold"},{"id":"e_no","src":"check","dst":"basic"},
			{"id":"e2","src":"basic","dst":"tag"},{"id":"e3","src":"gold","dst":"join"},{"id":"e4","src":"tag","dst":"join"},{"id":"e5","src":"join","dst":"after"}`),
		input: `{"vip":false}`,
		check: func(r *result) {
			r.status(message.CompletionCompleted)
			r.equal("$after.from", `["tag"]`)
			r.equal("$join.items", `[{"tagged":true}]`)
			r.equal("$basic.tier", `"basic"`)
			r.absent("$gold")
		},
	},
	{
		// x has two ways in, both behind conditionals that go elsewhere:
		// x is dead, and join must learn that its parent x will not come.
		name:  "MergeBehindDeadSharedNode",
		def:   sharedNodeMerge,
		input: `{"a":true,"b":true}`,
		check: func(r *result) {
			r.status(message.CompletionCompleted)
			r.equal("$join.from", `["a1"]`)
			r.equal("$after.from", `["a1"]`)
			r.absent("$x")
		},
	},
	{
		// The same with one way into x taken: x runs and join waits for it.
		name:  "MergeBehindLiveSharedNode",
		def:   sharedNodeMerge,
		input: `{"a":true,"b":false}`,
		check: func(r *result) {
			r.status(message.CompletionCompleted)
			r.equal("$join.from", `["a1","x"]`)
			r.equal("$x.via", `"b2"`)
		},
	},
	{
		name: "MergeUnionOfParents",
		def: wf("mergeall", `
			{"id":"a","type":"set","parameters":{"values":{"v":"a"}}},
			{"id":"b","type":"set","parameters":{"values":{"v":"b"}}},
			{"id":"join","type":"merge"}`,
			`{"id":"e1","src":"start","dst":"a"},{"id":"e2","src":"start","dst":"b"},{"id":"e3","src":"a","dst":"join"},{"id":"e4","src":"b","dst":"join"}`),
		check: func(r *result) {
			r.status(message.CompletionCompleted)
			r.equal("$a.v", `"a"`)
			r.equal("$b.v", `"b"`)
			r.equal("$join.from", `["a","b"]`)
			if r.count("join", message.StatusSuccess) != 1 {
				r.t.Fatal("join fired more than once")
			}
		},
	},
	{
		name: "WaitForAnySlowAndFast",
		def: wf("race", `
			{"id":"fast","type":"set","parameters":{"values":{"who":"fast"}}},
			{"id":"slow","type":"delay","parameters":{"delayMs":700}},
			{"id":"first","type":"merge","parameters":{"wait_mode":"wait_for_any"}},
			{"id":"after","type":"set","parameters":{"values":{"winner":"{{ $first.winner }}"}}}`,
			`{"id":"e1","src":"start","dst":"fast"},{"id":"e2","src":"start","dst":"slow"},{"id":"e3","src":"fast","dst":"first"},
			{"id":"e4","src":"slow","dst":"first"},{"id":"e5","src":"first","dst":"after"}`),
		check: func(r *result) {
			r.status(message.CompletionCompleted)
			r.equal("$after.winner", `"fast"`)
			if r.count("after", message.StatusSuccess) != 1 {
				r.t.Fatalf("after ran %d times, want once: the slow parent must not fire the merge again", r.count("after", message.StatusSuccess))
			}
			if r.count("slow", message.StatusSuccess) != 1 {
				r.t.Fatal("the completion came before the slow branch ended")
			}
		},
	},
	{
		name: "MergeInsideSplit",
		def: wf("mergesplit", `
			{"id":"each","type":"split","parameters":{"input_array":"{{ $trigger.n }}"}},
			{"id":"sq","type":"set","parameters":{"values":{"v":"{{ $item * $item }}"}}},
			{"id":"neg","type":"set","parameters":{"values":{"v":"{{ -$item }}"}}},
			{"id":"join","type":"merge"},
			{"id":"both","type":"set","parameters":{"values":{"sum":"{{ $sq.v + $neg.v }}"}}},
			{"id":"agg","type":"aggregator","parameters":{"value":"{{ $both.sum }}"}}`,
			`{"id":"e1","src":"start","dst":"each"},{"id":"e2","src":"each","dst":"sq"},{"id":"e3","src":"each","dst":"neg"},
			{"id":"e4","src":"sq","dst":"join"},{"id":"e5","src":"neg","dst":"join"},{"id":"e6","src":"join","dst":"both"},{"id":"e7","src":"both","dst":"agg"}`),
		input: `{"n":[1,2,3,4,5]}`,
		check: func(r *result) {
			r.status(message.CompletionCompleted)
			r.equal("$agg.items", `[0,2,6,12,20]`)
			if r.count("join", message.StatusSuccess) != 5 {
				r.t.Fatalf("join fired %d times, want once per item (5)", r.count("join", message.StatusSuccess))
			}
		},
	},
	{
		// Each item reaches agg by two paths (a and b): the first arrival
		// fills its slot; the second comes from another message and must
		// neither count nor fire agg again once the barrier is complete.
		// The delay after agg holds the completion back, so a second firing
		// reports its statuses before the run ends.
		name: "OneItemByTwoPaths",
		def: wf("twopaths", `
			{"id":"each","type":"split","parameters":{"input_array":"{{ $trigger.n }}"}},
			{"id":"x","type":"set","parameters":{"values":{"v":"{{ $item * 10 }}"}}},
			{"id":"a","type":"set","parameters":{"values":{"path":"a"}}},
			{"id":"b","type":"set","parameters":{"values":{"path":"b"}}},
			{"id":"agg","type":"aggregator","parameters":{"value":"{{ $x.v }}"}},
			{"id":"after","type":"set","parameters":{"values":{"total":"{{ $agg.total }}"}}},
			{"id":"hold","type":"delay","parameters":{"delayMs":500}}`,
			`{"id":"e1","src":"start","dst":"each"},{"id":"e2","src":"each","dst":"x"},{"id":"e3","src":"x","dst":"a"},{"id":"e4","src":"x","dst":"b"},
			{"id":"e5","src":"a","dst":"agg"},{"id":"e6","src":"b","dst":"agg"},{"id":"e7","src":"agg","dst":"after"},{"id":"e8","src":"after","dst":"hold"}`),
		input: `{"n":[1,2,3]}`,
		check: func(r *result) {
			r.status(message.CompletionCompleted)
			r.equal("$agg.items", `[10,20,30]`)
			r.equal("$after.total", `3`)
			for _, n := range []string{"agg", "after", "hold"} {
				if got := r.count(n, message.StatusSuccess); got != 1 {
					r.t.Fatalf("%s succeeded %d times, want once: an item's second path fired the aggregator again", n, got)
				}
			}
			if got := r.count("x", message.StatusSuccess); got != 3 {
				r.t.Fatalf("x ran %d times, want once per item (3)", got)
			}
		},
	},
	{
		name: "WaitThenContinue",
		def: wf("waitshort", `
			{"id":"pause","type":"wait","parameters":{"amount":0.5}},
			{"id":"after","type":"set","parameters":{"values":{"resumed":"{{ $pause.resume_at }}"}}}`,
			`{"id":"e1","src":"start","dst":"pause"},{"id":"e2","src":"pause","dst":"after"}`),
		check: func(r *result) {
			r.status(message.CompletionCompleted)
			if r.count("pause", message.StatusWaiting) != 1 {
				r.t.Fatal("no waiting status for the wait node")
			}
			for _, s := range r.statuses {
				if s.NodeID == "pause" && s.Status == message.StatusWaiting && s.ResumeAt == nil {
					r.t.Fatal("waiting status without resume_at")
				}
			}
			at, _ := time.Parse(time.RFC3339Nano, r.get("$after.resumed").(string))
			if r.c.CompletedAt.Before(at) {
				r.t.Fatalf("completed at %s, before the wait's resume time %s", r.c.CompletedAt, at)
			}
		},
	},
	{
		name: "WaitAsLastNode",
		def: wf("waitlast", `
			{"id":"a","type":"set","parameters":{"values":{"v":1}}},
			{"id":"pause","type":"delay","parameters":{"duration":"PT0.3S"}}`,
			`{"id":"e1","src":"start","dst":"a"},{"id":"e2","src":"a","dst":"pause"}`),
		check: func(r *result) {
			r.status(message.CompletionCompleted)
			r.get("$pause.resume_at")
		},
	},
	{
		name: "WaitInsideSplit",
		def: wf("waitsplit", `
			{"id":"each","type":"split","parameters":{"input_array":"{{ $trigger.ms }}"}},
			{"id":"pause","type":"wait","parameters":{"amount":"{{ $item / 1000 }}"}},
			{"id":"tag","type":"set","parameters":{"values":{"ms":"{{ $item }}","i":"{{ $item_index }}"}}},
			{"id":"agg","type":"aggregator"}`,
			`{"id":"e1","src":"start","dst":"each"},{"id":"e2","src":"each","dst":"pause"},{"id":"e3","src":"pause","dst":"tag"},{"id":"e4","src":"tag","dst":"agg"}`),
		input: `{"ms":[400,0,200]}`,
		check: func(r *result) {
			r.status(message.CompletionCompleted)
			r.equal("$agg.items", `[{"ms":400,"i":0},{"ms":0,"i":1},{"ms":200,"i":2}]`)
		},
	},
	{
		name: "MergeAfterWait",
		def: wf("mergewait", `
			{"id":"right_away","type":"set","parameters":{"values":{"v":1}}},
			{"id":"later","type":"delay","parameters":{"delayMs":300}},
			{"id":"join","type":"merge"}`,
			`{"id":"e1","src":"start","dst":"right_away"},{"id":"e2","src":"start","dst":"later"},{"id":"e3","src":"right_away","dst":"join"},{"id":"e4","src":"later","dst":"join"}`),
		check: func(r *result) {
			r.status(message.CompletionCompleted)
			r.equal("$join.from", `["right_away","later"]`)
		},
	},
	{
		name: "UntilInThePast",
		def: wf("past", `
			{"id":"pause","type":"wait","parameters":{"until":"2001-01-01T00:00:00Z"}},
			{"id":"after","type":"set","parameters":{"values":{"v":1}}}`,
			`{"id":"e1","src":"start","dst":"pause"},{"id":"e2","src":"pause","dst":"after"}`),
		check: func(r *result) {
			r.status(message.CompletionCompleted)
			if r.count("pause", message.StatusWaiting) != 0 {
				r.t.Fatal("a wait until a past time waited")
			}
		},
	},
	{
		// A branch suspended for a day when another halts is woken and
		// dropped: the halted completion comes now, not in a day.
		name: "HaltWakesWaitingBranch",
		def: wf("haltwake", `
			{"id":"later","type":"delay","parameters":{"delayMs":300}},
			{"id":"bad","type":"set","parameters":{"values":{"v":"{{ $trigger.missing }}"}},"retry":{"max_attempts":1}},
			{"id":"pause","type":"wait","parameters":{"amount":1,"unit":"days"}},
			{"id":"after_pause","type":"set","parameters":{"values":{"v":1}}}`,
			`{"id":"e1","src":"start","dst":"later"},{"id":"e2","src":"later","dst":"bad"},
			{"id":"e3","src":"start","dst":"pause"},{"id":"e4","src":"pause","dst":"after_pause"}`),
		check: func(r *result) {
			r.status(message.CompletionFailed)
			r.absent("$after_pause")
			if r.count("pause", message.StatusWaiting) != 1 || r.count("pause", message.StatusSkipped) != 1 {
				r.t.Fatalf("pause: %d waiting and %d skipped statuses, want it suspended, then woken and skipped",
					r.count("pause", message.StatusWaiting), r.count("pause", message.StatusSkipped))
			}
		},
	},
	{
		name: "HaltStopsOtherBranches",
		def: wf("halt", `
			{"id":"bad","type":"set","parameters":{"values":{"v":"{{ $trigger.missing }}"}},"retry":{"max_attempts":1}},
			{"id":"slow","type":"delay","parameters":{"delayMs":300}},
			{"id":"after_slow","type":"set","parameters":{"values":{"v":1}}}`,
			`{"id":"e1","src":"start","dst":"bad"},{"id":"e2","src":"start","dst":"slow"},{"id":"e3","src":"slow","dst":"after_slow"}`),
		check: func(r *result) {
			r.status(message.CompletionFailed)
			r.absent("$after_slow")
			if f := r.c.FailureReason; f.NodeID != "bad" || !strings.Contains(f.Message, "missing") {
				r.t.Fatalf("failure %+v", f)
			}
		},
	},
}

// sharedNodeMerge: join waits for a1 (c1's true side) and x, which two
// conditionals' false sides reach through b1 and b2.
var sharedNodeMerge = wf("sharedmerge", `
	{"id":"c1","type":"conditional","parameters":{"expression":"$trigger.a","true_edge_id":"c1_t","false_edge_id":"c1_f"}},
	{"id":"c2","type":"conditional","parameters":{"expression":"$trigger.b","true_edge_id":"c2_t","false_edge_id":"c2_f"}},
	{"id":"a1","type":"set","parameters":{"values":{"v":1}}},
	{"id":"a2","type":"set","parameters":{"values":{"v":2}}},
	{"id":"b1","type":"set","parameters":{"values":{"via":"b1"}}},
	{"id":"b2","type":"set","parameters":{"values":{"via":"b2"}}},
	{"id":"x","type":"set","parameters":{"values":{"via":"{{ $b2.via }}"}}},
	{"id":"join","type":"merge","parameters":{"timeout":20}},
	{"id":"after","type":"set","parameters":{"values":{"from":"{{ $join.from }}"}}}`,
	`{"id":"e1","src":"start","dst":"c1"},{"id":"e2","src":"start","dst":"c2"},
	{"id":"c1_t","src":"c1","dst":"a1"},{"id":"c1_f","src":"c1","dst":"b1"},
	{"id":"c2_t","src":"c2","dst":"a2"},{"id":"c2_f","src":"c2","dst":"b2"},
	{"id":"e3","src":"b1","dst":"x"},{"id":"e4","src":"b2","dst":"x"},
	{"id":"e5","src":"a1","dst":"join"},{"id":"e6","src":"x","dst":"join"},{"id":"e7","src":"join","dst":"after"}`)
