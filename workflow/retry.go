package workflow

import (
	"math"
	"time"
)

// Retry defaults (dsl.md "retry", RFC 001 §9.3): the first attempt and three
// retries, 5 s, 25 s and 125 s later.
const (
	DefaultMaxAttempts  = 4
	DefaultInitialDelay = 5 * time.Second
	DefaultMultiplier   = 5.0
	// MaxBackoff caps any single wait between attempts.
	MaxBackoff = 24 * time.Hour
)

// Values of retry.on (dsl.md "Errors and retries").
const (
	// RetryRetryable retries only failures the node marks retryable
	// (timeouts, connection errors, 429 and 5xx): the default.
	RetryRetryable = "retryable"
	// RetryAny retries every failure, as seed 003 §4.1 describes.
	RetryAny = "any"
)

// Retry is a node's retry policy with defaults applied.
type Retry struct {
	// MaxAttempts counts every attempt, the first included.
	MaxAttempts  int
	InitialDelay time.Duration
	Multiplier   float64
	// Any retries every failure, not only retryable ones (retry.on "any").
	Any bool
}

// RetrySettings returns the node's retry policy with defaults filled in. It
// assumes a validated node; an unparsable delay falls back to the default.
func (n *Node) RetrySettings() Retry {
	r := Retry{MaxAttempts: DefaultMaxAttempts, InitialDelay: DefaultInitialDelay, Multiplier: DefaultMultiplier}
	p := n.Retry
	if p == nil {
		return r
	}
	if p.MaxAttempts != 0 {
		r.MaxAttempts = p.MaxAttempts
	}
	if p.InitialDelay != "" {
		if d, err := ParseDuration(p.InitialDelay); err == nil {
			r.InitialDelay = d
		}
	}
	if p.Multiplier != 0 {
		r.Multiplier = p.Multiplier
	}
	r.Any = p.On == RetryAny
	return r
}

// Again reports whether a failed attempt number attempt (1-based) is tried
// again: attempts remain, and the failure is retryable or the policy
// retries any failure.
func (r Retry) Again(retryable bool, attempt int) bool {
	return (retryable || r.Any) && attempt < r.MaxAttempts
}

// Backoff returns how long to wait after failed attempt number attempt
// (1-based) before the next one: InitialDelay × Multiplier^(attempt-1),
// capped at MaxBackoff. Attempts below 1 count as 1.
func (r Retry) Backoff(attempt int) time.Duration {
	if attempt < 1 {
		attempt = 1
	}
	if r.InitialDelay <= 0 {
		return 0
	}
	m := r.Multiplier
	if !(m >= 1) { // also catches NaN from an unvalidated Retry
		m = 1
	}
	d := float64(r.InitialDelay) * math.Pow(m, float64(attempt-1))
	if d >= float64(MaxBackoff) { // also +Inf
		return MaxBackoff
	}
	return time.Duration(d)
}

// TimeoutDuration returns the longest one attempt of the node may run, or 0
// when the node sets no timeout (or an invalid one, which Validate reports).
func (n *Node) TimeoutDuration() time.Duration {
	if n.Timeout == "" {
		return 0
	}
	d, err := ParseDuration(n.Timeout)
	if err != nil {
		return 0
	}
	return d
}
