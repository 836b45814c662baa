package api_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/rune-org/rune/client/api"
)

// The subscriber calls against a real server: put (created, then
// replaced), an NDJSON import with a refused row, preferences, delete.
func TestClientSubscribers(t *testing.T) {
	ctx := context.Background()
	c := serve(t)
	s, created, err := c.PutSubscriber(ctx, "u1", api.SubscriberInput{Email: "ann@example.com", Data: map[string]any{"first_name": "Ann"}})
	if err != nil || !created || s.ID != "u1" || s.Data["first_name"] != "Ann" {
		t.Fatalf("PutSubscriber = %+v, %v, %v", s, created, err)
	}
	if _, created, err := c.PutSubscriber(ctx, "u1", api.SubscriberInput{Email: "ann@example.com"}); err != nil || created {
		t.Fatalf("PutSubscriber again: created %v, %v", created, err)
	}
	imp, err := c.ImportSubscribers(ctx, []byte("{\"id\": \"u2\", \"phone\": \"+14155550100\"}\n{\"id\": \"u3\", \"timezone\": \"Nowhere/City\"}\n"))
	if err != nil || imp.Created != 1 || len(imp.Errors) != 1 || imp.Errors[0].Index != 1 || imp.Errors[0].Field != "timezone" {
		t.Fatalf("ImportSubscribers = %+v, %v", imp, err)
	}
	if _, err := c.PutPreferences(ctx, "u2", api.Preferences{Categories: map[string]bool{"promo": false}}); err != nil {
		t.Fatal(err)
	}
	p, err := c.GetPreferences(ctx, "u2")
	if err != nil || p.Categories["promo"] || len(p.Categories) != 1 {
		t.Fatalf("GetPreferences = %+v, %v", p, err)
	}
	if err := c.DeleteSubscriber(ctx, "u2"); err != nil {
		t.Fatal(err)
	}
	var ae *api.Error
	if _, err := c.GetSubscriber(ctx, "u2"); !errors.As(err, &ae) || ae.Status != http.StatusNotFound {
		t.Fatalf("GetSubscriber of a deleted one: %v", err)
	}
}
