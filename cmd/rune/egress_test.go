package main

import (
	"strings"
	"testing"
)

// An invalid egress setting is a usage error (exit 2) naming the setting
// and the item, before anything starts.
func TestEgressSettingsInvalid(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	for _, tc := range []struct {
		vars       map[string]string
		args       []string
		name, item string
	}{
		{map[string]string{"RUNE_EGRESS_DENY": "loopback,loopbak"}, []string{"server", "--addr", "127.0.0.1:0", "--data", data}, "RUNE_EGRESS_DENY", "loopbak"},
		{map[string]string{"RUNE_EGRESS_ALLOW": "10.0.0.0/33"}, []string{"server", "--addr", "127.0.0.1:0", "--data", data}, "RUNE_EGRESS_ALLOW", "10.0.0.0/33"},
		{nil, []string{"server", "--addr", "127.0.0.1:0", "--data", data, "--egress-allow", "*.corp.test:80"}, "--egress-allow", "*.corp.test:80"},
		{nil, []string{"worker", "--amqp", "amqp://127.0.0.1:1/", "--redis", "redis://127.0.0.1:1/0", "--egress-deny", "everything"}, "--egress-deny", "everything"},
	} {
		c := &cli{t: t, vars: tc.vars}
		code, _, stderr := c.run(tc.args...)
		if code != exitInvalid || !strings.Contains(stderr, tc.name) || !strings.Contains(stderr, `"`+tc.item+`"`) {
			t.Errorf("%v %v: exit %d, stderr %q; want 2 naming %s and %q", tc.vars, tc.args, code, stderr, tc.name, tc.item)
		}
	}
}
