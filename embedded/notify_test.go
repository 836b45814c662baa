package embedded_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/rune-org/rune/embedded"
	"github.com/rune-org/rune/internal/catcher"
	"github.com/rune-org/rune/secrets"
)

// An email node inside a split sends one mail per item, each with its own
// Message-ID (the idempotency key includes the branch), and the aggregator
// collects the send results.
func TestEmailPerSplitItem(t *testing.T) {
	t.Parallel()
	mail, err := catcher.StartSMTP(catcher.SMTPConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer mail.Close()
	rt, err := embedded.New(embedded.Options{Secrets: secrets.Static{
		"mail": {"type": "smtp", "host": "127.0.0.1", "port": strconv.Itoa(mail.Port()), "tls": "none", "from": "news@rune.test"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	def := `{"id": "newsletter", "nodes": [
		{"id": "start", "type": "trigger", "trigger": true},
		{"id": "each", "type": "split", "parameters": {"input_array": "{{ $trigger.readers }}"}},
		{"id": "issue", "type": "email", "credentials": {"ref": "mail"},
		 "parameters": {"to": "{{ $item.email }}", "subject": "Issue {{ $trigger.issue }} for {{ $item.name }}", "text": "#{{ $item_index }}"}},
		{"id": "sent", "type": "aggregator"}
	], "edges": [{"id": "e1", "src": "start", "dst": "each"}, {"id": "e2", "src": "each", "dst": "issue"}, {"id": "e3", "src": "issue", "dst": "sent"}]}`
	readers := []any{}
	for i := range 3 {
		readers = append(readers, map[string]any{"name": fmt.Sprintf("r%d", i), "email": fmt.Sprintf("r%d@example.com", i)})
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	comp, err := rt.Run(ctx, []byte(def), map[string]any{"issue": 7, "readers": readers}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if comp.Status != "completed" {
		t.Fatalf("completion %+v", comp)
	}
	mails := mail.Mails()
	ids := map[string]bool{}
	for _, m := range mails {
		ids[m.Header.Get("Message-Id")] = true
	}
	if len(mails) != 3 || len(ids) != 3 {
		t.Fatalf("%d mails with %d Message-IDs, want 3 and 3", len(mails), len(ids))
	}
	agg, _ := comp.FinalContext["$sent"].(map[string]any)
	items, _ := agg["items"].([]any)
	for i, it := range items {
		out, _ := it.(map[string]any)
		if !ids[fmt.Sprint(out["message_id"])] || fmt.Sprint(out["accepted"]) != fmt.Sprintf("[r%d@example.com]", i) {
			t.Errorf("items[%d] = %v, want the send result for r%d", i, it, i)
		}
	}
}
