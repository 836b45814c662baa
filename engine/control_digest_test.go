package engine

import (
	"context"
	"testing"
	"time"

	"github.com/rune-org/rune/node"
	"github.com/rune-org/rune/workflow"
)

func TestDigestCheck(t *testing.T) {
	cases := []struct {
		name   string
		params map[string]any
		want   map[string]string
	}{
		{"window", map[string]any{"key": "{{ $trigger.user }}", "window": "1h"}, nil},
		{"iso window and value", map[string]any{"key": "{{ $trigger.user }}", "window": "PT30M", "value": map[string]any{"c": "{{ $trigger.comment }}"}}, nil},
		{"until", map[string]any{"key": "k", "until": "08:00"}, nil},
		{"until with a time zone", map[string]any{"key": "k", "until": "08:00", "timezone": "Europe/Paris"}, nil},
		{"time zone from data", map[string]any{"key": "k", "until": "{{ $trigger.at }}", "timezone": "{{ $trigger.tz }}"}, nil},
		{"no key", map[string]any{"window": "1h"}, map[string]string{"nodes[1].parameters.key": "required"}},
		{"neither", map[string]any{"key": "k"}, map[string]string{"nodes[1].parameters.window": "required (or until)"}},
		{"both", map[string]any{"key": "k", "window": "1h", "until": "08:00"}, map[string]string{"nodes[1].parameters": "not both"}},
		{"bad window", map[string]any{"key": "k", "window": "an hour"}, map[string]string{"nodes[1].parameters.window": "an hour"}},
		{"zero window", map[string]any{"key": "k", "window": "0s"}, map[string]string{"nodes[1].parameters.window": "longer than 0"}},
		{"long window", map[string]any{"key": "k", "window": "9000h"}, map[string]string{"nodes[1].parameters.window": "longest wait"}},
		{"bad until", map[string]any{"key": "k", "until": "8am"}, map[string]string{"nodes[1].parameters.until": "HH:MM"}},
		{"until 24:00", map[string]any{"key": "k", "until": "24:00"}, map[string]string{"nodes[1].parameters.until": "HH:MM"}},
		{"bad time zone", map[string]any{"key": "k", "until": "08:00", "timezone": "Mars/Olympus"}, map[string]string{"nodes[1].parameters.timezone": "IANA"}},
		{"time zone with window", map[string]any{"key": "k", "window": "1h", "timezone": "UTC"}, map[string]string{"nodes[1].parameters.timezone": "goes with until"}},
		{"unknown", map[string]any{"key": "k", "window": "1h", "size": 3.0}, map[string]string{"nodes[1].parameters.size": "unknown parameter"}},
		{"bad value template", map[string]any{"key": "k", "window": "1h", "value": "{{ +"}, map[string]string{"nodes[1].parameters.value": ""}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wantProblems(t, checkNode(t, workflow.Node{ID: "d", Type: DigestType, Parameters: c.params}), c.want)
		})
	}
}

// TestDigestCloses: a window closes its length after now; until at the next
// time of day in the time zone, a day later when it has passed today, DST
// included; the default value is the trigger input.
func TestDigestCloses(t *testing.T) {
	reg := WithControls(node.NewRegistry())
	env := map[string]any{"$trigger": map[string]any{"user": "u1", "tz": "America/New_York"}}
	cases := []struct {
		name   string
		params map[string]any
		now    time.Time
		want   time.Time
	}{
		{"window", map[string]any{"window": "90s"}, time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC), time.Date(2026, 11, 22, 10, 1, 30, 0, time.UTC)},
		{"until later today, UTC", map[string]any{"until": "18:30"}, time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC), time.Date(2026, 11, 22, 18, 30, 0, 0, time.UTC)},
		{"until passed: tomorrow", map[string]any{"until": "08:00"}, time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC), time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)},
		{"until now exactly: tomorrow", map[string]any{"until": "10:00"}, time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC), time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)},
		{"time zone from data", map[string]any{"until": "08:00", "timezone": "{{ $trigger.tz }}"}, time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC), time.Date(2026, 11, 22, 13, 0, 0, 0, time.UTC)},
		// New York springs forward on 8 March 2026: 08:00 EDT is 12:00 UTC.
		{"across DST", map[string]any{"until": "08:00", "timezone": "America/New_York"}, time.Date(2026, 3, 7, 14, 0, 0, 0, time.UTC), time.Date(2026, 3, 8, 12, 0, 0, 0, time.UTC)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := map[string]any{"key": "{{ $trigger.user }}"}
			for k, v := range c.params {
				p[k] = v
			}
			r := compileNode(t, reg, workflow.Node{ID: "d", Type: DigestType, Parameters: p})
			res, err := r.Run(context.Background(), &node.Input{Env: env, NodeID: "d", Now: c.now})
			if err != nil {
				t.Fatal(err)
			}
			key, value, closes, ok := digestOf(res.Output)
			if !ok || key != "u1" || !closes.Equal(c.want) {
				t.Fatalf("key %q closes %v (ok %v), want u1 and %v", key, closes, ok, c.want)
			}
			if m, _ := value.(map[string]any); m["user"] != "u1" {
				t.Fatalf("value %v, want the trigger input", value)
			}
		})
	}
}

func TestDigestBadRuntimeValues(t *testing.T) {
	reg := WithControls(node.NewRegistry())
	now := time.Now()
	for name, c := range map[string]struct {
		params map[string]any
		env    map[string]any
		code   string
	}{
		"empty key":     {map[string]any{"key": "{{ $trigger.user }}", "window": "1h"}, map[string]any{"$trigger": map[string]any{"user": ""}}, node.CodeInvalidParameter},
		"object key":    {map[string]any{"key": "{{ $trigger }}", "window": "1h"}, map[string]any{"$trigger": map[string]any{}}, node.CodeExpressionType},
		"bad time zone": {map[string]any{"key": "k", "until": "08:00", "timezone": "{{ $trigger.tz }}"}, map[string]any{"$trigger": map[string]any{"tz": "Nowhere/Else"}}, node.CodeInvalidParameter},
		"bad until":     {map[string]any{"key": "k", "until": "{{ $trigger.at }}"}, map[string]any{"$trigger": map[string]any{"at": "noon"}}, node.CodeInvalidParameter},
	} {
		t.Run(name, func(t *testing.T) {
			r := compileNode(t, reg, workflow.Node{ID: "d", Type: DigestType, Parameters: c.params})
			_, err := r.Run(context.Background(), &node.Input{Env: c.env, NodeID: "d", Now: now})
			nodeError(t, err, c.code, false)
		})
	}
}
