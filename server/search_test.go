package server_test

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rune-org/rune/server"
)

// testSearch: GET /v1/executions by input values (JSON scalars; a bare word
// is a string) and by trigger; bad conditions are 400 naming themselves; a
// cron's next fire times; a credential's allowed hosts in the list, never
// its value.
func testSearch(t *testing.T, a *api, id string) {
	a.pushWorkflow(wfDef(id, `{"id":"s","type":"set","parameters":{"values":{"v":1}}}`, `{"id":"e1","src":"start","dst":"s"}`))
	x1 := a.trigger(id, `{"user_id":42,"name":"alice","address":{"country":"NO"}}`)
	x2 := a.trigger(id, `{"user_id":"42","name":"bob"}`)
	x3 := a.trigger(id, `{"user_id":7,"name":"alice","address":{"country":"SE"}}`)
	a.waitStatus(x1.ID, "completed")
	var rerun execution
	a.want(http.StatusCreated, "POST", "/v1/executions/"+x1.ID+"/rerun", nil, &rerun)
	list := func(query string) []string {
		t.Helper()
		var page struct {
			Items []execution `json:"items"`
		}
		a.want(http.StatusOK, "GET", "/v1/executions?workflow_id="+id+"&"+query, nil, &page)
		var got []string
		for _, x := range page.Items {
			got = append(got, x.ID)
		}
		return got
	}
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"input.user_id=42", []string{rerun.ID, x1.ID}},
		{"input.user_id=" + url.QueryEscape(`"42"`), []string{x2.ID}},
		{"input.name=alice", []string{rerun.ID, x3.ID, x1.ID}},
		{"input.name=alice&input.address.country=SE", []string{x3.ID}},
		{"input.name=carol", nil},
		{"trigger=rerun", []string{rerun.ID}},
		{"trigger=rerun:" + x1.ID + "&input.user_id=42", []string{rerun.ID}},
		{"trigger=api&input.user_id=42", []string{x1.ID}},
		{"trigger=hook", nil},
	} {
		if got := list(tc.query); !slices.Equal(got, tc.want) {
			t.Errorf("?%s: %v, want %v", tc.query, got, tc.want)
		}
	}
	for query, mention := range map[string]string{
		"input.=1":                            "input.",
		"input.a=1&input.a.b=2":               "input.a.b",
		"inputs.a=1":                          "inputs.a",
		"input.a..b=1":                        "input.a..b",
		"trigger=" + strings.Repeat("x", 300): "trigger",
	} {
		e := a.wantError(http.StatusBadRequest, server.CodeInvalidRequest, "GET", "/v1/executions?"+query, nil)
		if !strings.Contains(e.Error.Message, mention) {
			t.Errorf("?%s: message %q does not name %q", query, e.Error.Message, mention)
		}
	}

	var preview struct {
		Timezone string      `json:"timezone"`
		Next     []time.Time `json:"next_fire_times"`
	}
	a.want(http.StatusOK, "GET", "/v1/schedules/preview?cron="+url.QueryEscape("*/5 * * * *")+"&timezone=Europe/Oslo", nil, &preview)
	if len(preview.Next) != 5 || preview.Timezone != "Europe/Oslo" || !preview.Next[0].After(time.Now().Add(-time.Minute)) {
		t.Fatalf("preview %+v", preview)
	}
	for i := 1; i < 5; i++ {
		if d := preview.Next[i].Sub(preview.Next[i-1]); d != 5*time.Minute || preview.Next[i].Minute()%5 != 0 {
			t.Fatalf("preview %v: not every 5 minutes", preview.Next)
		}
	}
	e := a.wantError(http.StatusBadRequest, server.CodeInvalidRequest, "GET", "/v1/schedules/preview?cron=nope", nil)
	if !strings.Contains(e.Error.Message, "cron") {
		t.Errorf("message %q does not name the cron", e.Error.Message)
	}

	const secret = "tok-never-shown-38"
	name := "hosts_" + id
	a.want(http.StatusCreated, "POST", "/v1/credentials", []byte(`{"name":"`+name+`","type":"bearer","value":{"token":"`+secret+`","allowed_hosts":"api.example.com, *.example.org"}}`), nil)
	var creds struct {
		Items []map[string]any `json:"items"`
	}
	r := a.want(http.StatusOK, "GET", "/v1/credentials", nil, &creds)
	found := false
	for _, c := range creds.Items {
		if c["name"] == name {
			found = c["allowed_hosts"] == "api.example.com, *.example.org"
		}
	}
	if !found || strings.Contains(string(r.body), secret) {
		t.Fatalf("credentials list %s: want allowed_hosts and never the value", r.body)
	}
}
