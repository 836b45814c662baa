// Package fault holds every fault hook of the rune command: the points where
// a crash test makes a worker or a scheduler die, or stall, at the worst
// moment. The variables that ask for them (SchedulerEnv, NotifyEnv) are read
// only by a binary built with the build tag "fault" (go build -tags fault,
// as e2e and the scheduler's tests build theirs): in a production build
// FromEnv returns no hooks whatever the environment says, and the hooks
// themselves are not compiled in (they live in on.go, behind the tag).
package fault

import "github.com/rune-org/rune/coord"

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
