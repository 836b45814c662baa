package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/rune-org/rune/message"
)

// readInput decodes --input: inline JSON, or @file. Empty means {}.
func readInput(s string) (any, error) {
	if s == "" {
		return map[string]any{}, nil
	}
	data := []byte(s)
	where := "--input"
	if strings.HasPrefix(s, "@") {
		where = s[1:]
		var err error
		if data, err = readFileLimited(where, message.MaxInputSize); err != nil {
			return nil, usagef("--input: %v", err)
		}
	}
	if err := message.CheckJSON("input", data); err != nil {
		return nil, usagef("%s: %v", where, err)
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&v); err != nil {
		return nil, usagef("%s: not valid JSON: %v (pass '{\"key\": 1}' or @payload.json)", where, err)
	}
	if dec.More() {
		return nil, usagef("%s: more than one JSON value", where)
	}
	return v, nil
}

// readFileLimited reads a whole file, refusing one larger than max.
func readFileLimited(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > max {
		return nil, fmt.Errorf("%s is %d bytes; the limit is %d", path, st.Size(), max)
	}
	return os.ReadFile(path)
}
