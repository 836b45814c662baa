// Package api is a typed Go client of the `rune server` HTTP API
// (docs/api.md, server/openapi.json); the JSON shapes it reads are package
// apiv1's, the ones the server writes. The rune CLI's server commands use it.
package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/rune-org/rune/apiv1"
	"github.com/rune-org/rune/workflow"
)

// Client calls one server. The zero value is not usable: Base is required.
type Client struct {
	// Base is the server's URL, "http://127.0.0.1:8080".
	Base string
	// Token is the API token sent as a bearer token; "" sends none.
	Token string
	// HTTP sends the requests; nil means http.DefaultClient.
	HTTP *http.Client
}

// Error is an error answer of the API: its problem details (RFC 9457).
type Error struct {
	Status int    `json:"status"`
	Type   string `json:"type"`
	Title  string `json:"title"`
	Detail string `json:"detail"`
	// Code is the API's error code (docs/api.md, "Errors"): branch on it.
	Code string `json:"code"`
	// Problems are an invalid workflow's or input's problems, each with its path.
	Problems []workflow.Problem `json:"problems,omitempty"`
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "server answered %d %s: %s", e.Status, e.Code, e.Detail)
	for _, p := range e.Problems {
		fmt.Fprintf(&b, "\n  %s", p)
	}
	return b.String()
}

// Error codes a client branches on (the server's full list is in docs/api.md).
const (
	CodeConflict             = "conflict"
	CodeInvalidWorkflow      = "invalid_workflow"
	CodeIdempotencyKeyReused = "idempotency_key_reused"
	CodePreconditionFailed   = "precondition_failed"
	CodeNotFound             = "not_found"
)

// The API's JSON shapes that the server writes are package apiv1's: one
// definition serves both.
type (
	// Page is one page of a list; NextCursor is "" on the last.
	Page[T any] = apiv1.Page[T]
	// Workflow is one version of a workflow; its ETag is the response's.
	Workflow = apiv1.Workflow
	// Execution is an execution (trigger instance).
	Execution = apiv1.Execution
	// NodeRun is one run of a node in one branch.
	NodeRun = apiv1.NodeRun
	// SplitProgress counts a split's branches.
	SplitProgress = apiv1.SplitProgress
	// AuditEntry is one state-changing request of the audit log.
	AuditEntry = apiv1.AuditEntry
)

// Hook is a webhook as lists show it (never its secrets).
type Hook struct {
	ID         string    `json:"id"`
	WorkflowID string    `json:"workflow_id"`
	Name       string    `json:"name"`
	Disabled   bool      `json:"disabled"`
	Signed     bool      `json:"signed"`
	CreatedAt  time.Time `json:"created_at"`
	UpdatedAt  time.Time `json:"updated_at"`
}

// Schedule is a cron schedule as lists show it.
type Schedule struct {
	ID            string      `json:"id"`
	WorkflowID    string      `json:"workflow_id"`
	Name          string      `json:"name"`
	Cron          string      `json:"cron"`
	Timezone      string      `json:"timezone,omitempty"`
	Paused        bool        `json:"paused"`
	NextAt        *time.Time  `json:"next_at"`
	NextFireTimes []time.Time `json:"next_fire_times"`
	CreatedAt     time.Time   `json:"created_at"`
	UpdatedAt     time.Time   `json:"updated_at"`
}

// Do sends a request (body nil: none; JSON otherwise) and decodes a JSON
// answer into out (when not nil). An error answer is an *Error; the
// response's headers are returned either way.
func (c *Client) Do(ctx context.Context, method, path string, body []byte, header http.Header, out any) (http.Header, int, error) {
	resp, err := c.Open(ctx, method, path, body, header)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return resp.Header, resp.StatusCode, fmt.Errorf("%s %s: read the answer: %w", method, path, err)
	}
	if resp.StatusCode >= 400 {
		return resp.Header, resp.StatusCode, problem(resp.StatusCode, data)
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return resp.Header, resp.StatusCode, fmt.Errorf("%s %s: decode the answer: %w", method, path, err)
		}
	}
	return resp.Header, resp.StatusCode, nil
}

// Open sends a request and returns the response as it comes, for streams;
// the caller closes its body and reads its status (ReadError reads an
// error answer).
func (c *Client) Open(ctx context.Context, method, path string, body []byte, header http.Header) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.Base, "/")+path, rd)
	if err != nil {
		return nil, fmt.Errorf("server URL %q: %w", c.Base, err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if body != nil && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w (is `rune server` running at %s?)", method, path, err, c.Base)
	}
	return resp, nil
}

// ReadError reads an error answer's problem details and closes its body.
func ReadError(resp *http.Response) *Error {
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return problem(resp.StatusCode, data)
}

func problem(status int, data []byte) *Error {
	e := &Error{}
	if json.Unmarshal(data, e) != nil || e.Detail == "" {
		e.Detail = strings.TrimSpace(string(data))
	}
	e.Status = status
	return e
}

// IsCode says whether err is an error answer with code.
func IsCode(err error, code string) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}

func (c *Client) workflow(ctx context.Context, method, path string, body []byte, header http.Header) (*Workflow, error) {
	var w Workflow
	h, _, err := c.Do(ctx, method, path, body, header, &w)
	if err != nil {
		return nil, err
	}
	w.ETag = h.Get("ETag")
	return &w, nil
}

// CreateWorkflow stores version 1 of a new workflow from its definition
// (docs/dsl.md); an existing id is an *Error with CodeConflict.
func (c *Client) CreateWorkflow(ctx context.Context, definition []byte) (*Workflow, error) {
	return c.workflow(ctx, "POST", "/v1/workflows", definition, nil)
}

// UpdateWorkflow stores a new version of workflow id, or none when the
// definition is unchanged (Workflow.Unchanged). ifMatch, when not "", is
// the ETag the update is based on: a newer version makes it an *Error with
// CodePreconditionFailed.
func (c *Client) UpdateWorkflow(ctx context.Context, id string, definition []byte, ifMatch string) (*Workflow, error) {
	var h http.Header
	if ifMatch != "" {
		h = http.Header{"If-Match": {ifMatch}}
	}
	return c.workflow(ctx, "PUT", "/v1/workflows/"+url.PathEscape(id), definition, h)
}

// PushWorkflow creates the workflow, or stores a new version of it when
// its id exists (none when unchanged).
func (c *Client) PushWorkflow(ctx context.Context, definition []byte) (*Workflow, error) {
	w, err := c.CreateWorkflow(ctx, definition)
	if !IsCode(err, CodeConflict) {
		return w, err
	}
	var head struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(definition, &head) != nil || head.ID == "" {
		return nil, err
	}
	return c.UpdateWorkflow(ctx, head.ID, definition, "")
}

// GetWorkflow returns version (0: the latest) of workflow id.
func (c *Client) GetWorkflow(ctx context.Context, id string, version int) (*Workflow, error) {
	path := "/v1/workflows/" + url.PathEscape(id)
	if version > 0 {
		path += "?version=" + strconv.Itoa(version)
	}
	return c.workflow(ctx, "GET", path, nil, nil)
}

// ListWorkflows returns a page of the latest version of each workflow.
func (c *Client) ListWorkflows(ctx context.Context, limit int, cursor string) (*Page[Workflow], error) {
	var p Page[Workflow]
	_, _, err := c.Do(ctx, "GET", "/v1/workflows?"+pageQuery(url.Values{}, limit, cursor), nil, nil, &p)
	return &p, err
}

// ExecutionFilter selects executions; zero fields select all.
type ExecutionFilter struct {
	WorkflowID     string
	Status         string
	IdempotencyKey string
	Limit          int
	Cursor         string
}

// ListExecutions returns a page of executions, newest first.
func (c *Client) ListExecutions(ctx context.Context, f ExecutionFilter) (*Page[Execution], error) {
	q := url.Values{}
	for k, v := range map[string]string{"workflow_id": f.WorkflowID, "status": f.Status, "idempotency_key": f.IdempotencyKey} {
		if v != "" {
			q.Set(k, v)
		}
	}
	var p Page[Execution]
	_, _, err := c.Do(ctx, "GET", "/v1/executions?"+pageQuery(q, f.Limit, f.Cursor), nil, nil, &p)
	return &p, err
}

// TriggerOptions tune a trigger: the version (0: the latest) and an
// idempotency key ("" none).
type TriggerOptions struct {
	Version        int
	IdempotencyKey string
}

// Trigger enqueues an execution of workflow id with input as its trigger
// payload. created is false when the idempotency key had already started
// it; the key with another input is an *Error with CodeIdempotencyKeyReused.
func (c *Client) Trigger(ctx context.Context, id string, input []byte, o TriggerOptions) (x *Execution, created bool, err error) {
	path := "/v1/workflows/" + url.PathEscape(id) + "/executions"
	if o.Version > 0 {
		path += "?version=" + strconv.Itoa(o.Version)
	}
	var h http.Header
	if o.IdempotencyKey != "" {
		h = http.Header{"Idempotency-Key": {o.IdempotencyKey}}
	}
	x = &Execution{}
	_, status, err := c.Do(ctx, "POST", path, input, h, x)
	if err != nil {
		return nil, false, err
	}
	return x, status == http.StatusCreated, nil
}

// GetExecution returns an execution with its node runs and splits.
func (c *Client) GetExecution(ctx context.Context, id string) (*Execution, error) {
	var x Execution
	_, _, err := c.Do(ctx, "GET", "/v1/executions/"+url.PathEscape(id), nil, nil, &x)
	return &x, err
}

// CancelExecution cancels an execution (halts a running one).
func (c *Client) CancelExecution(ctx context.Context, id string) (*Execution, error) {
	var x Execution
	_, _, err := c.Do(ctx, "POST", "/v1/executions/"+url.PathEscape(id)+"/cancel", nil, nil, &x)
	return &x, err
}

// ExecutionEvents opens execution id's event stream after event lastID
// ("" from its start); read it with ReadEvents and close it.
func (c *Client) ExecutionEvents(ctx context.Context, id, lastID string) (io.ReadCloser, error) {
	h := http.Header{"Accept": {"text/event-stream"}}
	if lastID != "" {
		h.Set("Last-Event-ID", lastID)
	}
	resp, err := c.Open(ctx, "GET", "/v1/executions/"+url.PathEscape(id)+"/events", nil, h)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, ReadError(resp)
	}
	return resp.Body, nil
}

// ListHooks returns workflow id's webhooks.
func (c *Client) ListHooks(ctx context.Context, id string) (*Page[Hook], error) {
	var p Page[Hook]
	_, _, err := c.Do(ctx, "GET", "/v1/workflows/"+url.PathEscape(id)+"/hooks", nil, nil, &p)
	return &p, err
}

// ListSchedules returns workflow id's schedules.
func (c *Client) ListSchedules(ctx context.Context, id string) (*Page[Schedule], error) {
	var p Page[Schedule]
	_, _, err := c.Do(ctx, "GET", "/v1/workflows/"+url.PathEscape(id)+"/schedules", nil, nil, &p)
	return &p, err
}

// ListAudit returns a page of the audit log, newest first (an admin token).
func (c *Client) ListAudit(ctx context.Context, limit int, cursor string) (*Page[AuditEntry], error) {
	var p Page[AuditEntry]
	_, _, err := c.Do(ctx, "GET", "/v1/audit?"+pageQuery(url.Values{}, limit, cursor), nil, nil, &p)
	return &p, err
}

func pageQuery(q url.Values, limit int, cursor string) string {
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	return q.Encode()
}
