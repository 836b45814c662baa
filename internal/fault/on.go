//go:build fault

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

// Enabled reports whether this binary was built with the fault tag, so
// that FromEnv reads the variables.
const Enabled = true

// FromEnv returns the hooks the environment asks for (see Parse): this is a
// build with the fault tag, for crash tests.
func FromEnv(getenv func(string) string) (Hooks, error) { return Parse(getenv) }

// Parse returns the hooks that the variables of getenv ask for, and an
// error naming the variable whose value it does not know. It reads the
// variables; it exists only in a build with the fault tag, so that a
// production binary holds none of these hooks.
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
