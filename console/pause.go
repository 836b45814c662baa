package console

import "net/http"

// execPaused reports whether execution id is paused (issue 34), for the
// execution page's Pause / Resume control.
func (c *Console) execPaused(r *http.Request, id string) bool {
	p, err := c.cfg.Store.ExecutionPaused(r.Context(), id)
	if err != nil {
		c.log.Error("console: read the execution's pause", "execution", id, "err", err)
		return false
	}
	return p != nil
}
