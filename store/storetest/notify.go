package storetest

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/rune-org/rune/store"
)

// testSends: sends recorded once; callbacks before and after the send
// join its history in arrival order; a final status is not undone by a
// late "sent"; a known send's callback writes a send.status event.
func testSends(ctx context.Context, t *testing.T, h *harness) {
	h.started(ctx, t, "xs")
	// A callback that comes before its send is recorded: no event yet.
	if x, err := h.s.AddSendStatus(ctx, "texts", "SM1", store.SendStatus{Status: "sent", ProviderStatus: "sent", At: at(2)}); err != nil || x != nil {
		t.Fatalf("AddSendStatus before the send = %+v, %v; want nil", x, err)
	}
	sends := []store.Send{
		{Credential: "texts", MessageID: "SM1", ExecutionID: "xs", WorkflowID: "wf", NodeID: "remind", Channel: "sms", Status: "queued", SentAt: at(1)},
		{Credential: "mail", MessageID: "<k@rune.test>", ExecutionID: "xs", NodeID: "welcome", Branch: "s:1", Channel: "email", Status: "sent", SentAt: at(1)},
	}
	if err := h.s.RecordSends(ctx, sends); err != nil {
		t.Fatal(err)
	}
	again := sends[0]
	again.NodeID = "other"
	if err := h.s.RecordSends(ctx, []store.Send{again}); err != nil {
		t.Fatal(err)
	}
	x, err := h.s.AddSendStatus(ctx, "texts", "SM1", store.SendStatus{Status: "delivered", ProviderStatus: "delivered", At: at(3)})
	if err != nil || x == nil || x.ExecutionID != "xs" || x.NodeID != "remind" || x.Status != "delivered" {
		t.Fatalf("AddSendStatus = %+v, %v", x, err)
	}
	// A late "sent" joins the history, the status stays delivered.
	if _, err := h.s.AddSendStatus(ctx, "texts", "SM1", store.SendStatus{Status: "sent", At: at(4)}); err != nil {
		t.Fatal(err)
	}
	got, err := h.s.ListSends(ctx, "xs")
	if err != nil || len(got) != 2 {
		t.Fatalf("ListSends = %d, %v", len(got), err)
	}
	var sms *store.Send
	for _, s := range got {
		if s.MessageID == "SM1" {
			sms = s
		}
	}
	var statuses []string
	for _, st := range sms.History {
		statuses = append(statuses, st.Status)
	}
	if sms.Status != "delivered" || sms.NodeID != "remind" || len(statuses) != 4 || statuses[0] != "queued" || statuses[1] != "sent" ||
		statuses[2] != "delivered" || statuses[3] != "sent" || !sms.History[2].At.Equal(at(3)) || sms.History[2].ProviderStatus != "delivered" {
		t.Fatalf("sms send %+v, history %v", sms, statuses)
	}
	evs, err := h.s.Events(ctx, store.EventFilter{ExecutionID: "xs"})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []store.SendStatusEvent
	for _, e := range evs {
		if e.Kind == "send.status" {
			var b store.SendStatusEvent
			if err := json.Unmarshal(e.Body, &b); err != nil {
				t.Fatal(err)
			}
			kinds = append(kinds, b)
		}
	}
	// The early "sent" gets its event when the send is recorded.
	if len(kinds) != 3 || kinds[0].Status != "sent" || kinds[1].Status != "delivered" || kinds[1].NodeID != "remind" || kinds[1].MessageID != "SM1" ||
		kinds[1].WorkflowID != "wf" || kinds[2].Status != "sent" {
		t.Fatalf("send.status events %+v", kinds)
	}
	if none, err := h.s.ListSends(ctx, "nobody"); err != nil || len(none) != 0 {
		t.Fatalf("ListSends(nobody) = %v, %v", none, err)
	}
}
