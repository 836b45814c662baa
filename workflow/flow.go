package workflow

import (
	"encoding/json"
	"time"
)

// Flow control by key on a node (issues 35 and 36). Both fields name a key
// (a template, evaluated when the node is about to run); the nodes of every
// workflow that give the same key share one limit.

// RateLimit spaces the starts of the runs of nodes sharing Key: at most
// Limit start per Per (Burst of them at once; default 1, evenly spaced). A
// run over the limit waits (status waiting, reason RATE_LIMITED) and starts
// at its slot.
type RateLimit struct {
	Key   string `json:"key"`
	Limit int    `json:"limit"`
	Per   string `json:"per"`
	Burst int    `json:"burst,omitempty"`
}

// Throttle admits at most Limit runs of nodes sharing Key in any window of
// Per. A run over it does not run: the node succeeds with output
// {"sent": false, "reason": "THROTTLED"} (OnLimit "skip", the default), or
// waits until the window has room (OnLimit "wait": status waiting, reason
// THROTTLED).
type Throttle struct {
	Key     string `json:"key"`
	Limit   int    `json:"limit"`
	Per     string `json:"per"`
	OnLimit string `json:"on_limit,omitempty"`
}

// Throttle.OnLimit values.
const (
	OnLimitSkip = "skip"
	OnLimitWait = "wait"
)

// Bounds of the flow-control fields (coord.Rate's: the coordinator accepts
// what validation accepts).
const (
	MaxRateLimit     = 1_000_000
	MaxThrottleLimit = 10_000
	MinFlowPer       = time.Millisecond
	MaxFlowPer       = 366 * 24 * time.Hour
	// MaxFlowKey bounds a key, its template as its value, in bytes.
	MaxFlowKey = 512
)

var (
	rateLimitFields = []string{"key", "limit", "per", "burst"}
	throttleFields  = []string{"key", "limit", "per", "on_limit"}
)

// flowControl decodes a node's rate_limit and throttle.
func (d *decoder) flowControl(f map[string]json.RawMessage, path string, n *Node) {
	if raw, ok := f["rate_limit"]; ok {
		p := join(path, "rate_limit")
		if rf, ok := d.object(raw, p, "rate_limit", rateLimitFields); ok {
			r := &RateLimit{}
			n.RateLimit = r
			d.field(rf, p, "key", &r.Key)
			d.field(rf, p, "limit", &r.Limit)
			d.field(rf, p, "per", &r.Per)
			if d.field(rf, p, "burst", &r.Burst) && r.Burst == 0 {
				d.report(join(p, "burst"), "must be at least 1; leave it out for 1 (runs evenly spaced)")
			}
		}
	}
	if raw, ok := f["throttle"]; ok {
		p := join(path, "throttle")
		if tf, ok := d.object(raw, p, "throttle", throttleFields); ok {
			t := &Throttle{}
			n.Throttle = t
			d.field(tf, p, "key", &t.Key)
			d.field(tf, p, "limit", &t.Limit)
			d.field(tf, p, "per", &t.Per)
			d.field(tf, p, "on_limit", &t.OnLimit)
		}
	}
}

// noFlowControl are the types that cannot take rate_limit or throttle: they
// do not run as a node does (a barrier arrives, a wait suspends).
var noFlowControl = map[string]bool{"aggregator": true, "merge": true, "wait": true, "delay": true}

func (v *validator) checkFlowControl(n *Node, p string) {
	if n.RateLimit == nil && n.Throttle == nil {
		return
	}
	if n.Trigger || noFlowControl[n.Type] {
		field := "rate_limit"
		if n.RateLimit == nil {
			field = "throttle"
		}
		v.report(p+"."+field, "a %s node cannot be rate-limited or throttled; put the limit on the node after it", truncate(n.Type))
		return
	}
	if r := n.RateLimit; r != nil {
		p := p + ".rate_limit"
		v.checkFlowCommon(p, r.Key, r.Limit, MaxRateLimit, r.Per)
		if r.Burst < 0 || (r.Limit >= 1 && r.Burst > r.Limit) {
			v.report(p+".burst", "%d is out of range: want 1 to the limit, %d", r.Burst, r.Limit)
		}
	}
	if t := n.Throttle; t != nil {
		p := p + ".throttle"
		v.checkFlowCommon(p, t.Key, t.Limit, MaxThrottleLimit, t.Per)
		if t.OnLimit != "" && t.OnLimit != OnLimitSkip && t.OnLimit != OnLimitWait {
			v.report(p+".on_limit", "unknown value %q: want %q (the node does not run and yields {\"sent\": false, \"reason\": \"THROTTLED\"}, the default) or %q (it waits until the window has room)", truncate(t.OnLimit), OnLimitSkip, OnLimitWait)
		}
	}
}

func (v *validator) checkFlowCommon(p, key string, limit, maxLimit int, per string) {
	switch {
	case key == "":
		v.report(p+".key", "missing key: a string or {{ }} template naming what the limit counts, such as \"twilio-main\" or \"{{ $trigger.user }}\"")
	case len(key) > MaxFlowKey:
		v.report(p+".key", "key of %d bytes is longer than %d", len(key), MaxFlowKey)
	}
	if limit < 1 || limit > maxLimit {
		v.report(p+".limit", "%d is out of range: want 1 to %d", limit, maxLimit)
	}
	if per == "" {
		v.report(p+".per", "missing period: a duration such as \"1s\" or \"24h\"")
		return
	}
	d, err := ParseDuration(per)
	switch {
	case err != nil:
		v.report(p+".per", "%v", err)
	case d < MinFlowPer || d > MaxFlowPer:
		v.report(p+".per", "%s is out of range: want %s to %s", d, MinFlowPer, MaxFlowPer)
	}
}

// FlowPer is the parsed period of a validated rate_limit or throttle.
func FlowPer(per string) time.Duration {
	d, _ := ParseDuration(per)
	return d
}
