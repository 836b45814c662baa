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
	"github.com/rune-org/rune/store/sqlite"
)

// BenchmarkFairness is the fairness benchmark of issue 35 on the embedded
// server (SQLite, the in-process runtime): tenant B triggers one execution
// per second and its trigger-to-start time (created_at to dispatched_at) is
// measured alone, then while tenant A enqueues 20,000 executions as fast
// as the API takes them. The workflow has a concurrency limit per tenant.
// One run: go test ./server -run '^$' -bench Fairness -benchtime 1x
func BenchmarkFairness(b *testing.B) {
	const burst, samples, limit = 20_000, 30, 4
	for range b.N {
		st, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "rune.db"))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { st.Close() })
		tg := runTarget(b, st, "fair", func(c *server.Config) {})
		def := fmt.Sprintf(`{"id":"fair","settings":{"concurrency":{"key":"{{ $trigger.tenant }}","limit":%d}},`+
			`"nodes":[{"id":"start","type":"trigger","trigger":true},{"id":"s","type":"set","parameters":{"values":{"n":"{{ $trigger.n }}"}}}],`+
			`"edges":[{"id":"e1","src":"start","dst":"s"}]}`, limit)
		post(b, tg, "/v1/workflows", def)
		quiet := sampleB(b, tg, samples)
		var sent atomic.Int64
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Go(func() {
				for i := w; i < burst; i += 8 {
					select {
					case <-stop:
						return
					default:
					}
					post(b, tg, "/v1/workflows/fair/executions", fmt.Sprintf(`{"tenant":"A","n":%d}`, i))
					sent.Add(1)
				}
			})
		}
		// B starts once A's backlog is there.
		for sent.Load() < 2000 {
			time.Sleep(10 * time.Millisecond)
		}
		loaded := sampleB(b, tg, samples)
		close(stop)
		wg.Wait()
		b.ReportMetric(p99(quiet), "quiet-p99-ms")
		b.ReportMetric(p99(loaded), "burst-p99-ms")
		b.Logf("tenant B trigger-to-start, %d samples at 1/s: quiet p50 %.1f ms p99 %.1f ms; during A's burst of %d (sent %d) p50 %.1f ms p99 %.1f ms",
			samples, p50(quiet), p99(quiet), burst, sent.Load(), p50(loaded), p99(loaded))
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

// sampleB triggers tenant B once a second and returns each one's
// created-to-dispatched time in milliseconds.
func sampleB(b *testing.B, tg *target, n int) []float64 {
	var out []float64
	for i := range n {
		id := post(b, tg, "/v1/workflows/fair/executions", fmt.Sprintf(`{"tenant":"B","n":%d}`, i))
		deadline := time.Now().Add(60 * time.Second)
		for {
			x, err := tg.store.GetExecution(context.Background(), id)
			if err != nil {
				b.Fatal(err)
			}
			if x.DispatchedAt != nil {
				out = append(out, float64(x.DispatchedAt.Sub(x.CreatedAt).Microseconds())/1000)
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
	resp, err := http.DefaultClient.Do(req)
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
