package console

import (
	"encoding/json"
	"net/http"

	"github.com/rune-org/rune/store"
)

// rerunContext is the context a re-run from run's node starts with, as the
// API's rerun takes it ("$trigger", "$<node id>"), for the panel's "Re-run
// from here" form to pre-fill: what inputContext shows, keyed as the engine
// keys it. Nil for a run inside a split (the API refuses those: re-run
// from the split) and for one of an execution still running.
func rerunContext(d *executionData, run *store.NodeRun) json.RawMessage {
	if run.Branch != "" || !store.Final(d.X.Status) {
		return nil
	}
	var shown map[string]json.RawMessage
	if err := json.Unmarshal(inputContext(d, run), &shown); err != nil {
		return nil
	}
	acc := make(map[string]json.RawMessage, len(shown))
	for k, v := range shown { // "trigger" is the payload: "$trigger"
		acc["$"+k] = v
	}
	b, _ := json.MarshalIndent(acc, "", "  ")
	return b
}

// pauseData adds whether workflow id is paused (and since when) to a
// workflow page's data, for its Pause / Resume control.
func (c *Console) pauseData(r *http.Request, id string, data map[string]any) {
	p, err := c.cfg.Store.WorkflowPaused(r.Context(), id)
	if err != nil {
		c.log.Error("console: read the workflow's pause", "workflow", id, "err", err)
		return
	}
	data["Paused"] = p
}
