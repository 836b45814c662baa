// Package subscribers gives the email and sms nodes the subscribers of the
// server's store (nodes.Subscribers), and makes and reads the signed tokens
// of one-click unsubscribe links (issue 36, docs/notifications.md).
//
// Workers of a server (the embedded server, rune worker --postgres) read
// the same store the API writes, as secrets.Store does for credentials.
package subscribers

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"github.com/rune-org/rune/nodes"
	"github.com/rune-org/rune/secrets"
	"github.com/rune-org/rune/store"
)

// Getter reads one subscriber with its preferences (store.Store does).
type Getter interface {
	GetSubscriber(ctx context.Context, id string) (*store.Subscriber, error)
}

// Source implements nodes.Subscribers over a store. Keys sign the
// unsubscribe links and PublicURL is where recipients reach the server
// (rune server --public-url); without either, mails carry no one-click
// link.
type Source struct {
	Store     Getter
	Keys      *secrets.Keyring
	PublicURL string
}

// Subscriber implements nodes.Subscribers.
func (s Source) Subscriber(ctx context.Context, id string) (*nodes.Subscriber, error) {
	x, err := s.Store.GetSubscriber(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("subscriber %q: %w", id, nodes.ErrNoSubscriber)
	}
	if err != nil {
		return nil, err
	}
	prefs := x.Preferences
	sub := &nodes.Subscriber{ID: x.ID, Email: x.Email, Phone: x.Phone, Timezone: x.Timezone, Locale: x.Locale, Data: x.Data,
		Allows: prefs.Allows}
	if q := prefs.QuietHours; q != nil {
		sub.QuietHours = &nodes.QuietHours{From: q.From, To: q.To}
	}
	return sub, nil
}

// UnsubscribeURL implements nodes.Subscribers: PublicURL's
// /v1/unsubscribe/<token>.
func (s Source) UnsubscribeURL(id, category string) string {
	if s.Keys == nil || s.PublicURL == "" {
		return ""
	}
	return strings.TrimRight(s.PublicURL, "/") + "/v1/unsubscribe/" + Token(s.Keys, id, category)
}

// purpose separates these signatures from any other the keyring makes.
const purpose = "rune-unsubscribe-v1"

var b64 = base64.RawURLEncoding

// Token is the signed token of subscriber id's opt-out of category:
// "<key id>.<base64url of id NUL category>.<base64url HMAC-SHA256>". It
// does not expire: a link in an old mail still unsubscribes, as RFC 8058
// readers expect. Rotating the secret key away (removing the old key)
// voids the old links.
func Token(keys *secrets.Keyring, id, category string) string {
	msg := []byte(id + "\x00" + category)
	kid, mac := keys.Sign(purpose, msg)
	return kid + "." + b64.EncodeToString(msg) + "." + b64.EncodeToString(mac)
}

// ErrBadToken is a token that is malformed or whose signature does not
// match (tampered, or signed by a key no longer configured).
var ErrBadToken = errors.New("not a valid unsubscribe token")

// MaxToken bounds a token's length (ids are at most 256 bytes).
const MaxToken = 512

// ParseToken verifies token and returns the subscriber and category it
// names.
func ParseToken(keys *secrets.Keyring, token string) (id, category string, err error) {
	if keys == nil || len(token) > MaxToken {
		return "", "", ErrBadToken
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return "", "", ErrBadToken
	}
	msg, err1 := b64.DecodeString(parts[1])
	mac, err2 := b64.DecodeString(parts[2])
	if err1 != nil || err2 != nil || !keys.Verify(purpose, parts[0], msg, mac) {
		return "", "", ErrBadToken
	}
	idb, cat, ok := bytes.Cut(msg, []byte{0})
	if !ok || len(idb) == 0 || len(cat) == 0 {
		return "", "", ErrBadToken
	}
	return string(idb), string(cat), nil
}

var _ nodes.Subscribers = Source{}
