package engine

// FirstCopies is a Sink that knows whether the message it handles is a
// first copy on its first delivery, and marks the first copies among the
// messages it publishes (broker.Message.First).
//
// A first copy is a successor published by the handling whose Finish first
// recorded its parent: Finish records a message id once, so each message id
// has at most one first copy. Every other copy (a replay's, a trigger's, a
// retry's, which goes through a delay queue, a dead letter's) is published
// unmarked. So a first copy delivered for the first time cannot follow an
// earlier delivery of its id that ran, and the engine may skip Begin for it
// (node.Eager): its Finish makes Begin's checks (coord.Finish.Optimistic).
type FirstCopies interface {
	// FirstCopy reports whether the message handled is a first copy that
	// the broker had not delivered before.
	FirstCopy() bool
	// MarkFirst says whether the Execute calls that follow report first
	// copies; it is false until called.
	MarkFirst(first bool)
}

// firstCopy reports whether sink says the message it handles is a first
// copy delivered for the first time.
func firstCopy(sink Sink) bool {
	fc, ok := sink.(FirstCopies)
	return ok && fc.FirstCopy()
}

// markFirst tells sink whether the successors it is about to be given are
// first copies.
func markFirst(sink Sink, first bool) {
	if fc, ok := sink.(FirstCopies); ok {
		fc.MarkFirst(first)
	}
}
