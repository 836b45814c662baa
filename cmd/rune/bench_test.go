package main

import (
	"strings"
	"testing"

	"github.com/rune-org/rune/store/storetest"
)

// --chain all starts its workers itself, with and without --no-fuse: it is
// refused, with what to give, where it cannot.
func TestBenchChainAllUsage(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"embedded", []string{"bench", "--chain", "all"}, "--chain all needs --amqp, --redis and --spawn-workers"},
		{"running workers", []string{"bench", "--chain", "all", "--amqp", "amqp://127.0.0.1:1/", "--redis", "redis://127.0.0.1:1/0"}, "--chain all needs"},
		{"no-fuse", []string{"bench", "--chain", "all", "--amqp", "amqp://127.0.0.1:1/", "--redis", "redis://127.0.0.1:1/0", "--spawn-workers", "1", "--no-fuse"}, "and no --no-fuse"},
		{"unknown chain", []string{"bench", "--chain", "grpc"}, `--chain "grpc": want set, http or all`},
		{"base without all", []string{"bench", "--base", "/usr/bin/true"}, "--base needs --chain all"},
		{"task sleep without http", []string{"bench", "--task-sleep", "10ms"}, "--task-sleep 10ms: want a duration not negative, with --chain http"},
		{"embedded-server chain all", []string{"bench", "--mode", "embedded-server", "--chain", "all"}, `--chain "all": --mode embedded-server wants set or http`},
		{"negative duration", []string{"bench", "--mode", "server", "--duration", "-1s"}, "--duration not negative"},
	} {
		code, _, stderr := runCLI(t, nil, c.args...)
		if code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("%s: exit status %d, stderr %q; want 2 and %q", c.name, code, stderr, c.want)
		}
	}
}

// A --base that is not a rune build says so, before anything is measured.
func TestBenchBaseNotRune(t *testing.T) {
	code, _, stderr := runCLI(t, nil, "bench", "--chain", "all", "--amqp", "amqp://127.0.0.1:1/", "--redis", "redis://127.0.0.1:1/0",
		"--spawn-workers", "1", "--base", "/bin/true")
	if code != 1 || !strings.Contains(stderr, "--base /bin/true: its bench printed no node rate") {
		t.Errorf("exit status %d, stderr %q; want 1 and that --base printed no node rate", code, stderr)
	}
}

// A server bench whose RabbitMQ cannot be reached says so and exits (it
// panicked: its clean-up was the nil function an error return left).
func TestBenchServerUnreachableBroker(t *testing.T) {
	code, _, stderr := runCLI(t, nil, "bench", "--mode", "server", "--postgres", storetest.PostgresURL(t),
		"--amqp", "amqp://127.0.0.1:1/", "--redis", "redis://127.0.0.1:1/0", "--executions", "1")
	if code != 1 || !strings.Contains(stderr, "127.0.0.1:1") {
		t.Errorf("exit status %d, stderr %q; want 1 and the unreachable address", code, stderr)
	}
}
