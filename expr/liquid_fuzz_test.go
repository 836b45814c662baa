package expr

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// FuzzLiquid renders arbitrary templates against the goldens' data: no input
// may panic, and a rendering that succeeds stays within the limits.
func FuzzLiquid(f *testing.F) {
	raw, err := os.ReadFile(filepath.Join("testdata", "liquid", "cases.json"))
	if err != nil {
		f.Fatal(err)
	}
	var cases []struct{ Template string }
	if err := json.Unmarshal(raw, &cases); err != nil {
		f.Fatal(err)
	}
	for _, c := range cases {
		f.Add(c.Template)
	}
	for _, s := range []string{
		"{% for i in (1..100000000) %}{{ i }}{% endfor %}",
		"{% assign s = 'xxxxxxxx' %}{% for i in (1..64) %}{% assign s = s | append: s %}{% endfor %}{{ s }}",
		"{{ $trigger.long | split: '' | join: $trigger.long | split: '' | join: $trigger.long }}",
		"{% capture c %}{% for i in (1..5000) %}{{ $trigger.long }}{% endfor %}{% endcapture %}{{ c }}{{ c }}",
		"{{ $trigger.tags | concat: $trigger.tags | concat: $trigger.tags }}",
		"{% raw %}{{", "{% if %}", "{{ | }}", "{% for %}{% endfor %}", "{% case %}{% when %}",
	} {
		f.Add(s)
	}
	var data map[string]any
	raw, err = os.ReadFile(filepath.Join("testdata", "liquid", "data.json"))
	if err != nil {
		f.Fatal(err)
	}
	if err := json.Unmarshal(raw, &data); err != nil {
		f.Fatal(err)
	}
	env := map[string]any{"$trigger": data["trigger"], "$send": data["send"]}
	lim := Limits{MaxResultBytes: 64 << 10, MaxMemory: 1 << 20, MaxIterations: 100_000, MaxDuration: 200 * time.Millisecond}
	c := NewCompiler(lim)
	f.Fuzz(func(t *testing.T, src string) {
		watchdog := time.AfterFunc(8*time.Second, func() { panic(fmt.Sprintf("hang on %q", src)) })
		defer watchdog.Stop()
		v, err := c.Liquid(src)
		if err != nil {
			return
		}
		start := time.Now()
		out, err := v.Eval(env)
		// A loaded machine stretches the clock checks; 5 s is far past the
		// 200 ms limit but catches a rendering that ignores it.
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("rendering %q took %s (MaxDuration %s)", src, d, lim.MaxDuration)
		}
		if err != nil {
			return
		}
		if s, _ := out.(string); len(s) > lim.MaxResultBytes {
			t.Fatalf("rendering %q gave %d bytes (MaxResultBytes %d)", src, len(s), lim.MaxResultBytes)
		}
	})
}
