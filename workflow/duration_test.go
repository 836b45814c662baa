package workflow

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestParseDuration(t *testing.T) {
	ok := map[string]time.Duration{
		"90s":                     90 * time.Second,
		"1h30m":                   90 * time.Minute,
		"500ms":                   500 * time.Millisecond,
		"0":                       0,
		"0s":                      0,
		"1.5h":                    90 * time.Minute,
		"PT1H30M":                 90 * time.Minute,
		"P1D":                     24 * time.Hour,
		"P2DT3H":                  51 * time.Hour,
		"PT0.5S":                  500 * time.Millisecond,
		"PT0,25S":                 250 * time.Millisecond,
		"PT90S":                   90 * time.Second,
		"PT1.5H":                  90 * time.Minute,
		"P1W":                     7 * 24 * time.Hour,
		"P1W2D":                   9 * 24 * time.Hour,
		"PT0S":                    0,
		"P1DT1M1S":                24*time.Hour + time.Minute + time.Second,
		"PT0.0000000019S":         1, // digits finer than a nanosecond are dropped
		"PT2562047H":              2562047 * time.Hour,
		"PT9223372036.854775807S": math.MaxInt64,
	}
	for in, want := range ok {
		got, err := ParseDuration(in)
		if err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	bad := map[string]string{
		"":                        "empty duration",
		"-5s":                     "negative duration",
		"-PT5S":                   "negative duration",
		"5":                       `invalid duration "5"`,
		"5 s":                     `invalid duration "5 s"`,
		"abc":                     `invalid duration "abc"`,
		"P":                       `nothing after "P"`,
		"PT":                      `nothing after "T"`,
		"P1DT":                    `nothing after "T"`,
		"P1Y":                     "years have no fixed length",
		"P1M":                     "months have no fixed length",
		"P1H":                     `belongs after "T"`,
		"PT1D":                    `belongs before "T"`,
		"PT1M1H":                  "out of order",
		"PT1S1S":                  "repeated or out of order",
		"P1DT1HT1M":               `"T" appears twice`,
		"PT1":                     "has no designator",
		"PT.5S":                   "want a number",
		"PT1.S":                   "decimal sign must be followed by digits",
		"PT1.5M1S":                "only the last number may have a fraction",
		"PT1X":                    "unknown designator",
		"pt1s":                    `invalid duration "pt1s"`,
		"P99999999999D":           "too long",
		"PT2562048H":              "too long",
		"PT9223372037S":           "too long",
		"PT9223372036.854775808S": "too long",
		"9999999999999h":          `invalid duration`,
	}
	for in, want := range bad {
		_, err := ParseDuration(in)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseDuration(%q) error = %v, want it to contain %q", in, err, want)
			continue
		}
		// A malformed duration says what is accepted.
		if !strings.HasPrefix(err.Error(), "negative") && !strings.Contains(err.Error(), `"1h30m"`) || !strings.HasPrefix(err.Error(), "negative") && !strings.Contains(err.Error(), `"PT1H30M"`) {
			t.Errorf("ParseDuration(%q) error %q does not list the accepted spellings", in, err)
		}
	}
}
