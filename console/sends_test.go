package console_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/rune-org/rune/internal/catcher"
)

// The node panel of an sms node shows the delivery status of the text it
// sent (issue 36): the catcher's provider calls back "sent" and
// "delivered", and the panel's Delivery table lists both.
func TestPanelShowsDeliveryStatus(t *testing.T) {
	t.Parallel()
	tg := embeddedTarget(t)
	texts, err := catcher.StartSMS(catcher.SMSConfig{Accounts: map[string]string{"ACc": "tok-c"}, Callbacks: []string{"sent", "delivered"}})
	if err != nil {
		t.Fatal(err)
	}
	defer texts.Close()
	value, _ := json.Marshal(map[string]string{"type": "twilio", "base_url": texts.URL(), "account_sid": "ACc", "auth_token": "tok-c",
		"status_callback": tg.url + "/v1/providers/texts/status"})
	tg.mustAPI(t, 201, "POST", "/v1/credentials", `{"name":"texts","type":"twilio","value":`+string(value)+`}`)
	tg.mustAPI(t, 201, "POST", "/v1/workflows", `{"id":"remind","nodes":[{"id":"start","type":"trigger","trigger":true},
	 {"id":"text","type":"sms","credentials":{"ref":"texts"},"parameters":{"to":"+14155550100","body":"hi"}}],
	 "edges":[{"id":"e1","src":"start","dst":"text"}]}`)
	x := tg.mustAPI(t, 201, "POST", "/v1/workflows/remind/executions", `{}`)
	id := between(x, `"id":"`, `"`)
	waitFor(t, "the text to be delivered", func() bool {
		_, b := tg.api(t, "GET", "/v1/executions/"+id+"/sends", "")
		return strings.Contains(b, `"status":"delivered"`)
	})
	s := tg.login(t)
	_, panel := s.get("/ui/executions/" + id + "/nodes/text")
	table := between(panel, `<table class="runs" id="sends">`, `</table>`)
	msgs := texts.Messages()
	if len(msgs) != 1 || !strings.Contains(table, msgs[0].ID) || !strings.Contains(table, `send-delivered`) ||
		!strings.Contains(table, "queued") || !strings.Contains(table, "sent") {
		t.Fatalf("the panel's delivery table %q lacks the delivered text %v", table, msgs)
	}
}
