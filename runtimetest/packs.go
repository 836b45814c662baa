package runtimetest

import (
	"fmt"
	"strings"

	"github.com/rune-org/rune/message"
)

// A long chain's context travels in packs once it grows past the engine's
// threshold (8 KiB, engine/packs.go; issue 33 item 2): the nodes, a split
// after them and the completion must still see every output.
func init() { scenarios = append(scenarios, longChain()) }

func longChain() scenario {
	const n, pad = 30, 600
	var nodes, edges []string
	prev := "start"
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("n%d", i)
		nodes = append(nodes, fmt.Sprintf(`{"id":%q,"type":"set","parameters":{"values":{"i":%d,"pad":"%s"}}}`, id, i, strings.Repeat("x", pad)))
		edges = append(edges, fmt.Sprintf(`{"id":"e%d","src":%q,"dst":%q}`, i, prev, id))
		prev = id
	}
	nodes = append(nodes,
		`{"id":"each","type":"split","parameters":{"input_array":"{{ $trigger.items }}"}}`,
		`{"id":"work","type":"set","parameters":{"values":{"v":"{{ $item + $n1.i + $n15.i }}"}}}`,
		`{"id":"agg","type":"aggregator","parameters":{"value":"{{ $work.v }}"}}`,
		`{"id":"last","type":"set","parameters":{"values":{"sum":"{{ sum($agg.items) }}","first":"{{ $n1.i }}","k":"{{ $trigger.k }}"}}}`)
	edges = append(edges, fmt.Sprintf(`{"id":"s1","src":%q,"dst":"each"}`, prev),
		`{"id":"s2","src":"each","dst":"work"}`, `{"id":"s3","src":"work","dst":"agg"}`, `{"id":"s4","src":"agg","dst":"last"}`)
	return scenario{
		name:  "LongChainContextInPacks",
		def:   wf("packs", strings.Join(nodes, ","), strings.Join(edges, ",")),
		input: `{"items":[1,2,3],"k":"v"}`,
		check: func(r *result) {
			r.status(message.CompletionCompleted)
			r.equal("$last", `{"sum":54,"first":1,"k":"v"}`)
			for i := 1; i <= n; i++ {
				r.equal(fmt.Sprintf("$n%d.i", i), fmt.Sprint(i))
			}
			for k := range r.c.FinalContext {
				if strings.HasPrefix(k, "$rune_") {
					r.t.Fatalf("the final context shows the engine's %s", k)
				}
			}
		},
	}
}
