package distributed_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/rune-org/rune/client"
	"github.com/rune-org/rune/distributed"
	"github.com/rune-org/rune/engine"
	"github.com/rune-org/rune/internal/testinfra"
	"github.com/rune-org/rune/message"
)

// shortTTL is the Redis URL's ttl in TestStateOutlivesTTL: an execution's
// coordination state is kept 3 s after its last activity.
const shortTTL = 3 * time.Second

// ttlCase is an execution that holds something back for longer than
// shortTTL, and what its completion must say.
type ttlCase struct {
	name, def, input string
	// least is how long the execution must take: what it waits for.
	least time.Duration
	// want maps paths of the final context ("$agg.items") to JSON.
	want map[string]string
}

func ttlCases(httpURL string) []ttlCase {
	return []ttlCase{
		{
			name: "Wait12s",
			def: ttlWorkflow("ttlwait", `
				{"id":"pause","type":"wait","parameters":{"amount":12,"unit":"seconds"}},
				{"id":"after","type":"set","parameters":{"values":{"done":true}}}`,
				`{"id":"e1","src":"start","dst":"pause"},{"id":"e2","src":"pause","dst":"after"}`),
			least: 12 * time.Second,
			want:  map[string]string{"$after.done": `true`},
		},
		{
			name: "SplitBranchesWait8s",
			def: ttlWorkflow("ttlsplit", `
				{"id":"each","type":"split","parameters":{"input_array":"{{ $trigger.items }}"}},
				{"id":"pause","type":"wait","parameters":{"amount":8,"unit":"seconds"}},
				{"id":"tag","type":"set","parameters":{"values":{"v":"{{ $item }}","i":"{{ $item_index }}"}}},
				{"id":"agg","type":"aggregator"}`,
				`{"id":"e1","src":"start","dst":"each"},{"id":"e2","src":"each","dst":"pause"},
				{"id":"e3","src":"pause","dst":"tag"},{"id":"e4","src":"tag","dst":"agg"}`),
			input: `{"items":["a","b","c","d"]}`,
			least: 8 * time.Second,
			want: map[string]string{
				"$agg.items":     `[{"v":"a","i":0},{"v":"b","i":1},{"v":"c","i":2},{"v":"d","i":3}]`,
				"$agg.succeeded": `4`,
			},
		},
		{
			name: "MergeSlowParentWaits10s",
			def: ttlWorkflow("ttlmerge", `
				{"id":"fast","type":"set","parameters":{"values":{"v":1}}},
				{"id":"pause","type":"wait","parameters":{"amount":10,"unit":"seconds"}},
				{"id":"slow","type":"set","parameters":{"values":{"v":2}}},
				{"id":"join","type":"merge"},
				{"id":"after","type":"set","parameters":{"values":{"sum":"{{ $fast.v + $slow.v }}"}}}`,
				`{"id":"e1","src":"start","dst":"fast"},{"id":"e2","src":"start","dst":"pause"},
				{"id":"e3","src":"pause","dst":"slow"},{"id":"e4","src":"fast","dst":"join"},
				{"id":"e5","src":"slow","dst":"join"},{"id":"e6","src":"join","dst":"after"}`),
			least: 10 * time.Second,
			want:  map[string]string{"$join.from": `["fast","slow"]`, "$after.sum": `3`},
		},
		{
			// A retry is published with a broker delay, no timer: its
			// Finish holds the state for the backoff.
			name: "RetryBackoff8s",
			def: ttlWorkflow("ttlretry", `
				{"id":"call","type":"http","parameters":{"url":"`+httpURL+`"},
				 "retry":{"max_attempts":2,"initial_delay":"8s"}}`,
				`{"id":"e1","src":"start","dst":"call"}`),
			least: 8 * time.Second,
			want:  map[string]string{"$call.body": `{"ok":true}`},
		},
	}
}

func ttlWorkflow(id, nodes, edges string) string {
	return fmt.Sprintf(`{"id":%q,"nodes":[{"id":"start","type":"trigger","trigger":true},%s],"edges":[%s]}`, id, nodes, edges)
}

// withTTL adds ttl to a Redis URL's parameters.
func withTTL(redisURL string, ttl time.Duration) string {
	sep := "?"
	if strings.Contains(redisURL, "?") {
		sep = "&"
	}
	return redisURL + sep + "ttl=" + ttl.String()
}

// TestStateOutlivesTTL (issue 30): with ?ttl=3s in the Redis URL, an
// execution whose wait (12 s), split branches' waits (8 s), merge's slow
// parent (10 s) or retry backoff (8 s) outlast the TTL many times over
// completes, with every item and parent, on one Redis and on the Redis
// Cluster; once it ended its keys go within the retention, as before. The
// eight executions run at once: the test takes about its longest wait.
func TestStateOutlivesTTL(t *testing.T) {
	t.Parallel()
	runtimes := map[string]runtime{
		"redis":   newRuntimeWith(t, distributed.Config{RedisURL: withTTL(testinfra.RedisURL(t), shortTTL)}),
		"cluster": newRuntimeWith(t, distributed.Config{RedisURL: withTTL(testinfra.RedisClusterURL(t), shortTTL)}),
	}
	// Answers 503 to the first call of each execution, then 200.
	var calls sync.Map // execution id -> *atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := calls.LoadOrStore(r.URL.Query().Get("exec"), new(atomic.Int32))
		if n.(*atomic.Int32).Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	defer srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for where, rt := range runtimes {
		for _, c := range ttlCases(srv.URL + "/?exec={{ $execution.id }}") {
			wg.Go(func() {
				if err := runTTLCase(ctx, rt, c); err != nil {
					t.Errorf("%s on %s: %v", c.name, where, err)
				}
			})
		}
	}
	wg.Wait()
}

// runTTLCase runs c on rt and checks its completion, then that every key
// of the ended execution expires within the retention.
func runTTLCase(ctx context.Context, rt runtime, c ttlCase) error {
	wf, err := rt.rt.Engine.Compile([]byte(c.def))
	if err != nil {
		return err
	}
	var input any
	if c.input != "" {
		if err := json.Unmarshal([]byte(c.input), &input); err != nil {
			return err
		}
	}
	exec := engine.NewExecutionID(time.Now())
	began := time.Now()
	comp, err := client.Run(ctx, rt.rt.Broker, rt.rt.Engine, wf, exec, input, nil)
	if err != nil {
		return fmt.Errorf("no completion (the state expired while the execution waited?): %w", err)
	}
	if comp.Status != message.CompletionCompleted {
		return fmt.Errorf("completion %s (failure %+v), want completed", comp.Status, comp.FailureReason)
	}
	if took := time.Since(began); took < c.least {
		return fmt.Errorf("completed after %v, before what it waits for (%v)", took, c.least)
	}
	for path, want := range c.want {
		if err := equalAt(comp.FinalContext, path, want); err != nil {
			return err
		}
	}
	return keysRetained(ctx, rt, exec)
}

// equalAt compares the value at path ("$agg.items") of a final context with
// JSON text.
func equalAt(final map[string]any, path, wantJSON string) error {
	var cur any = final
	for _, p := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return fmt.Errorf("final context: %s: %q is not inside an object", path, p)
		}
		if cur, ok = m[p]; !ok {
			b, _ := json.Marshal(final)
			return fmt.Errorf("final context lacks %s: %s", path, b)
		}
	}
	var want, got any
	_ = json.Unmarshal([]byte(wantJSON), &want)
	b, _ := json.Marshal(cur)
	_ = json.Unmarshal(b, &got)
	if !reflect.DeepEqual(got, want) {
		return fmt.Errorf("%s = %s, want %s", path, b, wantJSON)
	}
	return nil
}

// keysRetained checks that every Redis key of ended execution exec (its
// state, barriers and their value shards) expires within the default
// retention, 10 minutes: holding it past the TTL did not keep it longer.
func keysRetained(ctx context.Context, rt runtime, exec string) error {
	pattern := rt.prefix + ":{" + exec + "*"
	var mu sync.Mutex
	var keys []string
	scan := func(ctx context.Context, c *goredis.Client) error {
		iter := c.Scan(ctx, 0, pattern, 1000).Iterator()
		for iter.Next(ctx) {
			mu.Lock()
			keys = append(keys, iter.Val())
			mu.Unlock()
		}
		return iter.Err()
	}
	var err error
	switch c := rt.rt.Redis.(type) {
	case *goredis.ClusterClient:
		err = c.ForEachMaster(ctx, scan)
	case *goredis.Client:
		err = scan(ctx, c)
	}
	if err != nil {
		return err
	}
	if len(keys) == 0 {
		return fmt.Errorf("no key of the execution is left right after its end: want its state retained")
	}
	for _, k := range keys {
		pttl, err := rt.rt.Redis.PTTL(ctx, k).Result()
		if err != nil {
			return err
		}
		if pttl != -2 && (pttl <= 0 || pttl > 10*time.Minute) {
			return fmt.Errorf("key %s of the ended execution has TTL %v, want within the 10 min retention", k, pttl)
		}
	}
	return nil
}
