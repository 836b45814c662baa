package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"

	"github.com/rune-org/rune/apiv1"
)

// Subscribers and their preferences (issue 36, docs/notifications.md).
type (
	Subscriber          = apiv1.Subscriber
	SubscriberInput     = apiv1.SubscriberInput
	SubscriberImportRow = apiv1.SubscriberImportRow
	SubscriberImport    = apiv1.SubscriberImport
	Preferences         = apiv1.Preferences
)

// PutSubscriber creates or replaces subscriber id; created says which.
func (c *Client) PutSubscriber(ctx context.Context, id string, in SubscriberInput) (s *Subscriber, created bool, err error) {
	body, err := json.Marshal(in)
	if err != nil {
		return nil, false, err
	}
	var out Subscriber
	_, status, err := c.Do(ctx, "PUT", "/v1/subscribers/"+url.PathEscape(id), body, nil, &out)
	return &out, status == http.StatusCreated, err
}

// GetSubscriber returns subscriber id with its preferences.
func (c *Client) GetSubscriber(ctx context.Context, id string) (*Subscriber, error) {
	var out Subscriber
	_, _, err := c.Do(ctx, "GET", "/v1/subscribers/"+url.PathEscape(id), nil, nil, &out)
	return &out, err
}

// DeleteSubscriber deletes subscriber id and its preferences.
func (c *Client) DeleteSubscriber(ctx context.Context, id string) error {
	_, _, err := c.Do(ctx, "DELETE", "/v1/subscribers/"+url.PathEscape(id), nil, nil, nil)
	return err
}

// ImportSubscribers creates or replaces many subscribers: ndjson holds one
// SubscriberImportRow a line (up to 10,000 rows). Refused rows are in the
// answer's Errors, by index; the others are written.
func (c *Client) ImportSubscribers(ctx context.Context, ndjson []byte) (*SubscriberImport, error) {
	var out SubscriberImport
	_, _, err := c.Do(ctx, "POST", "/v1/subscribers/import", ndjson, http.Header{"Content-Type": {"application/x-ndjson"}}, &out)
	return &out, err
}

// GetPreferences returns subscriber id's preferences.
func (c *Client) GetPreferences(ctx context.Context, id string) (*Preferences, error) {
	var out Preferences
	_, _, err := c.Do(ctx, "GET", "/v1/subscribers/"+url.PathEscape(id)+"/preferences", nil, nil, &out)
	return &out, err
}

// PutPreferences replaces subscriber id's preferences.
func (c *Client) PutPreferences(ctx context.Context, id string, p Preferences) (*Preferences, error) {
	body, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	var out Preferences
	_, _, err = c.Do(ctx, "PUT", "/v1/subscribers/"+url.PathEscape(id)+"/preferences", body, nil, &out)
	return &out, err
}
