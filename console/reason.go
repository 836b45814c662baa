package console

import "github.com/rune-org/rune/message"

// reasonWords say why a deferred node waits (flow control, issue 35), in
// the note of its node on the graph.
var reasonWords = map[string]string{
	message.ReasonRateLimited: "rate limited",
	message.ReasonThrottled:   "throttled",
	message.ReasonQuietHours:  "quiet hours",
}
