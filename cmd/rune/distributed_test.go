package main

import (
	"strings"
	"testing"
)

// A batch size that is not one is refused before anything connects, naming
// where it came from.
func TestMessageBatchUsage(t *testing.T) {
	for _, c := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"negative flag", nil, []string{"--message-batch", "-1"}, "--message-batch -1: want at least 1"},
		{"environment not a number", map[string]string{"RUNE_MESSAGE_BATCH": "lots"}, nil, `RUNE_MESSAGE_BATCH="lots": want a whole number`},
	} {
		args := append([]string{"worker", "--amqp", "amqp://127.0.0.1:1/", "--redis", "redis://127.0.0.1:1/0"}, c.args...)
		code, _, stderr := runCLI(t, c.env, args...)
		if code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("%s: exit status %d, stderr %q; want 2 and %q", c.name, code, stderr, c.want)
		}
	}
}
