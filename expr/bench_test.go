package expr

import (
	"testing"
	"time"
)

func benchValue(b *testing.B, src string) {
	c := NewCompiler(Limits{})
	v, err := c.Value(src)
	if err != nil {
		b.Fatal(err)
	}
	env := testEnv()
	if _, err := v.Eval(env); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := v.Eval(env); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEvalWhole(b *testing.B) { benchValue(b, "{{ $trigger.x + 1 }}") }

func BenchmarkEvalMixed(b *testing.B) {
	benchValue(b, "Hello {{ $trigger.name }}, your order {{ $fetch_user.body.items[0].sku }} costs {{ $trigger.total }}")
}

func BenchmarkEvalLoop(b *testing.B) {
	benchValue(b, "{{ sum(map($fetch_user.body.items, .qty * 2)) }}")
}

func BenchmarkEvalConstant(b *testing.B) { benchValue(b, "no templates here") }

func BenchmarkLiquid(b *testing.B) {
	c := NewCompiler(Limits{})
	v, err := c.Liquid("Hi {{ $trigger.name | upcase }}{% if $trigger.vip %} (VIP){% endif %}: {% for i in $fetch_user.body.items %}{{ i.sku }} {% endfor %}")
	if err != nil {
		b.Fatal(err)
	}
	env := testEnv()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Eval(env); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCompile(b *testing.B) {
	c := NewCompiler(Limits{})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Value("Hello {{ $trigger.name | upper() }}, {{ len($fetch_user.body.items) }}"); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzCompileEval compiles arbitrary sources as values, expressions and
// Liquid templates and evaluates what compiles: nothing may panic, and
// evaluation must stop within the limits.
func FuzzCompileEval(f *testing.F) {
	for _, s := range []string{
		"{{ $trigger.x + 1 }}", "a {{ $trigger.name }} b", "{{ $fetch_user.body.items[0].sku }}",
		"{{ map(1..10, # * 2) }}", "$trigger.tags | map(upper(#)) | join(',')", "{{ $nope ?? 1 }}",
		"{{ {'a': [1, 2, {'b': $item}]} }}", "{{ $trigger?.x?.y }}", "{{ let a = 1; a + $item_index }}",
		"{% for i in $trigger.tags %}{{ i | upcase }}{% endfor %}", "{{ $trigger['first name'] | default: 'x' }}",
		"{{ reduce($trigger.tags, #acc + #, '') }}", "{{ date($now).Year() }}", "{{ 1..3 | sortBy(-#) }}",
	} {
		f.Add(s)
	}
	c := NewCompiler(Limits{MaxDuration: 50 * time.Millisecond, MaxIterations: 100_000, MaxMemory: 1 << 20})
	f.Fuzz(func(t *testing.T, src string) {
		env := testEnv()
		if v, err := c.Value(src); err == nil {
			_, _ = v.Eval(env)
		}
		if v, err := c.Expression(src); err == nil {
			_, _ = v.Eval(env)
		}
		if v, err := c.Liquid(src); err == nil {
			_, _ = v.Eval(env)
		}
		_ = Check(src)
	})
}
