package nodes

import (
	"context"
	"errors"
	"fmt"

	"github.com/rune-org/rune/expr"
	"github.com/rune-org/rune/node"
	"github.com/rune-org/rune/templates"
	"github.com/rune-org/rune/workflow"
)

// CodeTemplateNotFound: the node's template, or a layout it names, did
// not exist when the execution started (issue 36). Not retryable: the
// version is pinned to that time, so it will never appear.
const CodeTemplateNotFound = "TEMPLATE_NOT_FOUND"

// CodeTemplateUnavailable: the template store could not be read (retryable).
const CodeTemplateUnavailable = "TEMPLATE_UNAVAILABLE"

// checkTemplate checks an email or sms node's "template" parameter and
// reports whether the node names one.
func checkTemplate(c *workflow.NodeCheck) bool {
	v, present := c.Node.Parameters["template"]
	if !present {
		return false
	}
	s, ok := v.(string)
	if !ok || !templates.ValidName(s) {
		c.Report("parameters.template", "must be a template's name (%s), not %s", templates.NameRule, describe(v))
		return false
	}
	return true
}

func describe(v any) string {
	if s, ok := v.(string); ok {
		return fmt.Sprintf("%q", s)
	}
	return expr.TypeName(v)
}

// templateName is the node's "template" parameter, "" when absent.
func templateName(n *workflow.Node) string {
	s, _ := n.Parameters["template"].(string)
	return s
}

// renderTemplate renders template name pinned to the execution's start:
// the version current then, with the node's own Liquid context env (the
// input's, with the subscriber's variables when the node names one).
func renderTemplate(ctx context.Context, opts *Options, in *node.Input, env map[string]any, name string) (*templates.Rendered, error) {
	at := in.StartedAt
	if at.IsZero() {
		at = in.Now
	}
	r, err := opts.renderer.Render(ctx, opts.Templates, name, at, env)
	var nf *templates.NotFoundError
	var re *templates.RenderError
	switch {
	case err == nil:
		return r, nil
	case errors.As(err, &nf):
		return nil, &node.Error{Code: CodeTemplateNotFound, Message: "parameters.template: " + nf.Error(),
			Details: map[string]any{"parameter": "parameters.template", "template": nf.Name}}
	case errors.As(err, &re):
		return nil, &node.Error{Code: CodeExpression, Message: "parameters.template: " + re.Error(),
			Details: map[string]any{"parameter": "parameters.template", "template": re.Template, "field": re.Field}}
	case ctx.Err() != nil:
		return nil, ctx.Err()
	}
	return nil, &node.Error{Code: CodeTemplateUnavailable, Message: fmt.Sprintf("parameters.template: template %q: %v", name, err), Retryable: true}
}

// templateOutput records which version a send rendered, in the node's
// output (and so $vars).
func templateOutput(out map[string]any, r *templates.Rendered) {
	if r == nil || out == nil {
		return
	}
	out["template"] = map[string]any{"name": r.Name, "version": r.Version}
}

// fromTemplate fills what the email node does not set itself from its
// template: the node's subject wins over the template's; its content
// (body, text or html) replaces all of the template's. Without text and
// html, the template's body is the content, sent as HTML when it holds a
// tag (as the node's body is).
func (r *emailRunner) fromTemplate(ctx context.Context, in *node.Input, env map[string]any, m *rendered) error {
	t, err := renderTemplate(ctx, r.opts, in, env, r.template)
	if err != nil {
		return err
	}
	m.tpl = t
	if r.subject == nil {
		m.subject = t.Subject
	}
	if r.text == nil && r.html == nil && r.body == nil {
		m.text, m.html = t.Text, t.HTML
		if m.text == "" && m.html == "" {
			if bodyIsHTML(t.Body) {
				m.html = t.Body
			} else {
				m.text = t.Body
			}
		}
	}
	what := fmt.Sprintf("neither the node nor template %q (version %d)", t.Name, t.Version)
	if m.subject == "" {
		return node.InvalidParam("subject", "%s sets a subject", what)
	}
	if m.text == "" && m.html == "" {
		return node.InvalidParam("template", "%s gives the email a body (text, html or body)", what)
	}
	return nil
}

// fromTemplate is the sms node's body from its template when the node sets
// none: the template's body, or its text.
func (r *smsRunner) fromTemplate(ctx context.Context, in *node.Input, env map[string]any, m *SMS) (*templates.Rendered, error) {
	t, err := renderTemplate(ctx, r.opts, in, env, r.template)
	if err != nil || r.body != nil {
		return t, err
	}
	m.Body = t.Body
	if m.Body == "" {
		m.Body = t.Text
	}
	return t, nil
}
