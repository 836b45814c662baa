package store

import (
	"context"
	"encoding/json"
	"fmt"
	"net/mail"
	"regexp"
	"sort"
	"strings"
	"time"
)

// Subscriber is a recipient of notifications (issue 36): the email and sms
// nodes find its address and Liquid variables by its id.
type Subscriber struct {
	ID       string         `json:"-"`
	Email    string         `json:"email,omitempty"`
	Phone    string         `json:"phone,omitempty"`
	Timezone string         `json:"timezone,omitempty"`
	Locale   string         `json:"locale,omitempty"`
	Data     map[string]any `json:"data,omitempty"`
	// Preferences are filled by GetSubscriber; PutSubscribers ignores them.
	Preferences Preferences `json:"-"`
	CreatedAt   time.Time   `json:"-"`
	UpdatedAt   time.Time   `json:"-"`
}

// Preferences are a subscriber's opt-outs: a channel ("email", "sms"), a
// category or a workflow id mapped to false is not sent to. Absent means
// allowed.
type Preferences struct {
	Channels   map[string]bool `json:"channels,omitempty"`
	Categories map[string]bool `json:"categories,omitempty"`
	Workflows  map[string]bool `json:"workflows,omitempty"`
	// QuietHours defer the non-critical sends that fall in them until
	// they end (nodes.QuietHours).
	QuietHours *QuietHours `json:"quiet_hours,omitempty"`
	UpdatedAt  time.Time   `json:"-"`
}

// QuietHours is a daily window, "HH:MM" to "HH:MM" in the subscriber's
// timezone (it may span midnight).
type QuietHours struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// Allows reports whether a send on channel, of category (may be empty), by
// workflow (may be empty) is allowed.
func (p Preferences) Allows(channel, category, workflow string) bool {
	if v, ok := p.Channels[channel]; ok && !v {
		return false
	}
	if v, ok := p.Categories[category]; category != "" && ok && !v {
		return false
	}
	if v, ok := p.Workflows[workflow]; workflow != "" && ok && !v {
		return false
	}
	return true
}

// Limits of subscribers and their preferences.
const (
	MaxSubscriberID   = 256
	MaxSubscriberData = 16 << 10 // bytes of data as JSON
	MaxPreferenceKeys = 256      // entries of each preference map
	maxPreferenceKey  = 128
	maxAddress        = 320
)

var (
	phoneRe  = regexp.MustCompile(`^\+?[0-9][0-9 ().-]{2,30}$`)
	localeRe = regexp.MustCompile(`^[A-Za-z]{2,8}([_-][A-Za-z0-9]{1,8})*$`)
	hhmmRe   = regexp.MustCompile(`^([01][0-9]|2[0-3]):[0-5][0-9]$`)
	idRe     = regexp.MustCompile(`^[^\x00-\x1f/\x7f]+$`)
)

// CheckSubscriberID reports an id that cannot name a subscriber.
func CheckSubscriberID(id string) error {
	switch {
	case id == "":
		return invalidField("id", "required")
	case len(id) > MaxSubscriberID:
		return invalidField("id", "longer than %d bytes", MaxSubscriberID)
	case !idRe.MatchString(id):
		return invalidField("id", "must not hold a slash or a control character")
	}
	return nil
}

// CheckSubscriber reports the first problem with s, naming its field
// (ErrInvalid): email and phone formats, a timezone time.LoadLocation
// knows, sizes.
func CheckSubscriber(s *Subscriber) error {
	if err := CheckSubscriberID(s.ID); err != nil {
		return err
	}
	if s.Email != "" {
		a, err := mail.ParseAddress(s.Email)
		if err != nil || len(s.Email) > maxAddress || a.Name != "" || a.Address != s.Email {
			return invalidField("email", "%q is not an email address", s.Email)
		}
	}
	if s.Phone != "" && !phoneRe.MatchString(s.Phone) {
		return invalidField("phone", "%q is not a phone number (digits, an optional leading +)", s.Phone)
	}
	if s.Timezone != "" {
		if _, err := time.LoadLocation(s.Timezone); err != nil || s.Timezone == "Local" {
			return invalidField("timezone", "%q is not an IANA time zone (e.g. Europe/Paris)", s.Timezone)
		}
	}
	if s.Locale != "" && (len(s.Locale) > 35 || !localeRe.MatchString(s.Locale)) {
		return invalidField("locale", "%q is not a locale (e.g. en, fr-CA)", s.Locale)
	}
	if s.Data != nil {
		b, err := json.Marshal(s.Data)
		if err != nil {
			return invalidField("data", "not JSON: %v", err)
		}
		if len(b) > MaxSubscriberData {
			return invalidField("data", "%d bytes as JSON, over the limit of %d", len(b), MaxSubscriberData)
		}
	}
	return nil
}

// ReplacePreferences is the change PutPreferences makes: p instead of the
// subscriber's preferences, once p passes CheckPreferences.
func ReplacePreferences(p *Preferences) (func(*Preferences), error) {
	if err := CheckPreferences(p); err != nil {
		return nil, err
	}
	return func(cur *Preferences) { *cur = *p }, nil
}

// OptOutOf is the change OptOutCategory makes: category off, the rest kept.
func OptOutOf(category string) (func(*Preferences), error) {
	if category == "" {
		return nil, fmt.Errorf("%w: category: required", ErrInvalid)
	}
	return func(cur *Preferences) {
		if cur.Categories == nil {
			cur.Categories = map[string]bool{}
		}
		cur.Categories[category] = false
	}, nil
}

// CheckPreferences reports the first problem with p, naming its field.
func CheckPreferences(p *Preferences) error {
	for _, m := range []struct {
		name string
		m    map[string]bool
	}{{"channels", p.Channels}, {"categories", p.Categories}, {"workflows", p.Workflows}} {
		if len(m.m) > MaxPreferenceKeys {
			return invalidField(m.name, "%d entries, over the limit of %d", len(m.m), MaxPreferenceKeys)
		}
		keys := make([]string, 0, len(m.m))
		for k := range m.m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if k == "" || len(k) > maxPreferenceKey {
				return invalidField(m.name, "a key must be 1 to %d bytes", maxPreferenceKey)
			}
			if m.name == "channels" && k != "email" && k != "sms" {
				return invalidField(m.name+"."+k, "unknown channel (want email or sms)")
			}
		}
	}
	if q := p.QuietHours; q != nil {
		if !hhmmRe.MatchString(q.From) {
			return invalidField("quiet_hours.from", "%q is not a time of day HH:MM (00:00 to 23:59)", q.From)
		}
		if !hhmmRe.MatchString(q.To) {
			return invalidField("quiet_hours.to", "%q is not a time of day HH:MM (00:00 to 23:59)", q.To)
		}
		if q.From == q.To {
			return invalidField("quiet_hours", "from and to are the same time")
		}
	}
	return nil
}

func invalidField(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalid, field, fmt.Sprintf(format, args...))
}

// InvalidField returns the field an ErrInvalid of CheckSubscriber or
// CheckPreferences names, and its message without the field.
func InvalidField(err error) (field, msg string) {
	s := strings.TrimPrefix(err.Error(), ErrInvalid.Error()+": ")
	field, msg, _ = strings.Cut(s, ": ")
	return field, msg
}

// SubscriberStore holds subscribers and their preferences (issue 36).
type SubscriberStore interface {
	// PutSubscribers creates or replaces each subscriber (its fields, not
	// its preferences) in one transaction, after checking every one
	// (CheckSubscriber). created[i] says whether subs[i] was new.
	PutSubscribers(ctx context.Context, subs []*Subscriber, at time.Time) (created []bool, err error)
	// GetSubscriber returns subscriber id with its preferences.
	GetSubscriber(ctx context.Context, id string) (*Subscriber, error)
	// DeleteSubscriber removes subscriber id and its preferences.
	DeleteSubscriber(ctx context.Context, id string) error
	// PutPreferences replaces subscriber id's preferences (ErrNotFound
	// for an unknown subscriber).
	PutPreferences(ctx context.Context, id string, p *Preferences, at time.Time) error
	// OptOutCategory sets category to false in subscriber id's
	// preferences, keeping the rest (one-click unsubscribe).
	OptOutCategory(ctx context.Context, id, category string, at time.Time) error
}
