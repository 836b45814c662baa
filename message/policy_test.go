package message

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestCheckJSONNamesThePath(t *testing.T) {
	deep := strings.Repeat(`{"a":`, 10_000) + "1" + strings.Repeat("}", 10_000)
	for _, tc := range []struct {
		name, doc, path, problem string
	}{
		{"invalid UTF-8 in a value", "{\"user\": {\"names\": [\"ok\", \"bad \xff\"]}}", `input.user.names[1]`, "not valid UTF-8"},
		{"invalid UTF-8 in a key", "{\"a\": 1, \"k\xc3\": 2}", `input["k\xc3"]`, "key not valid UTF-8"},
		{"unpaired surrogate escape", `{"x": [1, {"y": "\ud800"}]}`, `input.x[1].y`, "surrogate"},
		{"10,000 levels deep", deep, "input" + strings.Repeat(".a", MaxDepth), "nested deeper than 64 levels"},
		{"arrays too deep", strings.Repeat("[", 65) + strings.Repeat("]", 65), "input" + strings.Repeat("[0]", 64), "nested deeper"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckJSON("input", []byte(tc.doc))
			var pe *PolicyError
			if !errors.As(err, &pe) {
				t.Fatalf("CheckJSON = %v, want a *PolicyError", err)
			}
			if pe.Path != tc.path || !strings.Contains(pe.Problem, tc.problem) {
				t.Errorf("CheckJSON = %q at %q, want %q at %q", pe.Problem, pe.Path, tc.problem, tc.path)
			}
		})
	}
}

func TestCheckJSONAccepts(t *testing.T) {
	for _, doc := range []string{
		`{"name": "Zoë 🎉", "esc": "\u00e9 \ud83c\udf89 \"quoted\" \\ud800", "fffd": "\ufffd �"}`,
		strings.Repeat("[", 64) + strings.Repeat("]", 64),
		`"just a string"`, `[]`, `{}`,
	} {
		if err := CheckJSON("input", []byte(doc)); err != nil {
			t.Errorf("CheckJSON(%.40q) = %v, want nil", doc, err)
		}
	}
	if err := CheckJSON("input", make([]byte, MaxInputSize+1)); err == nil || !strings.Contains(err.Error(), "over the limit") {
		t.Errorf("CheckJSON(oversized) = %v, want a size error", err)
	}
}

func TestCheckValue(t *testing.T) {
	var deep any = 1.0
	for range MaxDepth + 1 {
		deep = []any{deep}
	}
	for _, tc := range []struct {
		v    any
		path string
	}{
		{map[string]any{"a": []any{"ok", "bad\xff"}}, "input.a[1]"},
		{map[string]any{"k\xfe": 1.0}, `input["k\xfe"]`},
		{deep, "input" + strings.Repeat("[0]", MaxDepth)},
	} {
		var pe *PolicyError
		if err := CheckValue("input", tc.v); !errors.As(err, &pe) || pe.Path != tc.path {
			t.Errorf("CheckValue = %v, want a *PolicyError at %s", err, tc.path)
		}
	}
	if err := CheckValue("input", map[string]any{"a": []any{1.0, "é"}}); err != nil {
		t.Errorf("CheckValue(valid) = %v", err)
	}
}

// Messages off the broker meet the same policy (with room for their
// envelope) and name no fields they do not have.
func TestDecodeRefusesBadInputAndUnknownFields(t *testing.T) {
	good, err := json.Marshal(validExecution())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeExecution(good); err != nil {
		t.Fatalf("valid message: %v", err)
	}
	withField := strings.Replace(string(good), `{`, `{"schema_version": 99, `, 1)
	if _, err := DecodeExecution([]byte(withField)); err == nil || !strings.Contains(err.Error(), `unknown field "schema_version"`) {
		t.Errorf("unknown field: %v", err)
	}
	deep := strings.Replace(string(good), `"accumulated_context":{`, `"accumulated_context":{"$deep":`+strings.Repeat(`{"a":`, 10_000)+"1"+strings.Repeat("}", 10_000)+`,`, 1)
	if _, err := DecodeExecution([]byte(deep)); err == nil || !strings.Contains(err.Error(), "nested deeper") {
		t.Errorf("10,000-deep context: %v", err)
	}
	bad := strings.Replace(string(good), `"accumulated_context":{`, "\"accumulated_context\":{\"$x\":\"\xff\",", 1)
	if _, err := DecodeExecution([]byte(bad)); err == nil || !strings.Contains(err.Error(), `NodeExecution.accumulated_context.$x: not valid UTF-8`) {
		t.Errorf("invalid UTF-8: %v", err)
	}
	if _, err := DecodeExecution(append(good, []byte(` {}`)...)); err == nil {
		t.Error("trailing data accepted")
	}
}

// FuzzCheckJSON: CheckJSON never panics, and JSON it accepts decodes to a
// value CheckValue accepts too (the raw and the decoded checks agree).
func FuzzCheckJSON(f *testing.F) {
	for _, s := range []string{`{"a": [1, "x", {"b": null}]}`, "\"\xff\"", `"\ud800"`, `[[[[]]]]`, `{"k\u00e9": "\ud83c\udf89"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		err := CheckJSON("input", data)
		var v any
		if err != nil || json.Unmarshal(data, &v) != nil {
			return
		}
		if err := CheckValue("input", v); err != nil {
			t.Fatalf("CheckJSON accepted %q, CheckValue refused its value: %v", data, err)
		}
	})
}
