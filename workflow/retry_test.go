package workflow

import (
	"math"
	"testing"
	"time"
)

func TestRetryDefaults(t *testing.T) {
	for _, n := range []*Node{{}, {Retry: &RetryPolicy{}}} {
		r := n.RetrySettings()
		if r != (Retry{MaxAttempts: 4, InitialDelay: 5 * time.Second, Multiplier: 5}) {
			t.Fatalf("defaults = %+v", r)
		}
		// The first attempt and three retries, 5 s, 25 s and 125 s later.
		for attempt, want := range map[int]time.Duration{1: 5 * time.Second, 2: 25 * time.Second, 3: 125 * time.Second} {
			if got := r.Backoff(attempt); got != want {
				t.Errorf("Backoff(%d) = %v, want %v", attempt, got, want)
			}
		}
	}
}

func TestRetrySettings(t *testing.T) {
	n := &Node{Retry: &RetryPolicy{MaxAttempts: 2, InitialDelay: "PT0.5S", Multiplier: 3}}
	r := n.RetrySettings()
	if r != (Retry{MaxAttempts: 2, InitialDelay: 500 * time.Millisecond, Multiplier: 3}) {
		t.Fatalf("settings = %+v", r)
	}
	if got := r.Backoff(3); got != 4500*time.Millisecond {
		t.Errorf("Backoff(3) = %v, want 4.5s", got)
	}
	// Only the fields set override the defaults.
	r = (&Node{Retry: &RetryPolicy{InitialDelay: "1s"}}).RetrySettings()
	if r != (Retry{MaxAttempts: 4, InitialDelay: time.Second, Multiplier: 5}) {
		t.Errorf("partial settings = %+v", r)
	}
	r = (&Node{Retry: &RetryPolicy{InitialDelay: "0s", MaxAttempts: 1}}).RetrySettings()
	if r.InitialDelay != 0 || r.MaxAttempts != 1 || r.Backoff(1) != 0 {
		t.Errorf("zero delay = %+v, Backoff %v", r, r.Backoff(1))
	}
}

func TestBackoffEdges(t *testing.T) {
	r := Retry{MaxAttempts: 100, InitialDelay: time.Hour, Multiplier: 2}
	if got := r.Backoff(5); got != 16*time.Hour {
		t.Errorf("Backoff(5) = %v, want 16h", got)
	}
	for _, a := range []int{6, 64, 100, 1 << 30, math.MaxInt} {
		if got := r.Backoff(a); got != MaxBackoff {
			t.Errorf("Backoff(%d) = %v, want the 24h cap", a, got)
		}
	}
	if got := r.Backoff(0); got != time.Hour {
		t.Errorf("Backoff(0) = %v, want the first delay", got)
	}
	if got := (Retry{InitialDelay: 48 * time.Hour, Multiplier: 1}).Backoff(1); got != MaxBackoff {
		t.Errorf("a first delay over the cap gives %v", got)
	}
	if got := (Retry{InitialDelay: time.Second, Multiplier: 1}).Backoff(50); got != time.Second {
		t.Errorf("multiplier 1 gives %v, want a constant 1s", got)
	}
	if got := (Retry{InitialDelay: time.Second, Multiplier: math.NaN()}).Backoff(3); got != time.Second {
		t.Errorf("NaN multiplier gives %v", got)
	}
}

func TestTimeoutDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{"": 0, "30s": 30 * time.Second, "PT1M": time.Minute, "bogus": 0} {
		if got := (&Node{Timeout: in}).TimeoutDuration(); got != want {
			t.Errorf("TimeoutDuration(%q) = %v, want %v", in, got, want)
		}
	}
}
