package expr

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func testEnv() map[string]any {
	fetch := map[string]any{
		"status": 200.0,
		"body": map[string]any{
			"items": []any{
				map[string]any{"sku": "A1", "qty": 2.0},
				map[string]any{"sku": "B2", "qty": 3.0},
			},
			"users": []any{"ann", "bob"},
		},
	}
	return map[string]any{
		"$trigger": map[string]any{
			"x":          2.0,
			"name":       "ann",
			"first name": "Ann",
			"vip":        true,
			"nick":       nil,
			"total":      4.5,
			"tags":       []any{"a", "b"},
		},
		"$fetch_user": fetch,
		"$node":       map[string]any{"fetch_user": fetch},
		"$item":       map[string]any{"id": 7.0},
		"$item_index": 1,
		"$now":        "2024-05-01T10:00:00Z",
		"$execution":  map[string]any{"id": "ex1", "workflow_id": "wf", "attempt": 1},
	}
}

func eval(t *testing.T, c *Compiler, v any) (any, error) {
	t.Helper()
	val, err := c.Value(v)
	if err != nil {
		t.Fatalf("compile %q: %v", v, err)
	}
	return val.Eval(testEnv())
}

func TestValueTyping(t *testing.T) {
	c := NewCompiler(Limits{})
	tests := []struct {
		src  any
		want any
	}{
		// One {{ }} alone: the expression's JSON value.
		{"{{ $fetch_user.body.users }}", []any{"ann", "bob"}},
		{"  {{ $fetch_user.body.items[0] }}\n", map[string]any{"sku": "A1", "qty": 2.0}},
		{"{{ $trigger.x + 1 }}", 3.0},
		{"{{ $trigger.vip }}", true},
		{"{{ $trigger.nick }}", nil},
		{"{{ 1..3 }}", []any{1, 2, 3}},
		{"{{ len($trigger.tags) }}", 2},
		{`{{ {"a": {"b": 1}} }}`, map[string]any{"a": map[string]any{"b": 1}}},
		// Text around or between {{ }}: a string, non-strings as JSON.
		{"n={{ $trigger.x }}", "n=2"},
		{"{{ $trigger.x }}{{ $trigger.x }}", "22"},
		{"{{ $trigger.name }} has {{ $fetch_user.body.users }}", `ann has ["ann","bob"]`},
		{"obj: {{ $fetch_user.body.items[1] }}", `obj: {"qty":3,"sku":"B2"}`},
		{"v={{ $trigger.nick }} {{ $trigger.vip }} {{ $trigger.total }}", "v=null true 4.5"},
		{"{{ '}}' }}", "}}"},
		// Constants.
		{"plain text", "plain text"},
		{3.5, 3.5},
		{true, true},
		{nil, nil},
		{[]any{1.0, "{{ $trigger.x }}", map[string]any{"k": "{{ $trigger.name }}!"}}, []any{1.0, 2.0, map[string]any{"k": "ann!"}}},
		{map[string]any{"a": "{{ $trigger.tags }}", "b": []any{"x"}}, map[string]any{"a": []any{"a", "b"}, "b": []any{"x"}}},
	}
	for _, tt := range tests {
		got, err := eval(t, c, tt.src)
		if err != nil {
			t.Errorf("%q: %v", tt.src, err)
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%q = %#v, want %#v", tt.src, got, tt.want)
		}
	}
}

func TestExpressions(t *testing.T) {
	c := NewCompiler(Limits{})
	tests := []struct {
		src  string
		want any
	}{
		{"$trigger.total > 3", true},
		{"{{ $trigger.total > 3 }}", true},
		{`$trigger["first name"]`, "Ann"},
		{"$fetch_user.body.items[0].sku", "A1"},
		{"$fetch_user.body.items[-1].sku", "B2"},
		{"$node.fetch_user.body.items[1].qty", 3.0},
		{"$node.fetch_user.status == 200", true},
		{"$item.id + $item_index", 8.0},
		{"$execution.id", "ex1"},
		{"$trigger.name | upper()", "ANN"},
		{"{{ $trigger.name | upper() }}", "ANN"},
		{"$fetch_user.body.items | map(.qty) | sum()", 5.0},
		{"sum(map($fetch_user.body.items, .qty * 2))", 10.0},
		{"filter($fetch_user.body.items, .qty > 2)[0].sku", "B2"},
		{"len(filter($trigger.tags, # == 'a'))", 1},
		{"'a' in $trigger.tags", true},
		{`$trigger.name startsWith "a" and not $trigger.vip == false`, true},
		{"$trigger.name contains 'nn'", true},
		{"$trigger.tags[$item_index]", "b"},
		{"$trigger.missing ?? 'dflt'", "dflt"},
		{"$trigger.missing.deeper ?? 'dflt'", "dflt"},
		{"$error ?? 'no error'", "no error"},
		{"$error?.message", nil},
		{"$trigger.nick ?? 'anon'", "anon"},
		{"reduce($fetch_user.body.items, #acc + .qty, 0)", 5.0},
		{"let n = $trigger.x; n * n", 4.0},
		{"date($now).Year()", 2024},
		{"$trigger.name + '!'", "ann!"},
		{"$trigger.x > 1 ? 'big' : 'small'", "big"},
		{"toJSON($trigger.tags)", "[\n  \"a\",\n  \"b\"\n]"},
	}
	for _, tt := range tests {
		v, err := c.Expression(tt.src)
		if err != nil {
			t.Errorf("compile %q: %v", tt.src, err)
			continue
		}
		got, err := v.Eval(testEnv())
		if err != nil {
			t.Errorf("%q: %v", tt.src, err)
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%q = %#v (%T), want %#v", tt.src, got, got, tt.want)
		}
	}
}

func TestMissingPaths(t *testing.T) {
	c := NewCompiler(Limits{})
	tests := []struct{ src, want string }{
		{"$fetch_user.body.itemz", `$fetch_user.body.itemz: no such key "itemz"`},
		{"$nope", "$nope: not defined"},
		{"$nope.x", "$nope: not defined"},
		{"$node.fetch_usr.body", `$node.fetch_usr: no such key "fetch_usr"`},
		{"$fetch_user.body.items[5].sku", "$fetch_user.body.items[5]: index 5 out of range (length 2)"},
		{`$trigger["last name"]`, `$trigger["last name"]: no such key "last name"`},
		{"$trigger.name.first", `$trigger.name.first: cannot read key "first" of a string`},
		{"$trigger.nick.first", `$trigger.nick.first: cannot read key "first" of null`},
		{"$trigger.tags[$trigger.x]", "$trigger.tags[$trigger.x]: index 2 out of range (length 2)"},
		{"map($fetch_user.body.items, .price)", `#.price: no such key "price"`},
		{"$trigger.x + $trigger.y", `$trigger.y: no such key "y"`},
		{"upper($trigger.nam)", `$trigger.nam: no such key "nam"`},
		{"{{ $trigger.nam }}", `$trigger.nam: no such key "nam"`},
	}
	for _, tt := range tests {
		v, err := c.Expression(tt.src)
		if err != nil {
			t.Errorf("compile %q: %v", tt.src, err)
			continue
		}
		got, err := v.Eval(testEnv())
		if err == nil {
			t.Errorf("%q = %#v, want error %q", tt.src, got, tt.want)
			continue
		}
		if err.Error() != tt.want {
			t.Errorf("%q: error %q, want %q", tt.src, err, tt.want)
		}
		var pe *PathError
		if !errors.As(err, &pe) {
			t.Errorf("%q: error %T is not a *PathError", tt.src, err)
		}
	}
	// In a mixed template the error is the same: never an empty string.
	v, err := c.Value("Hello {{ $trigger.nickname }}!")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := v.Eval(testEnv()); err == nil || !strings.Contains(err.Error(), "$trigger.nickname") {
		t.Errorf("mixed template with missing key = %#v, %v; want error naming the path", got, err)
	}
}

func TestCompileErrors(t *testing.T) {
	c := NewCompiler(Limits{})
	tests := []struct {
		src       any
		wantMsg   string
		wantCol   int
		wantLine  int
		viaString bool
	}{
		{src: "{{ $trigger.x +* 2 }}", wantMsg: "unexpected token", wantCol: 16},
		{src: "total: {{ $trigger.x + }}", wantMsg: "unexpected", wantCol: 23},
		{src: "{{ foo + 1 }}", wantMsg: "unknown name foo", wantCol: 4},
		{src: "{{ nosuchfn($trigger) }}", wantMsg: "unknown function nosuchfn", wantCol: 4},
		{src: "abc {{ $trigger.x", wantMsg: "unclosed {{", wantCol: 5},
		{src: "{{ }}", wantMsg: "empty expression", wantCol: 3},
		{src: "{{ let $t = 1; $t }}", wantMsg: "reserved", wantCol: 8},
		{src: "line one\n  {{ 1 + + }}", wantMsg: "unexpected", wantLine: 2, wantCol: 11},
	}
	for _, tt := range tests {
		_, err := c.Value(tt.src)
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("%q: error %v (%T), want a *SyntaxError", tt.src, err, err)
			continue
		}
		if !strings.Contains(se.Msg, tt.wantMsg) || se.Column != tt.wantCol || (tt.wantLine != 0 && se.Line != tt.wantLine) {
			t.Errorf("%q: %v (line %d col %d), want %q at line %d col %d", tt.src, err, se.Line, se.Column, tt.wantMsg, tt.wantLine, tt.wantCol)
		}
		if !strings.Contains(err.Error(), "column") {
			t.Errorf("%q: error %q does not say where", tt.src, err)
		}
	}
	// Errors inside arrays and objects name where they are.
	_, err := c.Value(map[string]any{"a": []any{"ok", "{{ 1 + }}"}})
	if err == nil || !strings.HasPrefix(err.Error(), ".a: [1]: ") {
		t.Errorf("nested error = %v, want it to start with the path .a: [1]:", err)
	}
	if err := Check(map[string]any{"url": "https://x/{{ $trigger.id }}", "n": 3.0}); err != nil {
		t.Errorf("Check(valid) = %v", err)
	}
	if err := Check("{{ $trigger.id +* }}"); err == nil {
		t.Error("Check(invalid) = nil")
	}
}

func TestRunTimeErrorsSayWhere(t *testing.T) {
	c := NewCompiler(Limits{})
	v, err := c.Value("x {{ $trigger.name + 1 }}")
	if err != nil {
		t.Fatal(err)
	}
	_, err = v.Eval(testEnv())
	if err == nil || !strings.Contains(err.Error(), "column") {
		t.Errorf("type error = %v, want an error with a column", err)
	}
	v, _ = c.Expression("1 / 0")
	if _, err := v.Eval(nil); err == nil {
		t.Error("1/0 evaluated to a non-JSON number without error")
	}
}

func TestLimits(t *testing.T) {
	big := make([]any, 1000)
	for i := range big {
		big[i] = float64(i)
	}
	env := map[string]any{"$trigger": map[string]any{"big": big, "s": strings.Repeat("x", 1000)}}
	tests := []struct {
		name   string
		limits Limits
		src    string
		limit  string
	}{
		{"source too long", Limits{MaxSource: 20}, "{{ $trigger.s + '0123456789' }}", "MaxSource"},
		{"too many nodes", Limits{MaxNodes: 5}, "{{ 1 + 2 + 3 + 4 + 5 + 6 }}", "MaxNodes"},
		{"result too big", Limits{MaxResultBytes: 500}, "{{ $trigger.big }}", "MaxResultBytes"},
		{"mixed result too big", Limits{MaxResultBytes: 500}, "big: {{ $trigger.s }}", "MaxResultBytes"},
		{"huge range", Limits{}, "{{ map(1..1000000000, #) }}", "MaxMemory"},
		{"repeat", Limits{}, "{{ repeat($trigger.s, 1000000) }}", "MaxMemory"},
		{"doubling strings", Limits{}, "{{ reduce($trigger.big, #acc + #acc, 'ab') }}", "MaxMemory"},
		{"doubling with let", Limits{}, "{{ let a = $trigger.s + $trigger.s; let b = a + a; let c = b + b; let d = c + c; let e = d + d; let f = e + e; let g = f + f; let h = g + g; let i = h + h; let j = i + i; let k = j + j; let l = k + k; let m = l + l; let n = m + m; len(n + n) }}", "MaxMemory"},
		{"shared arrays", Limits{}, "{{ let a = [$trigger.big, $trigger.big]; let b = [a, a]; let c = [b, b]; let d = [c, c]; let e = [d, d]; let f = [e, e]; let g = [f, f]; let h = [g, g]; let i = [h, h]; let j = [i, i]; let k = [j, j]; let l = [k, k]; len(toJSON(l)) }}", "MaxMemory"},
		{"nested loops: iterations", Limits{MaxIterations: 100_000, MaxDuration: time.Hour}, "{{ sum($trigger.big, sum($trigger.big, sum($trigger.big, #))) }}", "MaxIterations"},
		{"nested loops: clock", Limits{MaxIterations: 1 << 40, MaxDuration: 20 * time.Millisecond}, "{{ sum($trigger.big, sum($trigger.big, sum($trigger.big, #))) }}", "MaxDuration"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.limits.MaxDuration == 0 {
				// Only the limit under test may stop it, however slow the machine.
				tt.limits.MaxDuration = time.Minute
			}
			c := NewCompiler(tt.limits)
			v, err := c.Value(tt.src)
			if err == nil {
				start := time.Now()
				_, err = v.Eval(env)
				if d := time.Since(start); d > 10*time.Second {
					t.Errorf("took %v to stop", d)
				}
			}
			var le *LimitError
			if !errors.As(err, &le) || le.Limit != tt.limit {
				t.Fatalf("error %v, want a LimitError for %s", err, tt.limit)
			}
			if !strings.Contains(err.Error(), tt.limit) {
				t.Errorf("error %q does not name the limit", err)
			}
		})
	}
}

func TestConstantsDoNotAllocate(t *testing.T) {
	c := NewCompiler(Limits{})
	for _, src := range []any{"plain", 1.5, map[string]any{"a": []any{"x", 2.0}}} {
		v, err := c.Value(src)
		if err != nil {
			t.Fatal(err)
		}
		env := testEnv()
		if n := testing.AllocsPerRun(100, func() { _, _ = v.Eval(env) }); n != 0 {
			t.Errorf("%v: %v allocations per Eval, want 0", src, n)
		}
	}
}

func TestConcurrentEval(t *testing.T) {
	c := NewCompiler(Limits{})
	v, err := c.Value("{{ map($fetch_user.body.items, .sku + '-' + string($item_index)) }}")
	if err != nil {
		t.Fatal(err)
	}
	l, err := c.Liquid("{% for i in $fetch_user.body.items %}{{ i.sku }}{% endfor %}")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	for g := 0; g < 8; g++ {
		go func() {
			env := testEnv()
			for i := 0; i < 200; i++ {
				got, err := v.Eval(env)
				if err == nil && !reflect.DeepEqual(got, []any{"A1-1", "B2-1"}) {
					err = errors.New("wrong result")
				}
				if err == nil {
					var s any
					s, err = l.Eval(env)
					if err == nil && s != "A1B2" {
						err = errors.New("wrong liquid result")
					}
				}
				if err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
	}
	for g := 0; g < 8; g++ {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

func TestLiquid(t *testing.T) {
	c := NewCompiler(Limits{})
	tests := []struct{ src, want string }{
		{"Hi {{ $trigger.name | upcase }}", "Hi ANN"},
		{`{{ $trigger["first name"] }}`, "Ann"},
		{"{% if $trigger.vip %}VIP{% else %}regular{% endif %}", "VIP"},
		{"{% if $trigger.total > 10 %}big{% else %}small{% endif %}", "small"},
		{"{% for i in $fetch_user.body.items %}{{ i.sku }}x{{ i.qty }}{% unless forloop.last %}, {% endunless %}{% endfor %}", "A1x2, B2x3"},
		{"{{ $trigger.nickname | default: 'friend' }}", "friend"},
		{"{{ $now | date: '%Y-%m-%d' }}", "2024-05-01"},
		{"{{ $node.fetch_user.body.users | join: '+' }}", "ann+bob"},
		{"{% assign n = $trigger.name | capitalize %}{{ n }}", "Ann"},
		{"Price: $5 {{ '$trigger' }}", "Price: $5 $trigger"},
		{"{% raw %}{{ $trigger }}{% endraw %}", "{{ $trigger }}"},
		{"{% for i in (1..3) %}{{ i }}{% endfor %}", "123"},
		{"{% capture c %}{{ $trigger.name }}!{% endcapture %}{{ c }}", "ann!"},
	}
	for _, tt := range tests {
		v, err := c.Liquid(tt.src)
		if err != nil {
			t.Errorf("compile %q: %v", tt.src, err)
			continue
		}
		got, err := v.Eval(testEnv())
		if err != nil {
			t.Errorf("%q: %v", tt.src, err)
			continue
		}
		if got != tt.want {
			t.Errorf("%q = %q, want %q", tt.src, got, tt.want)
		}
	}
}

func TestLiquidErrors(t *testing.T) {
	c := NewCompiler(Limits{})
	v, err := c.Liquid("Hi {{ $nope.name }}")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Eval(testEnv()); err == nil || err.Error() != "$nope: not defined" {
		t.Errorf("undefined name: %v", err)
	}
	for _, src := range []string{"{% include 'secrets.txt' %}", "{% render 'x' %}", "{{ $trigger.name ", "{% if $trigger.vip %}no end"} {
		if _, err := c.Liquid(src); err == nil {
			t.Errorf("%q compiled", src)
		} else if strings.Contains(err.Error(), liquidPrefix) {
			t.Errorf("%q: error %q shows the rewritten name", src, err)
		}
	}
}

func TestLiquidLimits(t *testing.T) {
	big := make([]any, 1000)
	env := map[string]any{"$trigger": map[string]any{"big": big, "s": strings.Repeat("%", 1000)}}
	tests := []struct {
		name   string
		limits Limits
		src    string
		limit  string
	}{
		{"output", Limits{MaxResultBytes: 100}, "{% for i in $trigger.big %}xx{% endfor %}", "MaxResultBytes"},
		{"silent loops: iterations", Limits{MaxIterations: 10000, MaxDuration: time.Hour}, "{% for a in $trigger.big %}{% for b in $trigger.big %}{% for c in $trigger.big %}{% endfor %}{% endfor %}{% endfor %}", "MaxIterations"},
		{"silent loops: clock", Limits{MaxIterations: 1 << 40, MaxDuration: 20 * time.Millisecond}, "{% for a in $trigger.big %}{% for b in $trigger.big %}{% for c in $trigger.big %}{% endfor %}{% endfor %}{% endfor %}", "MaxDuration"},
		{"growing filters", Limits{}, "{{ $trigger.s" + strings.Repeat(" | replace: '%', '%%'", 20) + " | size }}", "MaxMemory"},
		{"huge range into a filter", Limits{}, "{{ (1..999999999) | join: ',' }}", "MaxMemory"},
		{"doubling captures", Limits{}, "{% capture s %}{{ $trigger.s }}{% endcapture %}" + strings.Repeat("{% capture s %}{{ s }}{{ s }}{% endcapture %}", 20) + "{{ s | size }}", "MaxMemory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.limits.MaxDuration == 0 {
				// Only the limit under test may stop it, however slow the machine.
				tt.limits.MaxDuration = time.Minute
			}
			c := NewCompiler(tt.limits)
			v, err := c.Liquid(tt.src)
			if err != nil {
				t.Fatal(err)
			}
			_, err = v.Eval(env)
			var le *LimitError
			if !errors.As(err, &le) || le.Limit != tt.limit {
				t.Fatalf("error %v, want a LimitError for %s", err, tt.limit)
			}
		})
	}
}

func TestModuloOnJSONNumbers(t *testing.T) {
	c := NewCompiler(Limits{})
	env := map[string]any{"$item": 7.0, "$half": 7.5}
	for src, want := range map[string]any{"$item % 2": 1, "$item % 2 == 1": true, "$half % 2": 1.5, "10 % 4": 2} {
		v, err := c.Expression(src)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		got, err := v.Eval(env)
		if err != nil || got != want {
			t.Fatalf("%s = %v (%T), %v; want %v", src, got, got, err, want)
		}
	}
	v, _ := c.Expression("$item % 0")
	if _, err := v.Eval(env); err == nil || !strings.Contains(err.Error(), "by zero") {
		t.Fatalf("%% 0: %v, want an error", err)
	}
}

func TestNullIsNil(t *testing.T) {
	v, err := NewCompiler(Limits{}).Expression("$trigger.x == null")
	if err != nil {
		t.Fatal(err)
	}
	got, err := v.Eval(map[string]any{"$trigger": map[string]any{"x": nil}})
	if err != nil || got != true {
		t.Fatalf("$trigger.x == null: %v, %v", got, err)
	}
}

// A panic in a parser Rune does not own is the template's error, not the
// process's crash (issue 12, found by FuzzCompileEval; the crasher is kept
// under testdata/fuzz/FuzzCompileEval).
func TestLiquidLexerPanicIsAnError(t *testing.T) {
	c := NewCompiler(Limits{})
	_, err := c.Liquid("Hi {{ 10000000000000000000 }}")
	var pe *ParserPanicError
	if !errors.As(err, &pe) {
		t.Fatalf("Liquid(out-of-range integer) = %v, want a *ParserPanicError", err)
	}
	if !strings.Contains(err.Error(), "liquid parse") {
		t.Errorf("error %q does not say which parser failed", err)
	}
	if v, err := c.Liquid("Hi {{ 42 }}"); err != nil {
		t.Fatalf("the compiler is unusable after the panic: %v", err)
	} else if out, err := v.Eval(map[string]any{}); err != nil || out != "Hi 42" {
		t.Fatalf("Eval = %v, %v; want Hi 42", out, err)
	}
}
