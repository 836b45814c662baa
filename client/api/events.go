package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"

	"github.com/rune-org/rune/apiv1"
)

// Events and approvals (issue 34).
type (
	// EventSent is what POST /v1/events answers.
	EventSent = apiv1.EventSent
	// Approval is a waiting approval.
	Approval = apiv1.Approval
)

// SendEvent sends event name with key and data (JSON, nil for none) to
// the wait_for_event nodes waiting for it; idempotencyKey ("": none) makes
// a retry match no wait twice.
func (c *Client) SendEvent(ctx context.Context, name, key string, data json.RawMessage, idempotencyKey string) (*EventSent, error) {
	body, err := json.Marshal(apiv1.EventSend{Event: name, Key: key, Data: data})
	if err != nil {
		return nil, err
	}
	var h http.Header
	if idempotencyKey != "" {
		h = http.Header{"Idempotency-Key": {idempotencyKey}}
	}
	var out EventSent
	_, _, err = c.Do(ctx, "POST", "/v1/events", body, h, &out)
	return &out, err
}

// Approvals lists the waiting approvals.
func (c *Client) Approvals(ctx context.Context) ([]Approval, error) {
	var page apiv1.Page[Approval]
	_, _, err := c.Do(ctx, "GET", "/v1/approvals", nil, nil, &page)
	return page.Items, err
}

// DecideApproval approves or rejects node's approval in execution id.
func (c *Client) DecideApproval(ctx context.Context, id, node string, approved bool, comment string) (*EventSent, error) {
	body, err := json.Marshal(apiv1.ApprovalDecision{Approved: approved, Comment: comment})
	if err != nil {
		return nil, err
	}
	var out EventSent
	_, _, err = c.Do(ctx, "POST", "/v1/executions/"+url.PathEscape(id)+"/approvals/"+url.PathEscape(node), body, nil, &out)
	return &out, err
}
