package main

import (
	"flag"
	"io"
	"testing"
	"time"
)

// --retention takes days ("30d") or a Go duration and refuses the rest.
func TestRetentionFlag(t *testing.T) {
	for _, tc := range []struct {
		arg  string
		want time.Duration
		ok   bool
	}{
		{"30d", 30 * 24 * time.Hour, true},
		{"0d", 0, true},
		{"720h", 720 * time.Hour, true},
		{"90m", 90 * time.Minute, true},
		{"d", 0, false},
		{"-1d", 0, false},
		{"-5h", 0, false},
		{"soon", 0, false},
	} {
		fs := flag.NewFlagSet("server", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		d := retentionFlag(fs)
		err := fs.Parse([]string{"--retention", tc.arg})
		if (err == nil) != tc.ok || (tc.ok && *d != tc.want) {
			t.Errorf("--retention %s: %v, %v; want %v (ok %v)", tc.arg, *d, err, tc.want, tc.ok)
		}
	}
}
