package workflow

import (
	"fmt"
	"testing"
	"time"
)

func flowDef(fields string) string {
	return fmt.Sprintf(`{"id":"w","nodes":[{"id":"start","type":"trigger","trigger":true},
		{"id":"send","type":"http",%s}],"edges":[{"id":"e1","src":"start","dst":"send"}]}`, fields)
}

// Issue 35 item 2, issue 36 item 4: rate_limit and throttle decode, and
// every wrong value is refused naming its field.
func TestFlowControlFields(t *testing.T) {
	d, err := Load([]byte(flowDef(`"rate_limit":{"key":"twilio-main","limit":10,"per":"1s","burst":2},
		"throttle":{"key":"{{ $trigger.user }}","limit":3,"per":"24h","on_limit":"wait"}`)), fakeTypes{})
	if err != nil {
		t.Fatal(err)
	}
	r, th := d.Nodes[1].RateLimit, d.Nodes[1].Throttle
	if *r != (RateLimit{Key: "twilio-main", Limit: 10, Per: "1s", Burst: 2}) || FlowPer(r.Per) != time.Second {
		t.Errorf("rate_limit = %+v", r)
	}
	if *th != (Throttle{Key: "{{ $trigger.user }}", Limit: 3, Per: "24h", OnLimit: OnLimitWait}) {
		t.Errorf("throttle = %+v", th)
	}
	for _, tc := range []struct {
		fields string
		want   Problem
	}{
		{`"rate_limit":{"limit":10,"per":"1s"}`, Problem{"nodes[1].rate_limit.key", "missing key: a string or {{ }} template naming what the limit counts, such as \"twilio-main\" or \"{{ $trigger.user }}\""}},
		{`"rate_limit":{"key":"k","limit":0,"per":"1s"}`, Problem{"nodes[1].rate_limit.limit", "0 is out of range: want 1 to 1000000"}},
		{`"rate_limit":{"key":"k","limit":10}`, Problem{"nodes[1].rate_limit.per", "missing period: a duration such as \"1s\" or \"24h\""}},
		{`"rate_limit":{"key":"k","limit":10,"per":"0s"}`, Problem{"nodes[1].rate_limit.per", "0s is out of range: want 1ms to 8784h0m0s"}},
		{`"rate_limit":{"key":"k","limit":10,"per":"soon"}`, Problem{"nodes[1].rate_limit.per", `invalid duration "soon": want a Go duration such as "90s", "1h30m" or "500ms", or an ISO 8601 duration such as "PT1H30M", "P1D", "P2DT3H" or "PT0.5S"`}},
		{`"rate_limit":{"key":"k","limit":2,"per":"1s","burst":3}`, Problem{"nodes[1].rate_limit.burst", "3 is out of range: want 1 to the limit, 2"}},
		{`"rate_limit":{"key":"k","limit":2,"per":"1s","burst":0}`, Problem{"nodes[1].rate_limit.burst", "must be at least 1; leave it out for 1 (runs evenly spaced)"}},
		{`"rate_limit":{"key":"k","limit":2,"per":"1s","every":3}`, Problem{"nodes[1].rate_limit.every", "unknown field (rate_limit fields: key, limit, per, burst)"}},
		{`"rate_limit":"fast"`, Problem{"nodes[1].rate_limit", "want an object, got string"}},
		{`"throttle":{"key":"k","limit":10001,"per":"1h"}`, Problem{"nodes[1].throttle.limit", "10001 is out of range: want 1 to 10000"}},
		{`"throttle":{"key":"k","limit":3,"per":"1h","on_limit":"drop"}`, Problem{"nodes[1].throttle.on_limit", `unknown value "drop": want "skip" (the node does not run and yields {"sent": false, "reason": "THROTTLED"}, the default) or "wait" (it waits until the window has room)`}},
	} {
		_, err := Load([]byte(flowDef(tc.fields)), fakeTypes{})
		expectProblems(t, problemsOf(t, err), []Problem{tc.want})
	}
}

// A node that does not run as a node does cannot be limited.
func TestFlowControlNotOnTrigger(t *testing.T) {
	def := `{"id":"w","nodes":[{"id":"start","type":"trigger","trigger":true,"throttle":{"key":"k","limit":1,"per":"1s"}},
		{"id":"send","type":"http"}],"edges":[{"id":"e1","src":"start","dst":"send"}]}`
	_, err := Load([]byte(def), fakeTypes{})
	expectProblems(t, problemsOf(t, err), []Problem{{"nodes[0].throttle", "a trigger node cannot be rate-limited or throttled; put the limit on the node after it"}})
}
