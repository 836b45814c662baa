package storetest

import (
	"context"
	"errors"
	"testing"

	"github.com/rune-org/rune/store"
)

// testSubscribers: subscribers are created and replaced (created says
// which), read back with their preferences, checked before anything is
// written (an invalid one in a batch writes none), deleted with their
// preferences; an opt-out keeps the other preferences.
func testSubscribers(ctx context.Context, t *testing.T, h *harness) {
	s := h.s
	if _, err := s.GetSubscriber(ctx, "u1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetSubscriber of none = %v, want ErrNotFound", err)
	}
	subs := []*store.Subscriber{
		{ID: "u1", Email: "ann@example.com", Phone: "+15550001", Timezone: "Europe/Paris", Locale: "fr-FR", Data: map[string]any{"first_name": "Ann", "n": 2.0}},
		{ID: "u2", Email: "bob@example.com"},
	}
	created, err := s.PutSubscribers(ctx, subs, at(1))
	if err != nil || len(created) != 2 || !created[0] || !created[1] {
		t.Fatalf("PutSubscribers = %v, %v", created, err)
	}
	subs[1].Email = "robert@example.com"
	created, err = s.PutSubscribers(ctx, []*store.Subscriber{subs[1], {ID: "u3"}}, at(2))
	if err != nil || created[0] || !created[1] {
		t.Fatalf("PutSubscribers again = %v, %v (want replaced, created)", created, err)
	}
	// One invalid subscriber: none is written.
	_, err = s.PutSubscribers(ctx, []*store.Subscriber{{ID: "u4"}, {ID: "u5", Timezone: "Mars/Olympus"}}, at(3))
	if !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("PutSubscribers with a bad timezone = %v, want ErrInvalid", err)
	}
	if f, _ := store.InvalidField(err); f != "timezone" {
		t.Fatalf("invalid field = %q (%v), want timezone", f, err)
	}
	if _, err := s.GetSubscriber(ctx, "u4"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("u4 written by a refused batch: %v", err)
	}
	got, err := s.GetSubscriber(ctx, "u1")
	if err != nil || got.Email != "ann@example.com" || got.Phone != "+15550001" || got.Timezone != "Europe/Paris" || got.Locale != "fr-FR" ||
		got.Data["first_name"] != "Ann" || got.Data["n"] != 2.0 || !got.CreatedAt.Equal(at(1)) {
		t.Fatalf("GetSubscriber = %+v, %v", got, err)
	}
	if got.Preferences.Channels != nil || !got.Preferences.Allows("email", "marketing", "wf") {
		t.Fatalf("preferences of a new subscriber = %+v", got.Preferences)
	}
	if got, _ := s.GetSubscriber(ctx, "u2"); got.Email != "robert@example.com" || !got.CreatedAt.Equal(at(1)) || !got.UpdatedAt.Equal(at(2)) {
		t.Fatalf("replaced subscriber = %+v", got)
	}

	if err := s.PutPreferences(ctx, "nobody", &store.Preferences{}, at(3)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("PutPreferences of an unknown subscriber = %v", err)
	}
	if err := s.PutPreferences(ctx, "u1", &store.Preferences{QuietHours: &store.QuietHours{From: "25:00", To: "08:00"}}, at(3)); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("PutPreferences with quiet hours 25:00 = %v", err)
	}
	p := &store.Preferences{Channels: map[string]bool{"sms": false}, Categories: map[string]bool{"news": true},
		Workflows: map[string]bool{"wf_a": false}, QuietHours: &store.QuietHours{From: "22:00", To: "08:00"}}
	if err := s.PutPreferences(ctx, "u1", p, at(3)); err != nil {
		t.Fatal(err)
	}
	if err := s.OptOutCategory(ctx, "u1", "marketing", at(4)); err != nil {
		t.Fatal(err)
	}
	got, _ = s.GetSubscriber(ctx, "u1")
	gp := got.Preferences
	if gp.Channels["sms"] || !gp.Categories["news"] || gp.Categories["marketing"] || len(gp.Categories) != 2 || gp.QuietHours == nil ||
		gp.QuietHours.From != "22:00" || !gp.UpdatedAt.Equal(at(4)) {
		t.Fatalf("preferences = %+v", gp)
	}
	for _, c := range []struct {
		channel, category, workflow string
		want                        bool
	}{{"email", "", "", true}, {"sms", "", "", false}, {"email", "marketing", "", false}, {"email", "news", "wf_b", true}, {"email", "", "wf_a", false}} {
		if gp.Allows(c.channel, c.category, c.workflow) != c.want {
			t.Errorf("Allows(%q, %q, %q) = %v", c.channel, c.category, c.workflow, !c.want)
		}
	}
	if err := s.OptOutCategory(ctx, "u2", "marketing", at(4)); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.GetSubscriber(ctx, "u2"); got.Preferences.Categories["marketing"] || len(got.Preferences.Categories) != 1 {
		t.Fatalf("opt-out without preferences = %+v", got.Preferences)
	}
	if err := s.DeleteSubscriber(ctx, "u1"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteSubscriber(ctx, "u1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second delete = %v", err)
	}
	// A subscriber made again starts with no preferences.
	if _, err := s.PutSubscribers(ctx, []*store.Subscriber{{ID: "u1"}}, at(5)); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.GetSubscriber(ctx, "u1"); got.Preferences.Channels != nil || got.Preferences.QuietHours != nil {
		t.Fatalf("preferences survived the delete: %+v", got.Preferences)
	}
}
