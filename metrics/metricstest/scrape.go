// Package metricstest scrapes a /metrics endpoint for tests: the series
// exactly as Prometheus's text format writes them.
package metricstest

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
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

// Wait scrapes url until every series in want has its value (an absent
// series counts as 0) and returns that scrape; after a minute it fails the
// test naming each series still wrong. Counters a runtime bumps after it
// reports an execution done (a timer's, once its resume is published) need
// it: the completion can reach the test first.
func Wait(t testing.TB, url string, want map[string]float64) map[string]float64 {
	t.Helper()
	return Until(t, func() map[string]float64 { return Scrape(t, url) }, func(got map[string]float64) (wrong []string) {
		for series, w := range want {
			if got[series] != w {
				wrong = append(wrong, fmt.Sprintf("%s = %v, want %v", series, got[series], w))
			}
		}
		return wrong
	})
}

// WaitPresent scrapes url until every one of series is there, whatever its
// value, and returns that scrape; after a minute it fails the test naming
// each one missing. Gauges a process samples in the background (queue
// depths, timers) appear only after its first sample.
func WaitPresent(t testing.TB, url string, series ...string) map[string]float64 {
	t.Helper()
	return Until(t, func() map[string]float64 { return Scrape(t, url) }, func(got map[string]float64) (missing []string) {
		for _, s := range series {
			if _, ok := got[s]; !ok {
				missing = append(missing, "no "+s+" in "+url)
			}
		}
		return missing
	})
}

// Until takes scrapes from scrape until check finds nothing wrong in one,
// for a minute at most (a loaded machine), and returns that scrape; then it
// fails the test with what check said. For endpoints Scrape cannot reach
// alone (behind a token).
func Until(t testing.TB, scrape func() map[string]float64, check func(map[string]float64) []string) map[string]float64 {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		got := scrape()
		wrong := check(got)
		if len(wrong) == 0 {
			return got
		}
		if time.Now().After(deadline) {
			sort.Strings(wrong)
			for _, w := range wrong {
				t.Error(w)
			}
			t.FailNow()
		}
		time.Sleep(50 * time.Millisecond)
	}
}
