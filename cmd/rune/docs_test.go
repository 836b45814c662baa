package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// jsonBlock is a fenced JSON example of a doc and the fenced block after it.
type jsonBlock struct {
	where string // file:line
	text  string
	next  string // the next fenced block's text, "" at the end
}

var fence = regexp.MustCompile("(?s)```([a-z]*)\n(.*?)```")

func docBlocks(t *testing.T) []jsonBlock {
	t.Helper()
	paths, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	paths = append(paths, "../../README.md", "../../examples/README.md")
	var out []jsonBlock
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		s := string(raw)
		ms := fence.FindAllStringSubmatchIndex(s, -1)
		for i, m := range ms {
			if s[m[2]:m[3]] != "json" {
				continue
			}
			b := jsonBlock{where: filepath.Base(p) + ":" + itoa(strings.Count(s[:m[0]], "\n")+1), text: s[m[4]:m[5]]}
			if i+1 < len(ms) {
				b.next = s[ms[i+1][4]:ms[i+1][5]]
			}
			out = append(out, b)
		}
	}
	return out
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// TestDocExamplesValidate runs every workflow definition the docs show
// through `rune validate`: each is valid, but for the sample of problems,
// whose output is exactly what the docs print after it.
func TestDocExamplesValidate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	n := 0
	for _, b := range docBlocks(t) {
		var v map[string]any
		if json.Unmarshal([]byte(b.text), &v) != nil || v["nodes"] == nil {
			continue // a fragment: a node, an edge, a payload, a message
		}
		n++
		path := filepath.Join(dir, "broken.json")
		if err := os.WriteFile(path, []byte(b.text), 0o600); err != nil {
			t.Fatal(err)
		}
		code, stdout, stderr := runCLI(t, nil, "validate", path)
		if sample, ok := strings.CutPrefix(b.next, "$ rune validate broken.json; echo \"exit $?\"\n"); ok {
			got := strings.ReplaceAll(stderr, path, "broken.json") + "exit " + itoa(code) + "\n"
			if got != sample {
				t.Errorf("%s: the sample run shows\n%s\nrune validate prints\n%s", b.where, sample, got)
			}
			continue
		}
		if code != 0 {
			t.Errorf("%s: example %v is invalid (exit %d):\n%s%s", b.where, v["id"], code, stdout, stderr)
		}
	}
	if n < 10 {
		t.Fatalf("found %d workflow examples in the docs; the extraction is broken", n)
	}
}
