package workflow

import (
	"strings"
	"testing"
)

// Issue 36, item 10: retry.on decodes, defaults to retryable failures only,
// and another value or type is refused naming the field.
func TestRetryOn(t *testing.T) {
	for _, tc := range []struct{ on, want string }{{`"any"`, RetryAny}, {`"retryable"`, RetryRetryable}} {
		def := strings.Replace(sampleJSON, `"multiplier": 2}`, `"multiplier": 2, "on": `+tc.on+`}`, 1)
		d, err := Load([]byte(def), fakeTypes{})
		if err != nil {
			t.Fatalf("on %s: %v", tc.on, err)
		}
		if got := d.Nodes[1].Retry.On; got != tc.want {
			t.Errorf("on %s decoded as %q", tc.on, got)
		}
		if any := d.Nodes[1].RetrySettings().Any; any != (tc.want == RetryAny) {
			t.Errorf("on %s: RetrySettings().Any = %v", tc.on, any)
		}
	}
	for _, tc := range []struct{ on, msg string }{
		{`"always"`, `unknown value "always": want "any" (every failure) or "retryable"`},
		{`"ANY"`, `unknown value "ANY"`},
		{`true`, "want a string, got boolean"},
	} {
		def := strings.Replace(sampleJSON, `"multiplier": 2}`, `"multiplier": 2, "on": `+tc.on+`}`, 1)
		_, err := Load([]byte(def), fakeTypes{})
		expectProblems(t, problemsOf(t, err), []Problem{{"nodes[1].retry.on", tc.msg}})
	}
}

func TestRetryAgain(t *testing.T) {
	def := (&Node{}).RetrySettings()
	anyFailure := (&Node{Retry: &RetryPolicy{MaxAttempts: 3, On: RetryAny}}).RetrySettings()
	for _, tc := range []struct {
		name      string
		r         Retry
		retryable bool
		attempt   int
		want      bool
	}{
		{"default, retryable", def, true, 1, true},
		{"default, not retryable", def, false, 1, false},
		{"default, last attempt", def, true, DefaultMaxAttempts, false},
		{"any, not retryable", anyFailure, false, 2, true},
		{"any, last attempt", anyFailure, false, 3, false},
	} {
		if got := tc.r.Again(tc.retryable, tc.attempt); got != tc.want {
			t.Errorf("%s: Again(%v, %d) = %v, want %v", tc.name, tc.retryable, tc.attempt, got, tc.want)
		}
	}
}
