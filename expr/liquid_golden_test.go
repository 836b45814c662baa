package expr

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestLiquidGoldens renders every template of testdata/liquid/cases.json and
// compares it with what the liquidjs npm package renders (expected.json,
// written by testdata/liquid/gen.js): users of notification services know
// Liquid as LiquidJS renders it.
func TestLiquidGoldens(t *testing.T) {
	t.Parallel()
	// A case with "differs" is a known difference (listed in docs/dsl.md):
	// Rune renders "rune" instead, and liquidjs must still render otherwise.
	var cases []struct {
		Name, Template string
		Rune           *string
		Differs        string
	}
	readJSON(t, "cases.json", &cases)
	var data map[string]any
	readJSON(t, "data.json", &data)
	var expected struct {
		Cases map[string]struct {
			Output *string
			Error  string
		}
	}
	readJSON(t, "expected.json", &expected)
	if len(cases) < 60 {
		t.Fatalf("%d golden cases, want at least 60", len(cases))
	}
	env := map[string]any{}
	for k, v := range data {
		if k == SubscriberVar {
			env[k] = v // a plain name, as the email and sms nodes set it
			continue
		}
		env["$"+k] = v
	}
	c := NewCompiler(Limits{})
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			want, ok := expected.Cases[tc.Name]
			if !ok || want.Output == nil {
				t.Fatalf("no golden output for %s (run testdata/liquid/gen.js): %+v", tc.Name, want)
			}
			v, err := c.Liquid(tc.Template)
			if err != nil {
				t.Fatalf("compile %q: %v", tc.Template, err)
			}
			got, err := v.Eval(env)
			if err != nil {
				t.Fatalf("render %q: %v", tc.Template, err)
			}
			if tc.Differs != "" {
				if got != *tc.Rune || got == *want.Output {
					t.Errorf("render %q (a known difference: %s)\n got: %q\nwant: %q (liquidjs: %q)", tc.Template, tc.Differs, got, *tc.Rune, *want.Output)
				}
				return
			}
			if got != *want.Output {
				t.Errorf("render %q\n got: %q\nwant: %q (liquidjs)", tc.Template, got, *want.Output)
			}
		})
	}
}

func readJSON(t *testing.T, name string, v any) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "liquid", name))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}
