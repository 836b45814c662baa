package templates

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rune-org/rune/store"
)

// Check names the field and, for Liquid that does not compile, the line
// and column of the markup.
func TestCheck(t *testing.T) {
	for _, c := range []struct {
		t          store.Template
		field, msg string
	}{
		{store.Template{Name: "ok", HTML: "<p>\n  {{ $trigger.name | }}</p>"}, "html", "(line 2, column 3)"},
		{store.Template{Name: "ok", Text: "a\nb\n{% if $x %}"}, "text", `unterminated "if" block in {% if $x %} (line 3, column 1)`},
		{store.Template{Name: "bad name"}, "name", "is not a template name"},
		{store.Template{Name: "ok"}, "subject", "needs at least one"},
		{store.Template{Name: "ok", Body: "x", Layout: "ok"}, "layout", "its own layout"},
		{store.Template{Name: "ok", Subject: "a\nb"}, "subject", "one line"},
		{store.Template{Name: "ok", Subject: strings.Repeat("s", MaxSubject+1)}, "subject", "over the limit"},
		{store.Template{Name: "ok", HTML: strings.Repeat("h", MaxField+1)}, "html", "over the limit"},
	} {
		err := Check(&c.t)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != c.field || !strings.Contains(fe.Msg, c.msg) {
			t.Errorf("Check(%+v) = %v; want field %s, message containing %q", c.t.Name, err, c.field, c.msg)
		}
	}
	if err := Check(&store.Template{Name: "welcome.v2_x-y", Subject: "Hi {{ $trigger.name }}", HTML: strings.Repeat("h", MaxField), Layout: "base"}); err != nil {
		t.Errorf("Check(valid) = %v", err)
	}
}

type mapSource map[string]*store.Template

func (m mapSource) TemplateAt(_ context.Context, name string, _ time.Time) (*store.Template, error) {
	if t, ok := m[name]; ok {
		return t, nil
	}
	return nil, store.ErrNotFound
}

// Layouts nest up to MaxLayoutDepth; a cycle is an error, not a loop.
func TestRenderLayouts(t *testing.T) {
	src := mapSource{
		"a":     {Name: "a", Version: 1, HTML: "A{{ $x }}", Text: "plain", Layout: "b"},
		"b":     {Name: "b", Version: 2, HTML: "<b>{{ content }}</b>", Layout: "c"},
		"c":     {Name: "c", Version: 1, HTML: "<c>{{ content | upcase }}</c>"},
		"loop1": {Name: "loop1", Version: 1, Body: "x", Layout: "loop2"},
		"loop2": {Name: "loop2", Version: 1, Body: "{{ content }}", Layout: "loop1"},
	}
	var r Renderer
	got, err := r.Render(t.Context(), src, "a", time.Now(), map[string]any{"$x": "y"})
	if err != nil || got.HTML != "<c><B>AY</B></c>" || got.Text != "plain" || strings.Join(got.Layouts, ",") != "b@2,c@1" {
		t.Fatalf("Render(a) = %+v, %v", got, err)
	}
	if _, err := r.Render(t.Context(), src, "loop1", time.Now(), nil); err == nil || !strings.Contains(err.Error(), "wraps itself") {
		t.Fatalf("Render(loop) = %v, want a cycle error", err)
	}
	if _, err := r.Render(t.Context(), src, "a", time.Now(), nil); err == nil || !strings.Contains(err.Error(), "$x") {
		t.Fatalf("Render(a, no $x) = %v, want the missing name", err)
	}
}
