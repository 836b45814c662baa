package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/rune-org/rune/embedded"
	"github.com/rune-org/rune/message"
)

// An aggregator reports its progress (waiting, with processed/total) at the
// first arrival and then every 1 % of the items, never at the one that
// completes it: about a hundred statuses per barrier, not one per item.
func TestAggregatorProgressCadence(t *testing.T) {
	rt, err := embedded.New(embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	def := `{"id":"cadence","nodes":[{"id":"start","type":"trigger","trigger":true},
		{"id":"each","type":"split","parameters":{"input_array":"{{ $trigger.n }}"}},
		{"id":"x","type":"set","parameters":{"values":{"v":"{{ $item }}"}}},
		{"id":"agg","type":"aggregator"}],
		"edges":[{"id":"e1","src":"start","dst":"each"},{"id":"e2","src":"each","dst":"x"},{"id":"e3","src":"x","dst":"agg"}]}`
	for _, tc := range []struct{ items, want int }{
		// 250 items: every 2nd arrival (250/100), plus the first: 1, 2, 4, …, 248.
		{250, 125},
		// 50 items: every arrival but the completing one.
		{50, 49},
	} {
		n := make([]any, tc.items)
		for i := range n {
			n[i] = i
		}
		var got []float64
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		c, err := rt.Run(ctx, []byte(def), map[string]any{"n": n}, func(st *message.NodeStatus) {
			if st.NodeID == "agg" && st.Status == message.StatusWaiting {
				if p, ok := st.Details["processed"].(int); ok {
					got = append(got, float64(p))
				}
			}
		})
		cancel()
		if err != nil || c.Status != message.CompletionCompleted {
			t.Fatalf("%d items: %v, %v", tc.items, c, err)
		}
		if len(got) != tc.want {
			t.Errorf("%d items: %d progress statuses, want %d", tc.items, len(got), tc.want)
		}
		for _, p := range got {
			if p >= float64(tc.items) {
				t.Errorf("%d items: a progress status at %v, the completing arrival", tc.items, p)
			}
		}
	}
}

// A split's branches are named under their parent's: the execution id for
// a split at the top, the enclosing branch for a nested one, so the
// branches of two outer items never share an id.
func TestBranchIDsNest(t *testing.T) {
	rt, err := embedded.New(embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	def := `{"id":"nest","nodes":[{"id":"start","type":"trigger","trigger":true},
		{"id":"outer","type":"split","parameters":{"input_array":"{{ $trigger.n }}"}},
		{"id":"inner","type":"split","parameters":{"input_array":"{{ $item }}"}},
		{"id":"x","type":"set","parameters":{"values":{"v":"{{ $item }}"}}},
		{"id":"iagg","type":"aggregator"},{"id":"oagg","type":"aggregator"}],
		"edges":[{"id":"e1","src":"start","dst":"outer"},{"id":"e2","src":"outer","dst":"inner"},{"id":"e3","src":"inner","dst":"x"},
		{"id":"e4","src":"x","dst":"iagg"},{"id":"e5","src":"iagg","dst":"oagg"}]}`
	ids := map[string]bool{}
	var exec string
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := rt.Run(ctx, []byte(def), map[string]any{"n": []any{[]any{1, 2}, []any{3, 4}}}, func(st *message.NodeStatus) {
		if st.NodeID == "x" && st.Status == message.StatusSuccess && len(st.LineageStack) == 2 {
			exec = st.ExecutionID
			ids[st.LineageStack[0].BranchID+" "+st.LineageStack[1].BranchID] = true
		}
	})
	if err != nil || c.Status != message.CompletionCompleted {
		t.Fatalf("run: %v, %v", c, err)
	}
	for _, o := range []string{"0", "1"} {
		for _, i := range []string{"0", "1"} {
			want := exec + "/outer_" + o + " " + exec + "/outer_" + o + "/inner_" + i
			if !ids[want] {
				t.Errorf("no branch %q among %v", want, ids)
			}
		}
	}
}
