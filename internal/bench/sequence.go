package bench

import (
	"fmt"
	"io"
	"time"
)

// Sequence is what executions run one at a time over a chain of tasks
// measured: the shapes of the peers' published benchmarks (Windmill's 400
// sequential tasks of 10 ms on one worker, a 3-step flow's overhead per
// step; docs/benchmarks.md, issue 33).
type Sequence struct {
	Executions int `json:"executions"`
	// Steps is the chain's tasks (nodes after the trigger); TaskSleep how
	// long the endpoint sleeps per task.
	Steps     int           `json:"steps"`
	TaskSleep time.Duration `json:"task_sleep_ns"`
	// PerExecution is one execution's wall time, start to completion as
	// the bench saw them: the run's time over its executions.
	PerExecution time.Duration `json:"per_execution_ns"`
	// OverheadPerStep is PerExecution minus the sleeps, over the steps:
	// Rune's cost of a step, with the HTTP call (CallP50 less the sleep,
	// the call made by the bench itself) included.
	OverheadPerStep time.Duration `json:"overhead_per_step_ns"`
	CallP50         time.Duration `json:"http_call_p50_ns,omitempty"`
}

// sequenceOf is the Sequence of res, a run of steps-task executions, nil
// unless they ran one at a time.
func sequenceOf(res *Result, inflight, steps int, sleep, callP50 time.Duration) *Sequence {
	if res == nil || inflight != 1 || res.Executions == 0 || steps == 0 {
		return nil
	}
	per := res.Elapsed / time.Duration(res.Executions)
	return &Sequence{Executions: res.Executions, Steps: steps, TaskSleep: sleep, PerExecution: per,
		OverheadPerStep: (per - time.Duration(steps)*sleep) / time.Duration(steps), CallP50: callP50}
}

func (s *Sequence) print(w io.Writer) {
	if s == nil {
		return
	}
	fmt.Fprintf(w, "  one at a time:    %d executions of %d steps sleeping %v: %v per execution, overhead per step %v (total minus the sleeps, over the steps)\n",
		s.Executions, s.Steps, s.TaskSleep, s.PerExecution.Round(time.Microsecond), s.OverheadPerStep.Round(time.Microsecond))
	if s.CallP50 > 0 {
		fmt.Fprintf(w, "                    of which the HTTP call itself: p50 %v (the bench's own GET, less the sleep)\n", (s.CallP50 - s.TaskSleep).Round(time.Microsecond))
	}
}
