package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rune-org/rune/server"
	"github.com/rune-org/rune/store"
	"github.com/rune-org/rune/store/sqlite"
	"github.com/rune-org/rune/store/storetest"
)

// BenchmarkFairness is the fairness benchmark of issue 35 on the embedded
// server (the in-process runtime) over SQLite and over PostgreSQL: tenant
// B triggers one execution per second and its trigger-to-start time
// (created_at to dispatched_at) is measured alone, then while tenant A
// enqueues 20,000 executions through the API as fast as 16 posters can
// (B starts once 2,000 are in and samples until all 20,000 are and at
// least 30 samples are taken). The workflow has a concurrency limit of 4
// per tenant, so A's backlog waits for its slots.
// One run: go test ./server -run '^$' -bench Fairness -benchtime 1x -v
func BenchmarkFairness(b *testing.B) {
	b.Run("sqlite", func(b *testing.B) {
		benchFairness(b, func(b *testing.B) store.Store {
			st, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "rune.db"))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { st.Close() })
			return st
		})
	})
	b.Run("postgres", func(b *testing.B) {
		benchFairness(b, func(b *testing.B) store.Store { return storetest.Postgres(b) })
	})
}

func benchFairness(b *testing.B, open func(b *testing.B) store.Store) {
	const burst, samples, limit, posters = 20_000, 30, 4, 16
	for range b.N {
		tg := runTarget(b, open(b), "fair", func(c *server.Config) {})
		tg.client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: posters + 2}}
		def := fmt.Sprintf(`{"id":"fair","settings":{"concurrency":{"key":"{{ $trigger.tenant }}","limit":%d}},`+
			`"nodes":[{"id":"start","type":"trigger","trigger":true},{"id":"s","type":"set","parameters":{"values":{"n":"{{ $trigger.n }}"}}}],`+
			`"edges":[{"id":"e1","src":"start","dst":"s"}]}`, limit)
		post(b, tg, "/v1/workflows", def)
		quiet := sampleB(b, tg, func(n int) bool { return n >= samples })
		var sent atomic.Int64
		start := time.Now()
		var took atomic.Int64
		var wg sync.WaitGroup
		var next atomic.Int64
		for range posters {
			wg.Go(func() {
				for i := next.Add(1) - 1; i < burst; i = next.Add(1) - 1 {
					post(b, tg, "/v1/workflows/fair/executions", fmt.Sprintf(`{"tenant":"A","n":%d}`, i))
					if sent.Add(1) == burst {
						took.Store(int64(time.Since(start)))
					}
				}
			})
		}
		for sent.Load() < 2000 {
			time.Sleep(10 * time.Millisecond)
		}
		loaded := sampleB(b, tg, func(n int) bool { return n >= samples && sent.Load() == burst })
		wg.Wait()
		b.ReportMetric(p99(quiet.total), "quiet-p99-ms")
		b.ReportMetric(p99(loaded.total), "burst-p99-ms")
		b.Logf("A posted %d in %.1f s (%.0f/s)", sent.Load(), time.Duration(took.Load()).Seconds(), float64(burst)/time.Duration(took.Load()).Seconds())
		for _, r := range []struct {
			name string
			s    bSamples
		}{{"quiet", quiet}, {"burst", loaded}} {
			b.Logf("tenant B %s (%d samples at 1/s), p50 / p99 / max ms: trigger-to-start %.1f / %.1f / %.1f; "+
				"create (the POST's answer) %.1f / %.1f / %.1f; created-to-claimed %.1f / %.1f / %.1f; claimed-to-dispatched %.1f / %.1f / %.1f",
				r.name, len(r.s.total), p50(r.s.total), p99(r.s.total), pct(r.s.total, 1), p50(r.s.post), p99(r.s.post), pct(r.s.post, 1),
				p50(r.s.claim), p99(r.s.claim), pct(r.s.claim, 1), p50(r.s.dispatch), p99(r.s.dispatch), pct(r.s.dispatch, 1))
		}
	}
}

func p99(ms []float64) float64 { return pct(ms, 0.99) }
func p50(ms []float64) float64 { return pct(ms, 0.50) }

func pct(ms []float64, q float64) float64 {
	s := slices.Clone(ms)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[min(len(s)-1, int(float64(len(s))*q))]
}

// bSamples are tenant B's times in milliseconds: created-to-dispatched
// (total), the POST's round trip (post), created-to-claimed (claim; the
// claim's time is claim_until less the dispatch lease) and
// claimed-to-dispatched (dispatch).
type bSamples struct{ total, post, claim, dispatch []float64 }

// sampleB triggers tenant B once a second until done says the samples
// are enough.
func sampleB(b *testing.B, tg *target, done func(n int) bool) bSamples {
	var out bSamples
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	for i := 0; !done(i); i++ {
		start := time.Now()
		id := post(b, tg, "/v1/workflows/fair/executions", fmt.Sprintf(`{"tenant":"B","n":%d}`, i))
		out.post = append(out.post, ms(time.Since(start)))
		deadline := time.Now().Add(60 * time.Second)
		for {
			x, err := tg.store.GetExecution(context.Background(), id)
			if err != nil {
				b.Fatal(err)
			}
			if x.DispatchedAt != nil {
				out.total = append(out.total, ms(x.DispatchedAt.Sub(x.CreatedAt)))
				if x.ClaimUntil != nil {
					claimed := x.ClaimUntil.Add(-server.DispatchLeaseDefault)
					out.claim = append(out.claim, ms(claimed.Sub(x.CreatedAt)))
					out.dispatch = append(out.dispatch, ms(x.DispatchedAt.Sub(claimed)))
				}
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("tenant B's execution %s not dispatched within 60 s", id)
			}
			time.Sleep(2 * time.Millisecond)
		}
		time.Sleep(time.Second)
	}
	return out
}

func post(b *testing.B, tg *target, path, body string) string {
	req, _ := http.NewRequest("POST", tg.url+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+tg.token)
	c := tg.client
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	var x struct {
		ID string `json:"id"`
	}
	if resp.StatusCode >= 300 {
		b.Fatalf("POST %s: %s", path, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&x); err != nil {
		b.Fatal(err)
	}
	return x.ID
}
