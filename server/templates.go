package server

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/rune-org/rune/apiv1"
	"github.com/rune-org/rune/store"
	"github.com/rune-org/rune/templates"
	"github.com/rune-org/rune/workflow"
)

// Message templates (issue 36, docs/notifications.md "Templates"): named,
// versioned Liquid sources that email and sms nodes render with
// "template", pinned to the version current when the execution started.

// CodeInvalidTemplate: a template that does not compile, or whose
// preview does not render (422, problems name the field).
const CodeInvalidTemplate = "invalid_template"

// templateBodyLimit bounds a template's request body: templates.MaxTotal
// of sources, escaped in JSON.
const templateBodyLimit = 2 << 20

// templateName reads and checks the {name} path value.
func templateName(r *http.Request) (string, error) {
	name := r.PathValue("name")
	if !templates.ValidName(name) {
		return "", badRequest("path: template name %q: want %s", limitText(name, 80), templates.NameRule)
	}
	return name, nil
}

func viewTemplate(t *store.Template) apiv1.Template {
	return apiv1.Template{Name: t.Name, Version: t.Version, Subject: t.Subject, Text: t.Text, HTML: t.HTML, Body: t.Body,
		Layout: t.Layout, CreatedAt: t.CreatedAt, DeletedAt: t.DeletedAt}
}

// templateErr is the API's answer to err from a store call about template
// name (version 0: any version): 404 for store.ErrNotFound, else err.
func templateErr(err error, name string, version int) error {
	if !errors.Is(err, store.ErrNotFound) {
		return err
	}
	if version > 0 {
		return notFound("template %q has no version %d", name, version)
	}
	return notFound("template %q does not exist (PUT /v1/templates/%s creates it)", name, name)
}

// putTemplate is PUT /v1/templates/{name}: it checks the sources (each
// compiled as Liquid, sizes, the layout's name and existence) and stores
// the next version.
func (s *Server) putTemplate(w http.ResponseWriter, r *http.Request) error {
	name, err := templateName(r)
	if err != nil {
		return err
	}
	body, err := readBody(r, templateBodyLimit)
	if err != nil {
		return err
	}
	var in apiv1.TemplateInput
	if err := decodeJSON(body, &in); err != nil {
		return err
	}
	t := &store.Template{Name: name, Subject: in.Subject, Text: in.Text, HTML: in.HTML, Body: in.Body, Layout: in.Layout}
	if err := templates.Check(t); err != nil {
		var fe *templates.FieldError
		if errors.As(err, &fe) {
			return invalidTemplate(name, fe.Field, fe.Msg)
		}
		return err
	}
	if t.Layout != "" {
		if _, err := s.store.GetTemplate(r.Context(), t.Layout, 0); errors.Is(err, store.ErrNotFound) {
			return invalidTemplate(name, "layout", "template "+quote(t.Layout)+" does not exist (PUT it first)")
		} else if err != nil {
			return err
		}
	}
	stored, err := s.store.PutTemplate(r.Context(), store.TemplateInput{Name: name, Subject: t.Subject, Text: t.Text,
		HTML: t.HTML, Body: t.Body, Layout: t.Layout, At: s.cfg.Now()})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewTemplate(stored))
	return nil
}

// invalidTemplate is a 422 naming the template's field that is wrong.
func invalidTemplate(name, field, msg string) error {
	return &apiError{Status: http.StatusUnprocessableEntity, Code: CodeInvalidTemplate,
		Message:  fmt.Sprintf("template %q is invalid: %s: %s", name, field, msg),
		Problems: []workflow.Problem{{Path: field, Message: msg}}}
}

func (s *Server) getTemplate(w http.ResponseWriter, r *http.Request) error {
	name, err := templateName(r)
	if err != nil {
		return err
	}
	return s.answerTemplate(w, r, name, 0)
}

func (s *Server) getTemplateVersion(w http.ResponseWriter, r *http.Request) error {
	name, err := templateName(r)
	if err != nil {
		return err
	}
	version, err := strconv.Atoi(r.PathValue("version"))
	if err != nil || version < 1 {
		return badRequest("path: version %q: want a positive number", limitText(r.PathValue("version"), 20))
	}
	return s.answerTemplate(w, r, name, version)
}

func (s *Server) answerTemplate(w http.ResponseWriter, r *http.Request, name string, version int) error {
	t, err := s.store.GetTemplate(r.Context(), name, version)
	if err != nil {
		return templateErr(err, name, version)
	}
	writeJSON(w, http.StatusOK, viewTemplate(t))
	return nil
}

func (s *Server) listTemplates(w http.ResponseWriter, r *http.Request) error {
	ts, err := s.store.ListTemplates(r.Context())
	if err != nil {
		return err
	}
	writeList(w, ts, "", viewTemplate)
	return nil
}

func (s *Server) listTemplateVersions(w http.ResponseWriter, r *http.Request) error {
	name, err := templateName(r)
	if err != nil {
		return err
	}
	ts, err := s.store.ListTemplateVersions(r.Context(), name)
	if err != nil {
		return templateErr(err, name, 0)
	}
	writeList(w, ts, "", viewTemplate)
	return nil
}

func (s *Server) deleteTemplate(w http.ResponseWriter, r *http.Request) error {
	name, err := templateName(r)
	if err != nil {
		return err
	}
	err = s.store.DeleteTemplate(r.Context(), name, s.cfg.Now())
	if err != nil {
		return templateErr(err, name, 0)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// previewTemplate is POST /v1/templates/{name}/preview: the template (its
// latest version, or "version") rendered with "data" as the Liquid
// context, wrapped by its layouts as they are now. Nothing is sent.
func (s *Server) previewTemplate(w http.ResponseWriter, r *http.Request) error {
	name, err := templateName(r)
	if err != nil {
		return err
	}
	body, err := readBody(r, templateBodyLimit)
	if err != nil {
		return err
	}
	var in apiv1.TemplatePreviewInput
	if len(strings.TrimSpace(string(body))) > 0 {
		if err := decodeJSON(body, &in); err != nil {
			return err
		}
	}
	if in.Version < 0 {
		return badRequest("field version: want a positive number, or none for the latest")
	}
	for k := range in.Data {
		if !strings.HasPrefix(k, "$") || len(k) < 2 {
			return badRequest("field data.%s: a variable's name starts with \"$\", as a node sees it: {\"$trigger\": {…}}", limitText(k, 80))
		}
	}
	t, err := s.store.GetTemplate(r.Context(), name, in.Version)
	if err != nil {
		return templateErr(err, name, in.Version)
	}
	env := make(map[string]any, len(in.Data))
	for k, v := range in.Data {
		env[k] = v
	}
	out, err := s.templates.RenderVersion(r.Context(), s.store, t, env)
	var nf *templates.NotFoundError
	var re *templates.RenderError
	switch {
	case errors.As(err, &nf):
		return &apiError{Status: http.StatusUnprocessableEntity, Code: CodeInvalidTemplate, Message: nf.Error(),
			Problems: []workflow.Problem{{Path: "layout", Message: nf.Error()}}}
	case errors.As(err, &re):
		return &apiError{Status: http.StatusUnprocessableEntity, Code: CodeInvalidTemplate, Message: re.Error(),
			Problems: []workflow.Problem{{Path: re.Field, Message: re.Err.Error()}}}
	case err != nil:
		return err
	}
	layouts := out.Layouts
	if layouts == nil {
		layouts = []string{}
	}
	writeJSON(w, http.StatusOK, apiv1.TemplatePreview{Name: out.Name, Version: out.Version, Layouts: layouts,
		Subject: out.Subject, Text: out.Text, HTML: out.HTML, Body: out.Body})
	return nil
}
