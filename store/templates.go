package store

import (
	"context"
	"time"
)

// Template is one version of a message template (issue 36, docs/
// notifications.md "Templates"): Liquid sources an email node (Subject,
// Text, HTML) or an sms node (Body) renders, and the name of a Layout
// template that wraps them. Versions are immutable: a put stores a new one.
type Template struct {
	Name    string
	Version int
	Subject string
	Text    string
	HTML    string
	Body    string
	Layout  string
	// CreatedAt is this version's time: an execution started at or after
	// it (and before the next version's) renders this version.
	CreatedAt time.Time
	// DeletedAt is set when the template is deleted now.
	DeletedAt *time.Time
}

// TemplateInput stores the next version of a template.
type TemplateInput struct {
	Name                              string
	Subject, Text, HTML, Body, Layout string
	At                                time.Time
}

// TemplateStore keeps message templates and their versions (issue 36).
// Every method is safe for concurrent use, from several processes sharing
// one database where the implementation allows it.
type TemplateStore interface {
	// PutTemplate stores the next version of template in.Name: 1 for a new
	// name; after a delete the numbering goes on and the template is live
	// again. Concurrent puts of one name get distinct versions.
	PutTemplate(ctx context.Context, in TemplateInput) (*Template, error)
	// GetTemplate returns version (0: the latest) of template name. A
	// deleted template is ErrNotFound for version 0 and readable by version.
	GetTemplate(ctx context.Context, name string, version int) (*Template, error)
	// TemplateAt returns the version of template name that was current at
	// at: the newest created at or before at. ErrNotFound when there was
	// none, or when the template was deleted after that version and at or
	// before at.
	TemplateAt(ctx context.Context, name string, at time.Time) (*Template, error)
	// ListTemplates returns the latest version of every template not
	// deleted, by name, with Subject and Layout but without Text, HTML and
	// Body.
	ListTemplates(ctx context.Context) ([]*Template, error)
	// ListTemplateVersions returns template name's versions, newest first,
	// with Subject and Layout but without Text, HTML and Body (GetTemplate
	// reads one). ErrNotFound for a name never put; a deleted template's
	// versions are listed, with DeletedAt set.
	ListTemplateVersions(ctx context.Context, name string) ([]*Template, error)
	// DeleteTemplate marks template name deleted at at. ErrNotFound when it
	// does not exist or is deleted already.
	DeleteTemplate(ctx context.Context, name string, at time.Time) error
}
