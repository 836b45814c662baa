package workflow

import (
	"encoding/json"
	"time"

	"github.com/rune-org/rune/expr"
)

// Flow control by key (issue 35; docs/dsl.md "Flow control"): the workflow
// settings concurrency, debounce and priority. The server applies them
// (server/flow.go); here they are decoded and checked.

// Bounds of the flow-control settings.
const (
	MaxConcurrencyLimit = 10_000
	MinPriority         = 1
	DefaultPriority     = 5
	MaxPriority         = 10
	maxFlowKey          = 1024
)

// Concurrency caps the executions of the workflow with the same key that
// are past enqueued at once.
type Concurrency struct {
	// Key is a template over $trigger ("{{ $trigger.tenant }}"); "" is one
	// key for the whole workflow.
	Key   string `json:"key,omitempty"`
	Limit int    `json:"limit"`
	// OnLimit is "queue" (default), "drop" or "cancel_oldest".
	OnLimit string `json:"on_limit,omitempty"`
}

// Debounce collapses triggers with the same key within Period of the
// previous one into one execution, started Period after the last with its
// input; MaxWait caps the delay after the first.
type Debounce struct {
	Key     string `json:"key,omitempty"`
	Period  string `json:"period"`
	MaxWait string `json:"max_wait,omitempty"`
}

var (
	concurrencyFields = []string{"key", "limit", "on_limit"}
	debounceFields    = []string{"key", "period", "max_wait"}
	onLimits          = []string{"queue", "drop", "cancel_oldest"}
)

// flowSettings decodes the flow-control fields of settings s.
func (d *decoder) flowSettings(s map[string]json.RawMessage, st *Settings) {
	if raw, ok := s["concurrency"]; ok && !isNull(raw) {
		if f, ok := d.object(raw, "settings.concurrency", "concurrency", concurrencyFields); ok {
			st.Concurrency = &Concurrency{}
			d.field(f, "settings.concurrency", "key", &st.Concurrency.Key)
			d.field(f, "settings.concurrency", "limit", &st.Concurrency.Limit)
			d.field(f, "settings.concurrency", "on_limit", &st.Concurrency.OnLimit)
		}
	}
	if raw, ok := s["debounce"]; ok && !isNull(raw) {
		if f, ok := d.object(raw, "settings.debounce", "debounce", debounceFields); ok {
			st.Debounce = &Debounce{}
			d.field(f, "settings.debounce", "key", &st.Debounce.Key)
			d.field(f, "settings.debounce", "period", &st.Debounce.Period)
			d.field(f, "settings.debounce", "max_wait", &st.Debounce.MaxWait)
		}
	}
	d.field(s, "settings", "priority", &st.Priority)
}

// checkFlow checks the flow-control settings.
func (v *validator) checkFlow() {
	st := v.d.Settings
	if st == nil {
		return
	}
	if c := st.Concurrency; c != nil {
		if c.Limit < 1 || c.Limit > MaxConcurrencyLimit {
			v.report("settings.concurrency.limit", "%d is out of range: want 1 to %d", c.Limit, MaxConcurrencyLimit)
		}
		if c.OnLimit != "" && !contains(onLimits, c.OnLimit) {
			v.report("settings.concurrency.on_limit", "%q is not one of queue, drop, cancel_oldest", truncate(c.OnLimit))
		}
		v.checkFlowKey("settings.concurrency.key", c.Key)
	}
	if db := st.Debounce; db != nil {
		period, err := ParseDuration(db.Period)
		switch {
		case db.Period == "":
			v.report("settings.debounce.period", "missing: want a duration such as \"30s\"")
		case err != nil:
			v.report("settings.debounce.period", "%q: %v", truncate(db.Period), err)
		case period <= 0 || period > 7*24*time.Hour:
			v.report("settings.debounce.period", "%s is out of range: want more than 0 and at most 7 days", db.Period)
		}
		if db.MaxWait != "" {
			w, err := ParseDuration(db.MaxWait)
			switch {
			case err != nil:
				v.report("settings.debounce.max_wait", "%q: %v", truncate(db.MaxWait), err)
			case w < period || w > 30*24*time.Hour:
				v.report("settings.debounce.max_wait", "%s is out of range: want at least the period and at most 30 days", db.MaxWait)
			}
		}
		v.checkFlowKey("settings.debounce.key", db.Key)
	}
	if p := st.Priority; p != nil && (*p < MinPriority || *p > MaxPriority) {
		v.report("settings.priority", "%d is out of range: want %d (lowest) to %d (highest)", *p, MinPriority, MaxPriority)
	}
}

func (v *validator) checkFlowKey(path, key string) {
	if len(key) > maxFlowKey {
		v.report(path, "%d bytes, over the limit of %d", len(key), maxFlowKey)
		return
	}
	if err := expr.Check(key); err != nil {
		v.report(path, "%v", err)
	}
}
