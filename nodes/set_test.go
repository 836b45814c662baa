package nodes

import (
	"reflect"
	"testing"

	"github.com/rune-org/rune/workflow"
)

func TestSetCheck(t *testing.T) {
	wantProblems(t, checkNode(t, workflow.Node{ID: "n", Type: "set"}), map[string]string{"nodes[1].parameters.values": "required"})
	wantProblems(t, checkNode(t, workflow.Node{ID: "n", Type: "set", Parameters: map[string]any{"values": []any{}}}),
		map[string]string{"nodes[1].parameters.values": "must be an object"})
	wantProblems(t, checkNode(t, workflow.Node{ID: "n", Type: "set", Parameters: map[string]any{
		"values": map[string]any{"total": "{{ $trigger.x + }}", "ok": "fine", "first name": []any{"{{ nope }}"}},
		"keep":   []any{"total", "missing", 3.0},
	}}), map[string]string{
		"nodes[1].parameters.values.total":         "column",
		`nodes[1].parameters.values["first name"]`: "unknown name nope",
		"nodes[1].parameters.keep[1]":              `"missing" is not one of the values`,
		"nodes[1].parameters.keep[2]":              "must be a string",
	})
}

func TestSetRun(t *testing.T) {
	reg := NewRegistry(Options{})
	r := compileNode(t, reg, workflow.Node{ID: "n", Type: "set", Parameters: map[string]any{"values": map[string]any{
		"total":    "{{ sum(map($trigger.items, .price * .qty)) }}",
		"count":    "{{ len($trigger.items) }}",
		"note":     "order of {{ len($trigger.items) }} items",
		"discount": 0.1,
		"flags":    []any{true, "{{ $trigger.vip }}"},
		"nested":   map[string]any{"who": "{{ $trigger.name | upper() }}"},
	}}})
	env := map[string]any{"$trigger": map[string]any{
		"name": "ann", "vip": true,
		"items": []any{map[string]any{"price": 10.0, "qty": 2.0}, map[string]any{"price": 5.0, "qty": 1.0}},
	}}
	res, err := run(t, r, env)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"total": 25.0, "count": 2, "note": "order of 2 items", "discount": 0.1,
		"flags": []any{true, true}, "nested": map[string]any{"who": "ANN"},
	}
	if !reflect.DeepEqual(res.Output, want) {
		t.Errorf("output %#v\nwant %#v", res.Output, want)
	}
	if res.Route != nil {
		t.Errorf("route %v, want nil (every edge)", res.Route)
	}

	kept := compileNode(t, reg, workflow.Node{ID: "n", Type: "set", Parameters: map[string]any{
		"values": map[string]any{"a": 1.0, "b": "{{ $trigger.name }}"}, "keep": []any{"b"}}})
	res, err = run(t, kept, env)
	if err != nil || !reflect.DeepEqual(res.Output, map[string]any{"b": "ann"}) {
		t.Errorf("keep: %v, %v", res.Output, err)
	}

	missing := compileNode(t, reg, workflow.Node{ID: "n", Type: "set", Parameters: map[string]any{
		"values": map[string]any{"left": "{{ $trigger.stock.warehouse_b }}"}}})
	_, err = run(t, missing, env)
	ne := nodeError(t, err, CodeExpression, false)
	if ne.Message != `parameters.values.left: $trigger.stock: no such key "stock"` {
		t.Errorf("message %q", ne.Message)
	}
}
