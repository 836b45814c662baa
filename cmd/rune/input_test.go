package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Bad input is refused by `rune run` before anything runs, naming the path
// of the offending value (issue 12, items 6 and 8).
func TestRunRefusesBadInput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	deep := filepath.Join(dir, "deep.json")
	if err := os.WriteFile(deep, []byte(strings.Repeat(`{"a":`, 10_000)+"1"+strings.Repeat("}", 10_000)), 0o600); err != nil {
		t.Fatal(err)
	}
	badUTF8 := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(badUTF8, []byte("{\"user\": {\"name\": \"Zo\xeb\"}}"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ input, want string }{
		{"@" + deep, "input" + strings.Repeat(".a", 64) + ": nested deeper than 64 levels"},
		{"@" + badUTF8, "input.user.name: not valid UTF-8"},
		{"{\"k\": [\"\xff\"]}", "input.k[0]: not valid UTF-8"},
	} {
		code, stdout, stderr := runCLI(t, nil, "run", "../../examples/hello.json", "--input", tc.input)
		if code != exitInvalid || !strings.Contains(stderr, tc.want) {
			t.Errorf("rune run --input %.30q: exit %d, stderr %q; want exit %d naming %q", tc.input, code, stderr, exitInvalid, tc.want)
		}
		if strings.Contains(stdout, "execution") {
			t.Errorf("rune run --input %.30q ran the workflow: %s", tc.input, stdout)
		}
	}
}

// A definition with non-UTF-8 in a parameter is invalid, not silently
// repaired with U+FFFD.
func TestValidateRefusesNonUTF8Parameters(t *testing.T) {
	t.Parallel()
	def, err := os.ReadFile("../../examples/hello.json")
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(def, []byte(`"parameters"`))
	if i < 0 {
		t.Fatal("examples/hello.json has no parameters")
	}
	j := i + bytes.IndexByte(def[i:], '{') + 1
	bad := append(append(append([]byte{}, def[:j]...), []byte("\"note\": \"caf\xe9\", ")...), def[j:]...)
	path := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(path, bad, 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCLI(t, nil, "validate", path)
	if code != exitInvalid || !strings.Contains(stderr, ".parameters.note: not valid UTF-8") {
		t.Errorf("rune validate: exit %d, stderr %q; want %d naming .parameters.note", code, stderr, exitInvalid)
	}
}
