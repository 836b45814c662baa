// Package dirlock gives one process a data directory: an exclusive flock on
// DIR/rune.lock, which holds the owner's PID. The kernel releases the lock
// when the process exits, however it exits (kill -9 included), so a stale
// lock file never keeps a new owner out.
package dirlock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// FileName is the lock file's name inside the directory.
const FileName = "rune.lock"

// Lock is a held directory lock.
type Lock struct {
	f *os.File
}

// HeldError is returned by Acquire when another process holds the lock.
type HeldError struct {
	Dir string
	// PID is the holder's process id as it wrote it (0 when unreadable: the
	// holder is between taking the lock and writing its PID).
	PID int
}

func (e *HeldError) Error() string {
	pid := "unknown"
	if e.PID > 0 {
		pid = strconv.Itoa(e.PID)
	}
	return fmt.Sprintf("data directory %s is in use by another rune server (PID %s, lock %s): one server per data directory",
		e.Dir, pid, filepath.Join(e.Dir, FileName))
}

// Acquire takes dir's lock without waiting, creating dir and the lock file
// when missing, and writes this process's PID into it. It fails with a
// *HeldError when another process holds it. The lock lasts until Release or
// the process's exit.
func Acquire(dir string) (*Lock, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, FileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			b, _ := os.ReadFile(path)
			pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
			return nil, &HeldError{Dir: dir, PID: pid}
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	// The PID is for the next process's error message; the flock is the lock.
	err = f.Truncate(0)
	if err == nil {
		_, err = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	return &Lock{f: f}, nil
}

// Release gives the lock up. The file stays (removing it would let a
// process that opened it before the removal lock a file no one else sees).
func (l *Lock) Release() error {
	return l.f.Close() // closing the descriptor releases the flock
}
