package coord

import "context"

// Pauses holds the pause flag of executions (issue 34, POST
// /v1/executions/{id}/pause). The engine asks it before a node begins: a
// branch of a paused execution parks (in the timer store, recorded with
// Park) instead of running, and resuming wakes those parked branches. The
// coordinators of both runtimes implement it; a Coordinator that does not
// has no paused executions.
type Pauses interface {
	// SetPaused sets (paused true) or clears exec's flag. Setting it twice
	// is setting it once; clearing an unset flag changes nothing. The flag
	// does not depend on exec being known to the coordinator: an
	// execution may be paused before its first message begins.
	SetPaused(ctx context.Context, exec string, paused bool) error
	// Paused reports whether exec's flag is set.
	Paused(ctx context.Context, exec string) (bool, error)
}
