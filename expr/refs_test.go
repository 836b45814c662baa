package expr

import (
	"slices"
	"testing"
)

func TestRefsListsTheContextNamesRead(t *testing.T) {
	t.Parallel()
	c := NewCompiler(Limits{})
	for _, tc := range []struct {
		v    any
		want []string
	}{
		{"no expression", nil},
		{"{{ $trigger.name }}", []string{"$trigger"}},
		{"Hi {{ $trigger.name }}, {{ $fetch.body[0].x ?? $nosuch }}!", []string{"$trigger", "$fetch", "$nosuch"}},
		{map[string]any{"a": "{{ $node.fetch.status }}", "b": []any{"{{ $node[$trigger.k] }}", 1}}, []string{"$node", "$node.fetch", "$trigger"}},
		{"{{ let x = $a; x + $b.y }}", []string{"$a", "$b"}},
		{"{{ map($items.list, #.price) }}", []string{"$items"}},
		{"{{ $env['$trigger'] }}", nil}, // $env is the whole context: no name of it is certain
	} {
		v, err := c.Value(tc.v)
		if err != nil {
			t.Fatalf("%v: %v", tc.v, err)
		}
		if got := Refs(v); !slices.Equal(got, tc.want) {
			t.Errorf("Refs(%v) = %q, want %q", tc.v, got, tc.want)
		}
	}
	lv, err := c.Liquid("Hi {{ $trigger.name | upcase }} {% if $vars.x %}{{ $nosuch }}{% endif %}")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := Refs(lv), []string{"$trigger", "$vars", "$nosuch"}; !slices.Equal(got, want) {
		t.Errorf("Liquid refs %q, want %q", got, want)
	}
	if got, err := CheckExpressionRefs("$check.total > 3 && $trigger.ok"); err != nil || !slices.Equal(got, []string{"$check", "$trigger"}) {
		t.Errorf("CheckExpressionRefs: %q, %v", got, err)
	}
}
