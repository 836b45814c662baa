package storetest

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/rune-org/rune/store"
)

// testChildLinks: a link is kept once (the first wins), found by child and
// listed by parent, oldest first; an unlinked execution has no parent.
func testChildLinks(ctx context.Context, t *testing.T, h *harness) {
	first := &store.ChildLink{ChildID: "exec_child_1", ParentID: "p", ParentNode: "call", Wake: "w1", Chain: []string{"root", "mid"}, CreatedAt: at(1)}
	l, linked, err := h.s.LinkChild(ctx, first)
	if err != nil || !linked || l.ParentID != "p" || l.Wake != "w1" || !slices.Equal(l.Chain, first.Chain) || !l.CreatedAt.Equal(at(1)) {
		t.Fatalf("LinkChild = %+v, %v, %v", l, linked, err)
	}
	again := *first
	again.Wake, again.ParentNode = "w2", "other"
	l, linked, err = h.s.LinkChild(ctx, &again)
	if err != nil || linked || l.Wake != "w1" || l.ParentNode != "call" {
		t.Fatalf("LinkChild again = %+v, %v, %v; want the first link kept", l, linked, err)
	}
	if _, _, err := h.s.LinkChild(ctx, &store.ChildLink{ChildID: "exec_child_2", ParentID: "p", ParentNode: "call", CreatedAt: at(2)}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := h.s.LinkChild(ctx, &store.ChildLink{ChildID: "exec_child_3", ParentID: "q", ParentNode: "call", CreatedAt: at(0)}); err != nil {
		t.Fatal(err)
	}
	got, err := h.twin(t).ParentOf(ctx, "exec_child_2")
	if err != nil || got.ParentID != "p" || len(got.Chain) != 0 {
		t.Fatalf("ParentOf = %+v, %v", got, err)
	}
	if _, err := h.s.ParentOf(ctx, "nobody"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("ParentOf(unlinked) = %v, want ErrNotFound", err)
	}
	kids, err := h.s.Children(ctx, "p", 10)
	if err != nil || len(kids) != 2 || kids[0].ChildID != "exec_child_1" || kids[1].ChildID != "exec_child_2" {
		t.Fatalf("Children = %+v, %v", kids, err)
	}
	if kids, err = h.s.Children(ctx, "p", 1); err != nil || len(kids) != 1 {
		t.Fatalf("Children limit 1 = %d, %v", len(kids), err)
	}
	if _, err := h.s.Children(ctx, "p", 0); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("Children limit 0 = %v, want ErrInvalid", err)
	}
	if _, _, err := h.s.LinkChild(ctx, &store.ChildLink{ChildID: "x"}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("LinkChild without parent = %v, want ErrInvalid", err)
	}
}
