// Package templates checks and renders the message templates of issue 36
// (docs/notifications.md "Templates"): named, versioned Liquid sources that
// the email and sms nodes render with "template", and that the server's
// preview route renders with sample data. The versions live in the store
// (store.TemplateStore); this package holds the rules both share: which
// names and sizes are valid, and how a layout wraps a template.
package templates

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/rune-org/rune/expr"
	"github.com/rune-org/rune/store"
)

// Limits of a template version.
const (
	// MaxSubject is the longest subject source, in bytes.
	MaxSubject = 2 << 10
	// MaxField is the longest text, html or body source, in bytes.
	MaxField = 256 << 10
	// MaxTotal bounds the four sources together.
	MaxTotal = 512 << 10
	// MaxLayoutDepth is how many layouts may wrap one another (a layout's
	// own layout counts as a second).
	MaxLayoutDepth = 3
)

// namePattern: a template's name, as it appears in URLs and in nodes.
var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// ValidName reports whether name can name a template: 1 to 64 letters,
// digits, '_', '.' and '-', starting with a letter or a digit.
func ValidName(name string) bool { return namePattern.MatchString(name) }

// NameRule says what ValidName accepts, for error messages.
const NameRule = "1 to 64 letters, digits, '_', '.' or '-', starting with a letter or digit"

// Fields are the sources of a template, in the order errors report them.
var Fields = []string{"subject", "text", "html", "body"}

// sources returns t's sources by field name.
func sources(t *store.Template) map[string]string {
	return map[string]string{"subject": t.Subject, "text": t.Text, "html": t.HTML, "body": t.Body}
}

// compiler compiles templates: sources may be far longer than a node
// parameter's (expr's 4 KiB default).
var compiler = expr.NewCompiler(expr.Limits{MaxSource: MaxField})

// FieldError is a problem with one field of a template (its JSON name).
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

// Check reports the first problem with t, as a *FieldError: its name, its
// layout's name, sizes, and every source compiled as Liquid (an error names
// the field, the line and the column).
func Check(t *store.Template) error {
	if !ValidName(t.Name) {
		return &FieldError{"name", fmt.Sprintf("%q is not a template name: %s", t.Name, NameRule)}
	}
	if t.Layout != "" {
		if !ValidName(t.Layout) {
			return &FieldError{"layout", fmt.Sprintf("%q is not a template name: %s", t.Layout, NameRule)}
		}
		if t.Layout == t.Name {
			return &FieldError{"layout", "a template cannot be its own layout"}
		}
	}
	src := sources(t)
	total := 0
	for _, f := range Fields {
		total += len(src[f])
		limit := MaxField
		if f == "subject" {
			limit = MaxSubject
		}
		if len(src[f]) > limit {
			return &FieldError{f, fmt.Sprintf("%d bytes, over the limit of %d", len(src[f]), limit)}
		}
		if f == "subject" && strings.ContainsAny(src[f], "\r\n") {
			return &FieldError{f, "a subject is one line"}
		}
	}
	if total == 0 {
		return &FieldError{"subject", "a template needs at least one of subject, text, html and body"}
	}
	if total > MaxTotal {
		return &FieldError{"body", fmt.Sprintf("subject, text, html and body are %d bytes together, over the limit of %d", total, MaxTotal)}
	}
	for _, f := range Fields {
		if src[f] == "" {
			continue
		}
		if _, err := compiler.Liquid(src[f]); err != nil {
			return &FieldError{f, locate(src[f], err)}
		}
	}
	return nil
}

// liquidError is the message osteele/liquid gives a markup that does not
// parse: "Liquid error (line N): <what> in <markup>". Its line counts from
// the markup's own start, so the position is found here instead.
var liquidError = regexp.MustCompile(`^Liquid error(?: \(line \d+\))?: (.*) in (\{[{%].*)$`)

// locate is err's message with the line and column (from 1) of the markup
// it names in src.
func locate(src string, err error) string {
	msg := err.Error()
	m := liquidError.FindStringSubmatch(msg)
	if m == nil {
		return msg
	}
	what, markup := m[1], m[2]
	i := strings.Index(src, markup)
	if i < 0 {
		// The markup as Liquid shows it may differ in "$" names or spaces:
		// find its opening instead.
		i = strings.Index(src, markup[:2])
	}
	if i < 0 {
		return what + " in " + markup
	}
	line := strings.Count(src[:i], "\n") + 1
	col := len([]rune(src[strings.LastIndex(src[:i], "\n")+1:i])) + 1
	return fmt.Sprintf("%s in %s (line %d, column %d)", what, markup, line, col)
}

// Source finds the version of a template that was current at a time
// (store.TemplateStore's TemplateAt; a store.Store is one).
type Source interface {
	TemplateAt(ctx context.Context, name string, at time.Time) (*store.Template, error)
}

// ErrNotFound: the template, or a layout it names, did not exist at the
// time asked for (or the process has no template store).
var ErrNotFound = errors.New("template not found")

// NotFoundError names what was not found; it matches ErrNotFound.
type NotFoundError struct {
	Name string
	// Of is the template whose layout Name is, "" for the template itself.
	Of  string
	Msg string
}

func (e *NotFoundError) Error() string {
	what := fmt.Sprintf("template %q", e.Name)
	if e.Of != "" {
		what = fmt.Sprintf("layout %q of template %q", e.Name, e.Of)
	}
	if e.Msg != "" {
		return what + ": " + e.Msg
	}
	return what + ": not found"
}

func (e *NotFoundError) Is(target error) bool { return target == ErrNotFound }

// Rendered is a rendered template: each field rendered and wrapped by the
// layouts, "" where the template has no source.
type Rendered struct {
	Subject, Text, HTML, Body string
	// Name and Version say which template version was rendered; Layouts
	// the versions of the layouts that wrapped it, innermost first
	// ("base@2").
	Name    string
	Version int
	Layouts []string
}

// RenderError is a template field that did not render: Template names the
// template version ("welcome@3") or layout, Field the field.
type RenderError struct {
	Template string
	Field    string
	Err      error
}

func (e *RenderError) Error() string {
	return fmt.Sprintf("template %s, %s: %v", e.Template, e.Field, e.Err)
}

func (e *RenderError) Unwrap() error { return e.Err }

// Renderer renders template versions, compiling each version's sources
// once. It is safe for concurrent use.
type Renderer struct {
	cache sync.Map // "name@version" → *compiled
}

type compiled struct {
	t      *store.Template
	fields map[string]expr.Value // nil entries: no source
	// wrap are the fields compiled as a layout: "content" bound to the
	// wrapped text.
	wrap map[string]expr.Value
}

// contentPrefix binds the wrapped text to "content" in a layout: Liquid
// names of the context start with "$" (expr), a layout reads the familiar
// {{ content }} (or {{ $content }}).
const contentPrefix = "{% assign content = $content %}"

func (r *Renderer) compile(t *store.Template) (*compiled, error) {
	key := fmt.Sprintf("%s@%d", t.Name, t.Version)
	if c, ok := r.cache.Load(key); ok {
		return c.(*compiled), nil
	}
	c := &compiled{t: t, fields: map[string]expr.Value{}, wrap: map[string]expr.Value{}}
	for f, src := range sources(t) {
		if src == "" {
			continue
		}
		v, err := compiler.Liquid(src)
		if err != nil {
			return nil, &RenderError{Template: key, Field: f, Err: errors.New(locate(src, err))}
		}
		w, err := compiler.Liquid(contentPrefix + src)
		if err != nil {
			return nil, &RenderError{Template: key, Field: f, Err: err}
		}
		c.fields[f], c.wrap[f] = v, w
	}
	r.cache.Store(key, c)
	return c, nil
}

// Render renders template name as it was at at (its version then, and its
// layouts' versions then) with the Liquid context env ("$trigger", …; not
// modified). A template or layout that did not exist then is a
// *NotFoundError; a field that fails to render a *RenderError.
func (r *Renderer) Render(ctx context.Context, src Source, name string, at time.Time, env map[string]any) (*Rendered, error) {
	if src == nil {
		return nil, &NotFoundError{Name: name, Msg: "this process has no template store (templates live on rune server)"}
	}
	get := func(name, of string) (*compiled, error) {
		t, err := src.TemplateAt(ctx, name, at)
		if errors.Is(err, store.ErrNotFound) {
			return nil, &NotFoundError{Name: name, Of: of, Msg: fmt.Sprintf("none current at %s", at.UTC().Format(time.RFC3339Nano))}
		}
		if err != nil {
			return nil, err
		}
		return r.compile(t)
	}
	top, err := get(name, "")
	if err != nil {
		return nil, err
	}
	return r.render(ctx, top, env, func(layout, of string) (*compiled, error) { return get(layout, of) })
}

// RenderVersion is Render of a given version, its layouts as they are now
// (the preview of a version).
func (r *Renderer) RenderVersion(ctx context.Context, st store.TemplateStore, t *store.Template, env map[string]any) (*Rendered, error) {
	top, err := r.compile(t)
	if err != nil {
		return nil, err
	}
	return r.render(ctx, top, env, func(layout, of string) (*compiled, error) {
		lt, err := st.GetTemplate(ctx, layout, 0)
		if errors.Is(err, store.ErrNotFound) {
			return nil, &NotFoundError{Name: layout, Of: of}
		}
		if err != nil {
			return nil, err
		}
		return r.compile(lt)
	})
}

func (r *Renderer) render(ctx context.Context, top *compiled, env map[string]any, layout func(name, of string) (*compiled, error)) (*Rendered, error) {
	out := map[string]string{}
	key := func(c *compiled) string { return fmt.Sprintf("%s@%d", c.t.Name, c.t.Version) }
	for f, v := range top.fields {
		s, err := eval(v, env)
		if err != nil {
			return nil, &RenderError{Template: key(top), Field: f, Err: err}
		}
		out[f] = s
	}
	res := &Rendered{Name: top.t.Name, Version: top.t.Version}
	seen := map[string]bool{top.t.Name: true}
	for c := top; c.t.Layout != ""; {
		if len(res.Layouts) == MaxLayoutDepth {
			return nil, &RenderError{Template: key(c), Field: "layout", Err: fmt.Errorf("layouts nest deeper than %d", MaxLayoutDepth)}
		}
		if seen[c.t.Layout] {
			return nil, &RenderError{Template: key(c), Field: "layout", Err: fmt.Errorf("layout %q wraps itself", c.t.Layout)}
		}
		seen[c.t.Layout] = true
		l, err := layout(c.t.Layout, c.t.Name)
		if err != nil {
			return nil, err
		}
		// A layout wraps the fields the template has; one it has no source
		// for passes through unchanged.
		for f, s := range out {
			w := l.wrap[f]
			if w == nil || s == "" {
				continue
			}
			lenv := maps.Clone(env)
			if lenv == nil {
				lenv = map[string]any{}
			}
			lenv["$content"] = s
			if out[f], err = eval(w, lenv); err != nil {
				return nil, &RenderError{Template: key(l), Field: f, Err: err}
			}
		}
		res.Layouts = append(res.Layouts, key(l))
		c = l
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	res.Subject, res.Text, res.HTML, res.Body = out["subject"], out["text"], out["html"], out["body"]
	if strings.ContainsAny(res.Subject, "\r\n") {
		res.Subject = strings.Join(strings.Fields(res.Subject), " ")
	}
	return res, nil
}

func eval(v expr.Value, env map[string]any) (string, error) {
	out, err := v.Eval(env)
	if err != nil {
		return "", err
	}
	s, _ := out.(string)
	return s, nil
}
