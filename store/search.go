package store

import (
	"bytes"
	"encoding/json"
	"strings"
)

// Bounds of an execution list's input filter (ExecutionFilter.Input).
const (
	inputMatchesMax = 8
	inputDepthMax   = 8
	inputKeyMax     = 128
	inputValueMax   = 1024
)

// InputFilter checks an execution list's input matches (an ErrInvalid
// naming the condition, "input.user_id: …") and renders them for the SQL
// stores: contains, the JSON object holding every match's value at
// its path (PostgreSQL's jsonb containment, which its GIN index serves),
// and paths, a JSON array of {"p": SQLite JSON path, "v": value} (SQLite
// compares each with ->). Both are nil without matches.
func InputFilter(ms []InputMatch) (contains, paths []byte, err error) {
	if len(ms) == 0 {
		return nil, nil, nil
	}
	if len(ms) > inputMatchesMax {
		return nil, nil, invalid("input: %d conditions, at most %d", len(ms), inputMatchesMax)
	}
	root := map[string]any{}
	type pair struct {
		P string          `json:"p"`
		V json.RawMessage `json:"v"`
	}
	var pairs []pair
	for _, m := range ms {
		name := "input." + strings.Join(m.Path, ".")
		if len(m.Path) == 0 || len(m.Path) > inputDepthMax {
			return nil, nil, invalid("%s: want 1 to %d keys", name, inputDepthMax)
		}
		v, err := InputValue(m.Value)
		if err != nil {
			return nil, nil, invalid("%s: %v", name, err)
		}
		var sp strings.Builder
		sp.WriteString("$")
		obj := root
		for i, k := range m.Path {
			if k == "" || len(k) > inputKeyMax {
				return nil, nil, invalid("%s: key %d is empty or longer than %d bytes", name, i+1, inputKeyMax)
			}
			q, _ := json.Marshal(k)
			sp.WriteString(".")
			sp.Write(q)
			if i == len(m.Path)-1 {
				if _, taken := obj[k]; taken {
					return nil, nil, invalid("%s: set twice, or also a parent of another condition", name)
				}
				obj[k] = v
				break
			}
			next, ok := obj[k].(map[string]any)
			if !ok {
				if _, taken := obj[k]; taken {
					return nil, nil, invalid("%s: its parent is also a condition", name)
				}
				next = map[string]any{}
				obj[k] = next
			}
			obj = next
		}
		pairs = append(pairs, pair{P: sp.String(), V: v})
	}
	contains, err = json.Marshal(root)
	if err != nil {
		return nil, nil, err
	}
	paths, err = json.Marshal(pairs)
	return contains, paths, err
}

// InputValue checks that v is one JSON scalar (a string, number, true,
// false or null) and returns it compacted.
func InputValue(v json.RawMessage) (json.RawMessage, error) {
	if len(v) > inputValueMax {
		return nil, invalid("value longer than %d bytes", inputValueMax)
	}
	var b bytes.Buffer
	if err := json.Compact(&b, v); err != nil || b.Len() == 0 {
		return nil, invalid("value is not JSON")
	}
	if c := b.Bytes()[0]; c == '{' || c == '[' {
		return nil, invalid("value must be a string, number, true, false or null")
	}
	return json.RawMessage(b.Bytes()), nil
}

// TriggerFilter renders an execution list's trigger filter: exact, the
// trigger compared whole, and kind, a prefix ("hook:") for a bare kind
// ("" otherwise).
func TriggerFilter(t string) (exact, kind string, err error) {
	if len(t) > 256 {
		return "", "", invalid("trigger: longer than 256 bytes")
	}
	if t != "" && !strings.Contains(t, ":") {
		kind = t + ":"
	}
	return t, kind, nil
}

// ParseInputValue reads a filter's value as a JSON scalar when it is one (42,
// -1.5, true, false, null, "quoted"), else as a string: input.name=alice
// is "alice", input.id=42 the number 42 and input.id="42" the string. The
// API's query parameters and the console's search box read values so.
func ParseInputValue(v string) json.RawMessage {
	var x any
	if json.Unmarshal([]byte(v), &x) == nil {
		switch x.(type) {
		case map[string]any, []any:
		default:
			return json.RawMessage(v)
		}
	}
	b, _ := json.Marshal(v)
	return b
}
