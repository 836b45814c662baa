package apiv1

import "time"

// The shapes of subscribers and their preferences (issue 36,
// docs/notifications.md "Subscribers and preferences").

// SubscriberInput is the body of PUT /v1/subscribers/{id}.
type SubscriberInput struct {
	Email    string         `json:"email,omitempty"`
	Phone    string         `json:"phone,omitempty"`
	Timezone string         `json:"timezone,omitempty"`
	Locale   string         `json:"locale,omitempty"`
	Data     map[string]any `json:"data,omitempty"`
}

// Subscriber is a subscriber as the API shows it.
type Subscriber struct {
	ID          string         `json:"id"`
	Email       string         `json:"email,omitempty"`
	Phone       string         `json:"phone,omitempty"`
	Timezone    string         `json:"timezone,omitempty"`
	Locale      string         `json:"locale,omitempty"`
	Data        map[string]any `json:"data,omitempty"`
	Preferences Preferences    `json:"preferences"`
	CreatedAt   time.Time      `json:"created_at"`
	UpdatedAt   time.Time      `json:"updated_at"`
}

// Preferences are a subscriber's opt-outs: false turns a channel
// ("email", "sms"), a category or a workflow id off. QuietHours are stored
// for a later enforcement.
type Preferences struct {
	Channels   map[string]bool `json:"channels"`
	Categories map[string]bool `json:"categories"`
	Workflows  map[string]bool `json:"workflows"`
	QuietHours *QuietHours     `json:"quiet_hours,omitempty"`
}

// QuietHours is a daily window, "HH:MM" to "HH:MM", in the subscriber's
// timezone.
type QuietHours struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// SubscriberImportRow is one row of POST /v1/subscribers/import.
type SubscriberImportRow struct {
	ID string `json:"id"`
	SubscriberInput
}

// SubscriberImport is the answer of POST /v1/subscribers/import: how many
// rows created and replaced a subscriber, and each refused row.
type SubscriberImport struct {
	Created  int                `json:"created"`
	Replaced int                `json:"replaced"`
	Errors   []ImportRowProblem `json:"errors"`
}

// ImportRowProblem is a refused row: its index (from 0), its id when it has
// one, the field at fault and why.
type ImportRowProblem struct {
	Index   int    `json:"index"`
	ID      string `json:"id,omitempty"`
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}
