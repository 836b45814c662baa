package templates_test

import (
	"testing"
	"time"

	"github.com/rune-org/rune/store"
	"github.com/rune-org/rune/store/storetest"
	"github.com/rune-org/rune/templates"
)

// BenchmarkRenderPinned is what a node with a template adds to a send:
// the version current at the execution's start and its layout's, read
// from the store (two queries), then rendered (compiled once).
func BenchmarkRenderPinned(b *testing.B) {
	for _, c := range []struct {
		name string
		open func(testing.TB) store.Store
	}{
		{"sqlite", func(tb testing.TB) store.Store { return storetest.SQLite(tb) }},
		{"postgres", func(tb testing.TB) store.Store { return storetest.Postgres(tb) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			st := c.open(b)
			t0 := time.Now().Add(-time.Hour)
			for _, in := range []store.TemplateInput{
				{Name: "brand", HTML: "<html><body>{{ content }}</body></html>", Subject: "[Acme] {{ content }}", At: t0},
				{Name: "welcome", Subject: "Hi {{ $trigger.name }}", Text: "Hello {{ $trigger.name }}", HTML: "<p>Hi {{ $trigger.name | escape }}</p>", Layout: "brand", At: t0},
			} {
				if _, err := st.PutTemplate(b.Context(), in); err != nil {
					b.Fatal(err)
				}
			}
			var r templates.Renderer
			env := map[string]any{"$trigger": map[string]any{"name": "Ada"}}
			b.ResetTimer()
			for b.Loop() {
				if _, err := r.Render(b.Context(), st, "welcome", time.Now(), env); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
