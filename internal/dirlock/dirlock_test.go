package dirlock

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestAcquireExclusive: a second Acquire of a held directory fails at once
// naming the directory and the holder's PID; after Release it succeeds.
func TestAcquireExclusive(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	l, err := Acquire(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, FileName))
	if err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(os.Getpid()) {
		t.Fatalf("lock file = %q, %v; want this PID", b, err)
	}
	// flock conflicts between two opens of the file, even in one process.
	_, err = Acquire(dir)
	var held *HeldError
	if !errors.As(err, &held) || held.PID != os.Getpid() || held.Dir != dir {
		t.Fatalf("second Acquire = %v, want a HeldError naming %s and PID %d", err, dir, os.Getpid())
	}
	if msg := err.Error(); !strings.Contains(msg, dir) || !strings.Contains(msg, strconv.Itoa(os.Getpid())) {
		t.Fatalf("error %q does not name the directory and the PID", msg)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	l2, err := Acquire(dir)
	if err != nil {
		t.Fatalf("Acquire after Release: %v", err)
	}
	l2.Release()
}
