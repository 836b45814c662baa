package api

import (
	"context"
	"encoding/json"
	"net/url"
	"strconv"

	"github.com/rune-org/rune/apiv1"
)

// Message templates (issue 36).
type (
	// Template is one version of a message template.
	Template = apiv1.Template
	// TemplateInput is the sources of a template's next version.
	TemplateInput = apiv1.TemplateInput
	// TemplatePreview is a template rendered with sample data.
	TemplatePreview = apiv1.TemplatePreview
)

func templatePath(name string) string { return "/v1/templates/" + url.PathEscape(name) }

// PutTemplate stores the next version of template name.
func (c *Client) PutTemplate(ctx context.Context, name string, in TemplateInput) (*Template, error) {
	body, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	var out Template
	_, _, err = c.Do(ctx, "PUT", templatePath(name), body, nil, &out)
	return &out, err
}

// GetTemplate returns version (0: the latest) of template name.
func (c *Client) GetTemplate(ctx context.Context, name string, version int) (*Template, error) {
	path := templatePath(name)
	if version > 0 {
		path += "/versions/" + strconv.Itoa(version)
	}
	var out Template
	_, _, err := c.Do(ctx, "GET", path, nil, nil, &out)
	return &out, err
}

// ListTemplates returns the latest version of every template, without
// their text, html and body.
func (c *Client) ListTemplates(ctx context.Context) ([]Template, error) {
	var p Page[Template]
	_, _, err := c.Do(ctx, "GET", "/v1/templates", nil, nil, &p)
	return p.Items, err
}

// ListTemplateVersions returns template name's versions, newest first.
func (c *Client) ListTemplateVersions(ctx context.Context, name string) ([]Template, error) {
	var p Page[Template]
	_, _, err := c.Do(ctx, "GET", templatePath(name)+"/versions", nil, nil, &p)
	return p.Items, err
}

// DeleteTemplate deletes template name.
func (c *Client) DeleteTemplate(ctx context.Context, name string) error {
	_, _, err := c.Do(ctx, "DELETE", templatePath(name), nil, nil, nil)
	return err
}

// PreviewTemplate renders version (0: the latest) of template name with
// data as the Liquid context ({"$trigger": {…}}).
func (c *Client) PreviewTemplate(ctx context.Context, name string, version int, data map[string]any) (*TemplatePreview, error) {
	body, err := json.Marshal(apiv1.TemplatePreviewInput{Data: data, Version: version})
	if err != nil {
		return nil, err
	}
	var out TemplatePreview
	_, _, err = c.Do(ctx, "POST", templatePath(name)+"/preview", body, nil, &out)
	return &out, err
}
