// Package metricstest scrapes a /metrics endpoint for tests: the series
// exactly as Prometheus's text format writes them.
package metricstest

import (
	"bufio"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// Scrape GETs url and returns every sample by its series as written, e.g.
// `rune_halts_total{workflow="w"}` (labels in the order the exposition
// gives, which client_golang sorts by name).
func Scrape(t testing.TB, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape %s: %s", url, resp.Status)
	}
	return Parse(t, url, resp.Body)
}

// Parse reads a scrape's body (from src, named in failures) as Scrape does.
func Parse(t testing.TB, src string, body io.Reader) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("scrape %s: bad sample line %q", src, line)
		}
		out[line[:i]] = v
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("scrape %s: %v", src, err)
	}
	return out
}

// Sum adds the samples whose series starts with prefix.
func Sum(samples map[string]float64, prefix string) float64 {
	var s float64
	for k, v := range samples {
		if strings.HasPrefix(k, prefix) {
			s += v
		}
	}
	return s
}
