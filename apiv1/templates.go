package apiv1

import "time"

// TemplateInput is the body of PUT /v1/templates/{name} (issue 36): the
// Liquid sources of the next version. Email nodes use subject, text and
// html; sms nodes use body (or text). Layout names another template whose
// {{ content }} wraps each of these fields.
type TemplateInput struct {
	Subject string `json:"subject,omitempty"`
	Text    string `json:"text,omitempty"`
	HTML    string `json:"html,omitempty"`
	Body    string `json:"body,omitempty"`
	Layout  string `json:"layout,omitempty"`
}

// Template is one version of a message template. Lists leave out text,
// html and body.
type Template struct {
	Name      string     `json:"name"`
	Version   int        `json:"version"`
	Subject   string     `json:"subject,omitempty"`
	Text      string     `json:"text,omitempty"`
	HTML      string     `json:"html,omitempty"`
	Body      string     `json:"body,omitempty"`
	Layout    string     `json:"layout,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
	DeletedAt *time.Time `json:"deleted_at,omitempty"`
}

// TemplatePreviewInput is the body of POST /v1/templates/{name}/preview:
// the Liquid context to render with, keyed as a node sees it
// ({"$trigger": {…}}), and the version (0 or absent: the latest).
type TemplatePreviewInput struct {
	Data    map[string]any `json:"data,omitempty"`
	Version int            `json:"version,omitempty"`
}

// TemplatePreview is a template rendered: each field as a node would send
// it, wrapped by its layouts (named "base@2", innermost first).
type TemplatePreview struct {
	Name    string   `json:"name"`
	Version int      `json:"version"`
	Layouts []string `json:"layouts"`
	Subject string   `json:"subject"`
	Text    string   `json:"text"`
	HTML    string   `json:"html"`
	Body    string   `json:"body"`
}
