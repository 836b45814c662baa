package main

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestVersion(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--version"}, {"version"}} {
		code, out, stderr := runCLI(t, nil, args...)
		if code != 0 || !strings.HasPrefix(out, "rune ") || !strings.Contains(out, "go1") {
			t.Errorf("%v: exit %d, %q %q", args, code, out, stderr)
		}
	}
	bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/rune-org/rune", Version: "v1.2.3"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "84a0918abcdef0123456789"}, {Key: "vcs.time", Value: "2026-11-26T10:00:00Z"}, {Key: "vcs.modified", Value: "true"}}}
	if got, want := versionLine(bi, true), "rune v1.2.3, commit 84a0918abcde (modified) of 2026-11-26T10:00:00Z, go1.26.8"; got != want {
		t.Errorf("versionLine = %q, want %q", got, want)
	}
}

func TestHelpOfACommand(t *testing.T) {
	t.Parallel()
	code, _, stderr := runCLI(t, nil, "help", "run")
	if code != 0 || !strings.Contains(stderr, "Usage: rune run WORKFLOW.json") || !strings.Contains(stderr, "--quiet") {
		t.Fatalf("rune help run: exit %d\n%s", code, stderr)
	}
	// The flags' descriptions start in one column.
	col := -1
	for _, l := range strings.Split(stderr[strings.Index(stderr, "Flags:"):], "\n")[1:] {
		if !strings.HasPrefix(l, "  --") {
			continue
		}
		name := strings.Fields(l)[0]
		rest := l[strings.Index(l, name)+len(name):]
		if fields := strings.Fields(rest); len(fields) > 0 && (fields[0] == "string" || fields[0] == "int" || fields[0] == "value") {
			rest = rest[strings.Index(rest, fields[0])+len(fields[0]):]
		}
		c := len(l) - len(strings.TrimLeft(rest, " "))
		if col >= 0 && c != col {
			t.Errorf("description at column %d, others at %d: %q", c, col, l)
		}
		col = c
	}
	if code, out, _ := runCLI(t, nil, "help"); code != 0 || !strings.Contains(out, "  permissions  print the RabbitMQ") || !strings.Contains(out, "  run          run a workflow") {
		t.Errorf("rune help: exit %d, commands not aligned:\n%s", code, out)
	}
}

func TestSuggestions(t *testing.T) {
	t.Parallel()
	code, _, stderr := runCLI(t, nil, "valdiate", "x.json")
	if code != exitInvalid || !strings.Contains(stderr, `unknown command "valdiate"; did you mean "validate"?`) {
		t.Errorf("unknown command: exit %d, %s", code, stderr)
	}
	code, _, stderr = runCLI(t, nil, "run", "x.json", "--jsn")
	if code != exitInvalid || !strings.Contains(stderr, "did you mean --json?") || strings.Count(stderr, "flag provided but not defined") != 1 || strings.Contains(stderr, "Usage:") {
		t.Errorf("unknown flag: exit %d, %s", code, stderr)
	}
	if code, _, stderr := runCLI(t, nil, "help", "executoins"); code != exitInvalid || !strings.Contains(stderr, `did you mean "executions"?`) {
		t.Errorf("help of an unknown command: exit %d, %s", code, stderr)
	}
}

// TestHelpHidesSecrets: the token from RUNE_TOKEN and the passwords of URLs
// from the environment never appear in any command's help.
func TestHelpHidesSecrets(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"RUNE_TOKEN":        "rune_s3cr3t-token",
		"RUNE_AMQP_URL":     "amqp://rune:amqp-pw@127.0.0.1:5672/",
		"RUNE_REDIS_URL":    "redis://:redis-pw@127.0.0.1:6379/0",
		"RUNE_POSTGRES_URL": "postgres://rune:pg-pw@127.0.0.1:5432/rune",
	}
	for _, c := range commands() {
		if c.name == "help" || c.name == "version" {
			continue
		}
		_, out, stderr := runCLI(t, env, c.name, "-h")
		for _, secret := range []string{"s3cr3t", "amqp-pw", "redis-pw", "pg-pw"} {
			if strings.Contains(out+stderr, secret) {
				t.Errorf("rune %s -h shows %q:\n%s", c.name, secret, stderr)
			}
		}
	}
	_, _, stderr := runCLI(t, env, "executions", "-h")
	if !strings.Contains(strings.Join(strings.Fields(stderr), " "), "(default: from $RUNE_TOKEN)") {
		t.Errorf("the token's default is not named:\n%s", stderr)
	}
}
