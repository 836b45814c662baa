package bench

import (
	"context"
	"encoding/json"

	coordmem "github.com/rune-org/rune/coord/memory"
	"github.com/rune-org/rune/engine"
	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/nodes"
)

// probe runs f on an in-process engine with the settings of the distributed
// runtime (the same reference threshold for large values), to learn the
// size of the messages a workflow makes.
func probe(f func(*engine.Engine) error) error {
	co := coordmem.New(coordmem.Options{})
	defer co.Close()
	// Unfused, with a definition store: every node a hop, its message
	// carrying the definition's reference.
	e, err := engine.New(engine.Config{Registry: nodes.NewRegistry(nodes.Options{}), Coord: co,
		Barriers: coordmem.NewBarriers(), Blobs: coordmem.NewBlobs(), Definitions: coordmem.NewBlobs(), NoFuse: true})
	if err != nil {
		return err
	}
	return f(e)
}

// Sizes is the mean encoded size of the messages of one execution.
type Sizes struct {
	// Execution is the mean node execution message, in bytes.
	Execution int `json:"execution_bytes"`
	// Status is the mean status message, in bytes.
	Status int `json:"status_bytes"`
	// StatusesPerNode is how many status messages a node sends.
	StatusesPerNode float64 `json:"statuses_per_node"`
}

// LinearSizes runs one execution of LinearWorkflow(n) in process and
// measures its messages, so the broker's raw ceiling can be measured for
// the same bytes.
func LinearSizes(n int) (Sizes, error) {
	var s Sizes
	err := probe(func(e *engine.Engine) error {
		ctx := context.Background()
		wf, err := e.Compile(LinearWorkflow(n))
		if err != nil {
			return err
		}
		var eff engine.Effects
		if err := e.Start(ctx, wf, "size_probe", map[string]any{"seed": 1}, &eff); err != nil {
			return err
		}
		var execBytes, statusBytes, execs, statuses int
		// The trigger's status is not a node execution's.
		eff.Statuses = eff.Statuses[:0]
		for len(eff.Next) > 0 {
			m := eff.Next[0].Msg
			raw, err := json.Marshal(m)
			if err != nil {
				return err
			}
			execBytes += len(raw)
			execs++
			eff = engine.Effects{}
			if err := e.Handle(ctx, engine.Delivery{}, m, &eff); err != nil {
				return err
			}
			if len(eff.Statuses) > 0 {
				// One status message per hop (publish.Publisher).
				raw, err := json.Marshal(&message.Statuses{WorkflowID: m.WorkflowID, ExecutionID: m.ExecutionID, Statuses: eff.Statuses})
				if err != nil {
					return err
				}
				statusBytes += len(raw)
				statuses++
			}
		}
		if execs > 0 && statuses > 0 {
			s = Sizes{Execution: execBytes / execs, Status: statusBytes / statuses, StatusesPerNode: float64(statuses) / float64(execs)}
		}
		return nil
	})
	return s, err
}
