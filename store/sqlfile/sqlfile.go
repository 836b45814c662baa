// Package sqlfile reads named queries from an embedded .sql file, so the
// stores' SQL stays in .sql files: each query follows a line
// "-- name: <name>" and runs to the next such line.
package sqlfile

import (
	"bufio"
	"fmt"
	"strings"
)

// Parse returns the queries of src by name. A query without a name, an
// empty query or a name used twice is an error naming the line.
func Parse(src string) (map[string]string, error) {
	out := map[string]string{}
	var name string
	var body strings.Builder
	line := 0
	flush := func() error {
		q := strings.TrimSpace(body.String())
		body.Reset()
		if name == "" {
			if q != "" && !onlyComments(q) {
				return fmt.Errorf("sqlfile: line %d: SQL before the first \"-- name:\" line", line)
			}
			return nil
		}
		if q == "" {
			return fmt.Errorf("sqlfile: query %q is empty", name)
		}
		if _, dup := out[name]; dup {
			return fmt.Errorf("sqlfile: query %q defined twice", name)
		}
		out[name] = q
		return nil
	}
	sc := bufio.NewScanner(strings.NewReader(src))
	for sc.Scan() {
		line++
		text := sc.Text()
		if n, ok := strings.CutPrefix(strings.TrimSpace(text), "-- name:"); ok {
			if err := flush(); err != nil {
				return nil, err
			}
			name = strings.TrimSpace(n)
			if name == "" {
				return nil, fmt.Errorf("sqlfile: line %d: a name is missing after \"-- name:\"", line)
			}
			continue
		}
		body.WriteString(text)
		body.WriteByte('\n')
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return out, nil
}

// MustParse is Parse for files embedded in the binary, where an error is a
// bug caught by every test.
func MustParse(src string) map[string]string {
	q, err := Parse(src)
	if err != nil {
		panic(err)
	}
	return q
}

func onlyComments(q string) bool {
	for l := range strings.SplitSeq(q, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "--") {
			return false
		}
	}
	return true
}
