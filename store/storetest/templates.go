package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/rune-org/rune/store"
)

// testTemplates: each put stores the next version; the latest and any
// version are readable; TemplateAt answers the version current at a time,
// deletes included; lists carry no contents; concurrent puts get distinct
// versions.
func testTemplates(ctx context.Context, t *testing.T, h *harness) {
	put := func(name, subject string, sec float64) *store.Template {
		t.Helper()
		tpl, err := h.s.PutTemplate(ctx, store.TemplateInput{Name: name, Subject: subject, Text: "text " + subject,
			HTML: "<p>" + subject + "</p>", Body: "body " + subject, Layout: "base", At: at(sec)})
		if err != nil {
			t.Fatalf("PutTemplate(%s, %s): %v", name, subject, err)
		}
		return tpl
	}
	if _, err := h.s.GetTemplate(ctx, "welcome", 0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetTemplate(unknown) = %v, want ErrNotFound", err)
	}
	if _, err := h.s.ListTemplateVersions(ctx, "welcome"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("ListTemplateVersions(unknown) = %v, want ErrNotFound", err)
	}
	if _, err := h.s.PutTemplate(ctx, store.TemplateInput{At: at(1)}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("PutTemplate(no name) = %v, want ErrInvalid", err)
	}
	v1 := put("welcome", "one", 10)
	v2 := put("welcome", "two", 20)
	put("alpha", "a", 15)
	if v1.Version != 1 || v2.Version != 2 {
		t.Fatalf("versions %d, %d; want 1, 2", v1.Version, v2.Version)
	}
	got, err := h.s.GetTemplate(ctx, "welcome", 0)
	if err != nil || got.Version != 2 || got.Subject != "two" || got.Text != "text two" || got.HTML != "<p>two</p>" ||
		got.Body != "body two" || got.Layout != "base" || !got.CreatedAt.Equal(at(20)) || got.DeletedAt != nil {
		t.Fatalf("GetTemplate(latest) = %+v, %v", got, err)
	}
	if got, err := h.s.GetTemplate(ctx, "welcome", 1); err != nil || got.Subject != "one" || got.Version != 1 {
		t.Fatalf("GetTemplate(v1) = %+v, %v", got, err)
	}
	if _, err := h.s.GetTemplate(ctx, "welcome", 3); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetTemplate(v3) = %v, want ErrNotFound", err)
	}
	for _, c := range []struct {
		sec  float64
		want int // 0: not found
	}{{5, 0}, {10, 1}, {19.999, 1}, {20, 2}, {100, 2}} {
		got, err := h.s.TemplateAt(ctx, "welcome", at(c.sec))
		switch {
		case c.want == 0 && !errors.Is(err, store.ErrNotFound):
			t.Fatalf("TemplateAt(t0+%vs) = %+v, %v; want ErrNotFound", c.sec, got, err)
		case c.want != 0 && (err != nil || got.Version != c.want || got.Text != fmt.Sprintf("text %s", map[int]string{1: "one", 2: "two"}[c.want])):
			t.Fatalf("TemplateAt(t0+%vs) = %+v, %v; want version %d", c.sec, got, err, c.want)
		}
	}
	list, err := h.s.ListTemplates(ctx)
	if err != nil || len(list) != 2 || list[0].Name != "alpha" || list[1].Name != "welcome" || list[1].Version != 2 ||
		list[1].Subject != "two" || list[1].Layout != "base" || list[1].Text != "" || list[1].HTML != "" || list[1].Body != "" {
		t.Fatalf("ListTemplates = %+v, %v", list, err)
	}
	vs, err := h.s.ListTemplateVersions(ctx, "welcome")
	if err != nil || len(vs) != 2 || vs[0].Version != 2 || vs[1].Version != 1 || vs[0].Text != "" || !vs[1].CreatedAt.Equal(at(10)) {
		t.Fatalf("ListTemplateVersions = %+v, %v", vs, err)
	}

	// Delete at 30, put again at 40: an execution pinned between the two
	// finds no template; before, version 2; after, version 3.
	if err := h.s.DeleteTemplate(ctx, "welcome", at(30)); err != nil {
		t.Fatal(err)
	}
	if err := h.s.DeleteTemplate(ctx, "welcome", at(31)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("DeleteTemplate(deleted) = %v, want ErrNotFound", err)
	}
	if err := h.s.DeleteTemplate(ctx, "nothing", at(31)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("DeleteTemplate(unknown) = %v, want ErrNotFound", err)
	}
	if _, err := h.s.GetTemplate(ctx, "welcome", 0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetTemplate(deleted) = %v, want ErrNotFound", err)
	}
	if got, err := h.s.GetTemplate(ctx, "welcome", 2); err != nil || got.DeletedAt == nil {
		t.Fatalf("GetTemplate(deleted, v2) = %+v, %v; want it, marked deleted", got, err)
	}
	if list, err := h.s.ListTemplates(ctx); err != nil || len(list) != 1 || list[0].Name != "alpha" {
		t.Fatalf("ListTemplates after delete = %+v, %v", list, err)
	}
	v3 := put("welcome", "three", 40)
	if v3.Version != 3 {
		t.Fatalf("put after delete: version %d, want 3", v3.Version)
	}
	for _, c := range []struct {
		sec  float64
		want int
	}{{25, 2}, {30, 0}, {35, 0}, {40, 3}} {
		got, err := h.s.TemplateAt(ctx, "welcome", at(c.sec))
		switch {
		case c.want == 0 && !errors.Is(err, store.ErrNotFound):
			t.Fatalf("TemplateAt(t0+%vs) = %+v, %v; want ErrNotFound (deleted then)", c.sec, got, err)
		case c.want != 0 && (err != nil || got.Version != c.want):
			t.Fatalf("TemplateAt(t0+%vs) = %+v, %v; want version %d", c.sec, got, err, c.want)
		}
	}
	if got, err := h.s.GetTemplate(ctx, "welcome", 0); err != nil || got.Version != 3 || got.DeletedAt != nil {
		t.Fatalf("GetTemplate(put again) = %+v, %v", got, err)
	}

	// Concurrent puts of a new name, through two handles where the store
	// has them: every version from 1 to n exactly once.
	const n = 8
	var wg sync.WaitGroup
	versions := make(chan int, n)
	for i := range n {
		s := h.s
		if i%2 == 1 {
			s = h.twin(t)
		}
		wg.Go(func() {
			tpl, err := s.PutTemplate(ctx, store.TemplateInput{Name: "racy", Body: fmt.Sprint(i), At: at(50)})
			if err != nil {
				t.Errorf("concurrent PutTemplate: %v", err)
				return
			}
			versions <- tpl.Version
		})
	}
	wg.Wait()
	close(versions)
	seen := map[int]bool{}
	for v := range versions {
		if seen[v] || v < 1 || v > n {
			t.Fatalf("concurrent puts: version %d twice or out of 1..%d", v, n)
		}
		seen[v] = true
	}
	if len(seen) != n {
		t.Fatalf("concurrent puts: %d versions, want %d", len(seen), n)
	}
}
