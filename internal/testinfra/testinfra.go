// Package testinfra gives integration tests their real servers: URLs from the
// environment with loopback defaults, and per-test names so tests run in
// parallel without seeing each other's queues or keys.
//
// When a server is unreachable a test is skipped, except with CI=true, where
// it fails: CI never passes by silently skipping.
package testinfra

import (
	"crypto/rand"
	"encoding/hex"
	"net"
	"net/url"
	"os"
	"os/exec"
	"testing"
	"time"
)

// Env returns the environment variable name, or def when it is unset.
func Env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// AMQPURL is the RabbitMQ the tests use: RUNE_TEST_AMQP_URL, default the local one.
func AMQPURL(t testing.TB) string {
	u := Env("RUNE_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/")
	Require(t, "RabbitMQ", u)
	return u
}

// RedisURL is the Redis the tests use: RUNE_TEST_REDIS_URL, default the local one.
func RedisURL(t testing.TB) string {
	u := Env("RUNE_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
	Require(t, "Redis", u)
	return u
}

// PostgresURL is the PostgreSQL database the tests use: RUNE_TEST_POSTGRES_URL,
// default the local server's rune_test database (user postgres, trust auth).
// Tests isolate themselves in a schema each (see store/storetest).
func PostgresURL(t testing.TB) string {
	u := Env("RUNE_TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/rune_test?sslmode=disable")
	Require(t, "PostgreSQL", u)
	return u
}

// Require skips t, or fails it under CI=true, when rawURL's host does not accept connections.
func Require(t testing.TB, what, rawURL string) {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatalf("testinfra: bad %s URL %q: %v", what, rawURL, err)
	}
	conn, err := net.DialTimeout("tcp", u.Host, 2*time.Second)
	if err == nil {
		conn.Close()
		return
	}
	Unavailable(t, "%s at %s is unreachable: %v (start it, see README)", what, u.Host, err)
}

// RequireCommand skips t, or fails it under CI=true, when the command name
// (rabbitmqctl, say) is not on PATH.
func RequireCommand(t testing.TB, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		Unavailable(t, "%s not found: %v", name, err)
	}
}

// Unavailable skips t for want of something the test needs, or fails it
// under CI=true: CI never passes by silently skipping.
func Unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("testinfra: "+format+" (CI=true, so this fails rather than skips)", args...)
	}
	t.Skipf("testinfra: "+format, args...)
}

// Name returns a name unique to this test run, for queue prefixes and Redis
// key prefixes: "t" followed by 12 hex digits.
func Name(t testing.TB) string {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return "t" + hex.EncodeToString(b[:])
}
