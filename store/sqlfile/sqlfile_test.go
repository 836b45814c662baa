package sqlfile

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	q, err := Parse("-- header comment\n\n-- name: a\nSELECT 1\n  FROM x;\n-- name: b\n-- why b\nSELECT 2\n")
	if err != nil {
		t.Fatal(err)
	}
	if q["a"] != "SELECT 1\n  FROM x;" || q["b"] != "-- why b\nSELECT 2" || len(q) != 2 {
		t.Errorf("Parse = %q", q)
	}
	for src, want := range map[string]string{
		"SELECT 1\n-- name: a\nSELECT 2":             "SQL before the first",
		"-- name: a\nSELECT 1\n-- name: a\nSELECT 2": `query "a" defined twice`,
		"-- name: a\n\n-- name: b\nSELECT 1":         `query "a" is empty`,
		"-- name:\nSELECT 1":                         "a name is missing",
	} {
		if _, err := Parse(src); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want %q", src, err, want)
		}
	}
}
