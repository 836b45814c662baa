// Package fault holds every fault hook of the rune command: the points where
// a crash test makes a worker or a scheduler die, or stall, at the worst
// moment. The variables that ask for them (SchedulerEnv, NotifyEnv) are read
// only by a binary built with the build tag "fault" (go build -tags fault,
// as e2e and the scheduler's tests build theirs): in a production build
// FromEnv returns no hooks whatever the environment says.
package fault

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/rune-org/rune/coord"
	"github.com/rune-org/rune/nodes"
)

// The variables a test sets on a rune process built with -tags fault.
const (
	// SchedulerEnv asks `rune scheduler` for a fault after each claim of
	// timers: "exit-after-claim" exits with status 137 (as kill -9 would
	// end it) before it publishes anything; "hold-after-claim=<duration>"
	// holds the claimed timers that long first, so that a test can kill or
	// stop the process while it holds them.
	SchedulerEnv = "RUNE_FAULT"
	// NotifyEnv asks `rune worker` to kill itself with SIGKILL at a point of
	// a notification send: nodes.FaultSent or nodes.FaultRecorded.
	NotifyEnv = "RUNE_TEST_KILL_AT"
)

// Hooks are the faults asked for; a nil field injects nothing.
type Hooks struct {
	// AfterClaim is the scheduler's scheduler.Config.AfterClaim.
	AfterClaim func([]coord.Timer)
	// Notify is the notification nodes' nodes.Options.Fault.
	Notify func(point, key string)
}

// Parse returns the hooks that the variables of getenv ask for, and an
// error naming the variable whose value it does not know. It reads the
// variables whatever the build: FromEnv is what a binary calls.
func Parse(getenv func(string) string) (Hooks, error) {
	var h Hooks
	switch v := strings.TrimSpace(getenv(SchedulerEnv)); {
	case v == "":
	case v == "exit-after-claim":
		h.AfterClaim = func([]coord.Timer) { os.Exit(137) }
	case strings.HasPrefix(v, "hold-after-claim="):
		d, err := time.ParseDuration(strings.TrimPrefix(v, "hold-after-claim="))
		if err != nil {
			return Hooks{}, fmt.Errorf("%s %q: %v", SchedulerEnv, v, err)
		}
		h.AfterClaim = func([]coord.Timer) { time.Sleep(d) }
	default:
		return Hooks{}, fmt.Errorf("%s %q: want exit-after-claim or hold-after-claim=<duration>", SchedulerEnv, v)
	}
	switch at := strings.TrimSpace(getenv(NotifyEnv)); at {
	case "":
	case nodes.FaultSent, nodes.FaultRecorded:
		h.Notify = func(point, _ string) {
			if point == at {
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {} // the signal is on its way
			}
		}
	default:
		return Hooks{}, fmt.Errorf("%s %q: want %s or %s", NotifyEnv, at, nodes.FaultSent, nodes.FaultRecorded)
	}
	return h, nil
}
