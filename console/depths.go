package console

import (
	"net/http"
)

// Depth is one depth the dashboard shows on the distributed server
// (issue 38): a RabbitMQ queue's ready messages, or the timer store's
// scheduled and claimed timers.
type Depth struct {
	// Name is the queue ("workflow.execution.0") or "timers scheduled",
	// "timers claimed".
	Name  string
	Count int
	// Note says more: the next timer's due time, say.
	Note string
}

// addDepths adds the server's queue and timer depths to the dashboard's
// data, read on each load, when the server has them and the session sees
// every workflow (the queues carry every workflow's messages).
func (c *Console) addDepths(r *http.Request, data map[string]any) {
	if c.cfg.Depths == nil || accessOf(r).Scoped {
		return
	}
	ds, err := c.cfg.Depths(r.Context())
	data["HasDepths"], data["Depths"] = true, ds
	if err != nil {
		c.log.Error("console: queue and timer depths", "err", err)
		data["DepthsError"] = "Reading some depths failed; see the server log."
	}
}
