package coord

import "context"

// Effects records the external side effects of nodes (an email handed to an
// SMTP server, an SMS accepted by a provider) under an idempotency key, so
// that a retried or redelivered node returns the recorded result instead of
// acting twice (the notification spec's last rule: no duplicated side
// effects).
//
// A node calls Begin before it acts and Record once the action has left its
// hands (an email's final "." written, an SMS accepted). An email records
// before the SMTP server's reply to its data, so that a worker dying while it
// waits leaves a record; when the reply then refuses the mail, the node calls
// Withdraw.
// The key must be the same for every attempt and delivery of the same work
// (node.Input.IdempotencyKey), and different for different work.
//
// Contract:
//   - Begin returns Done with the result of the first Record for key, if any;
//     otherwise it counts this intent and returns Intents, the number of
//     Begins for key so far, this one included. Intents > 1 means an earlier
//     attempt may have acted without recording it (it died in between): the
//     caller decides what to do about that window.
//   - Record stores result under key. The first Record wins; a later one
//     keeps the first result and returns nil.
//   - Withdraw removes the result stored under key when it is result, byte
//     for byte, so that the next Begin acts again: what was recorded did not
//     happen after all. Another result, or none, is left as it is, and
//     returns nil. The intents counted so far are kept.
//   - All three are atomic per key, safe for concurrent use, and keep the key
//     for the store's retention after its last use (at least a day).
//   - An empty key is an error.
type Effects interface {
	Begin(ctx context.Context, key string) (Effect, error)
	Record(ctx context.Context, key string, result []byte) error
	Withdraw(ctx context.Context, key string, result []byte) error
}

// Holder is implemented by Effects stores that can bind the calls for one
// key to a resource taken up front (a connection), so that the Record made
// right after an action does not wait for that resource (nor dial it): the
// moment between the action and its record is the one where a crash repeats
// the action. Hold returns the binding, which keeps the Effects contract
// for every key, and its release, to be called once the key's calls are
// done.
type Holder interface {
	Hold(ctx context.Context, key string) (Effects, func())
}

// Effect is what Begin knows of one side effect.
type Effect struct {
	// Done is true when the effect was recorded; Result is what was recorded.
	Done   bool
	Result []byte
	// Intents counts the Begins for the key, this one included (0 when Done).
	Intents int
}
