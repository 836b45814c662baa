package message

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The one policy for JSON entering Rune: workflow definitions, trigger
// inputs (CLI, API, the first message) and messages off the broker. Input
// that breaks it is refused where it enters, with the path of the offending
// value, rather than failing somewhere later.
const (
	// MaxDepth is how deeply a value (an input, a definition, a node's
	// output) may nest objects and arrays. Node outputs have the same limit.
	MaxDepth = 64
	// MaxInputSize is the largest trigger input or definition, in bytes:
	// they travel inside messages of at most MaxSize.
	MaxInputSize = MaxSize / 2
	// messageDepth leaves room for the envelope around values in a message
	// (timeout → message → accumulated_context → "$node" → value).
	messageDepth = MaxDepth + 8
)

// PolicyError is JSON refused by the input policy.
type PolicyError struct {
	// Path locates the value, e.g. `input.items[3].name`.
	Path string
	// Problem says what is wrong with it.
	Problem string
}

func (e *PolicyError) Error() string { return e.Path + ": " + e.Problem }

// CheckJSON applies the input policy to a JSON document named what (used
// as the root of the path): at most MaxInputSize bytes, nesting at most
// MaxDepth, valid UTF-8 in every string and key (no invalid bytes, no
// unpaired surrogate escapes, which decoders silently turn into U+FFFD).
// It does not check the syntax otherwise; decoding does.
func CheckJSON(what string, data []byte) error {
	if len(data) > MaxInputSize {
		return &PolicyError{Path: what, Problem: fmt.Sprintf("%d bytes, over the limit of %d bytes", len(data), MaxInputSize)}
	}
	return checkRaw(what, data, MaxDepth)
}

// checkRaw checks depth and UTF-8 in one pass over data; only when it finds
// a problem does it walk the document again to name its path.
func checkRaw(what string, data []byte, maxDepth int) error {
	if fastOK(data, maxDepth) {
		return nil
	}
	return locate(what, data, maxDepth)
}

// fastOK reports whether data certainly nests no deeper than maxDepth and
// holds valid UTF-8 without surrogate escapes. It allocates nothing.
func fastOK(data []byte, maxDepth int) bool {
	if !utf8.Valid(data) {
		return false
	}
	depth, inString := 0, false
	for i := 0; i < len(data); i++ {
		c := data[i]
		if inString {
			switch c {
			case '\\':
				if i+2 < len(data) && data[i+1] == 'u' && (data[i+2] == 'd' || data[i+2] == 'D') {
					return false // maybe a surrogate: let locate decide
				}
				i++
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{', '[':
			if depth++; depth > maxDepth {
				return false
			}
		case '}', ']':
			depth--
		}
	}
	return true
}

// locate walks data token by token to find the first value that breaks the
// policy and name its path.
func locate(what string, data []byte, maxDepth int) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	type level struct {
		array bool
		index int
		key   string
		atKey bool // an object expecting a key next
	}
	var stack []level
	path := func() string {
		var b strings.Builder
		b.WriteString(what)
		for _, l := range stack {
			if l.array {
				b.WriteString("[" + strconv.Itoa(l.index) + "]")
			} else if l.key != "" || !l.atKey {
				b.WriteString(keyPath(l.key))
			}
		}
		return b.String()
	}
	prev := int64(0)
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return nil // a syntax error: the decoder reports it with its position
		}
		end := dec.InputOffset()
		raw := data[prev:end]
		prev = end
		top := len(stack) - 1
		isKey := top >= 0 && !stack[top].array && stack[top].atKey
		if s, ok := tok.(string); ok {
			if isKey {
				stack[top].key = s
				if !utf8.Valid(raw) {
					// Name the key by its bytes, not by the U+FFFD decoding put in.
					if i, j := bytes.IndexByte(raw, '"'), bytes.LastIndexByte(raw, '"'); i < j {
						stack[top].key = string(raw[i+1 : j])
					}
				}
			}
			if problem := badString(raw, s); problem != "" {
				if isKey {
					return &PolicyError{Path: path(), Problem: "key " + problem}
				}
				return &PolicyError{Path: path(), Problem: problem}
			}
			if isKey {
				stack[top].atKey = false
				continue
			}
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			if len(stack) >= maxDepth {
				return &PolicyError{Path: path(), Problem: fmt.Sprintf("nested deeper than %d levels", maxDepth)}
			}
			stack = append(stack, level{array: tok == json.Delim('['), atKey: tok == json.Delim('{')})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		// A value ended: the enclosing container moves on.
		if top = len(stack) - 1; top >= 0 {
			if stack[top].array {
				stack[top].index++
			} else {
				stack[top].atKey = true
			}
		}
	}
}

// badString says what is wrong with a string token, given its raw bytes
// (with surrounding separators) and its decoded value.
func badString(raw []byte, s string) string {
	if !utf8.Valid(raw) {
		return "not valid UTF-8"
	}
	if strings.ContainsRune(s, utf8.RuneError) && !bytes.Contains(raw, []byte("\uFFFD")) && !bytes.Contains(bytes.ToLower(raw), []byte(`\ufffd`)) {
		return "holds an unpaired UTF-16 surrogate escape (not valid Unicode)"
	}
	return ""
}

// keyPath renders an object key as a path step.
func keyPath(k string) string {
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c == '_' || c == '$' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return "[" + strconv.Quote(k) + "]"
		}
	}
	if k == "" {
		return `[""]`
	}
	return "." + k
}

// CheckValue applies the input policy to a decoded value named what: nesting
// at most MaxDepth and valid UTF-8 in every string and key. Callers that
// hold the raw JSON use CheckJSON, which also sees what decoding hides.
func CheckValue(what string, v any) error {
	return checkValue(what, v, 0)
}

func checkValue(path string, v any, depth int) error {
	switch x := v.(type) {
	case string:
		if !utf8.ValidString(x) {
			return &PolicyError{Path: path, Problem: "not valid UTF-8"}
		}
	case []any:
		if depth >= MaxDepth {
			return &PolicyError{Path: path, Problem: fmt.Sprintf("nested deeper than %d levels", MaxDepth)}
		}
		for i, e := range x {
			if err := checkValue(path+"["+strconv.Itoa(i)+"]", e, depth+1); err != nil {
				return err
			}
		}
	case map[string]any:
		if depth >= MaxDepth {
			return &PolicyError{Path: path, Problem: fmt.Sprintf("nested deeper than %d levels", MaxDepth)}
		}
		for k, e := range x {
			if !utf8.ValidString(k) {
				return &PolicyError{Path: path + keyPath(k), Problem: "key not valid UTF-8"}
			}
			if err := checkValue(path+keyPath(k), e, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}
