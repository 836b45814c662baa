package expr

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// part is a piece of a template: literal text or the source of an expression.
type part struct {
	text   string
	isExpr bool
	offset int // byte offset of text in the template
}

// splitTemplate cuts s into text and {{ expression }} parts. An expression
// ends at the first "}}" outside string literals and outside braces opened
// inside it, so `{{ {"a": {"b": 1}} }}` is one expression.
func splitTemplate(s string) ([]part, error) {
	var parts []part
	i := 0
	for {
		j := strings.Index(s[i:], "{{")
		if j < 0 {
			if i < len(s) {
				parts = append(parts, part{text: s[i:], offset: i})
			}
			return parts, nil
		}
		j += i
		if j > i {
			parts = append(parts, part{text: s[i:j], offset: i})
		}
		start := j + 2
		end := scanExprEnd(s, start)
		if end < 0 {
			line, col := position(s, j)
			return nil, &SyntaxError{Line: line, Column: col, Msg: "unclosed {{"}
		}
		parts = append(parts, part{text: s[start:end], isExpr: true, offset: start})
		i = end + 2
	}
}

// scanExprEnd returns the index of the "}}" closing an expression starting at
// i, or -1.
func scanExprEnd(s string, i int) int {
	depth := 0
	for i < len(s) {
		switch ch := s[i]; ch {
		case '"', '\'', '`':
			i++
			for i < len(s) && s[i] != ch {
				if s[i] == '\\' && ch != '`' {
					i++
				}
				i++
			}
			if i >= len(s) {
				return -1
			}
		case '{':
			depth++
		case '}':
			if depth == 0 && i+1 < len(s) && s[i+1] == '}' {
				return i
			}
			if depth > 0 {
				depth--
			}
		}
		i++
	}
	return -1
}

// position converts a byte offset in s to a 1-based line and column (in runes).
func position(s string, off int) (line, col int) {
	if off > len(s) {
		off = len(s)
	}
	line = 1 + strings.Count(s[:off], "\n")
	lineStart := strings.LastIndexByte(s[:off], '\n') + 1
	return line, utf8.RuneCountInString(s[lineStart:off]) + 1
}

// template compiles a string parameter value.
func (c *Compiler) template(s string) (Value, error) {
	if len(s) > c.limits.MaxSource {
		return nil, sourceLimitError(len(s), c.limits.MaxSource)
	}
	if !strings.Contains(s, "{{") {
		return constValue{s}, nil
	}
	parts, err := splitTemplate(s)
	if err != nil {
		return nil, err
	}
	exprs, whole, text := 0, 0, false
	for i, p := range parts {
		if p.isExpr {
			exprs++
			whole = i
		} else if strings.TrimSpace(p.text) != "" {
			text = true
		}
	}
	if exprs == 1 && !text {
		p := parts[whole]
		return c.compileExpr(p.text, s, p.offset)
	}
	m := &mixedValue{maxBytes: c.limits.MaxResultBytes}
	for _, p := range parts {
		if !p.isExpr {
			m.parts = append(m.parts, mixedPart{text: p.text})
			m.textLen += len(p.text)
			continue
		}
		pv, err := c.compileExpr(p.text, s, p.offset)
		if err != nil {
			return nil, err
		}
		m.parts = append(m.parts, mixedPart{expr: pv})
	}
	return m, nil
}

// constValue is a value without expressions; Eval does not allocate.
type constValue struct{ v any }

func (c constValue) Eval(map[string]any) (any, error) { return c.v, nil }

type arrayValue []Value

func (a arrayValue) Eval(env map[string]any) (any, error) {
	out := make([]any, len(a))
	for i, v := range a {
		r, err := v.Eval(env)
		if err != nil {
			return nil, fmt.Errorf("[%d]: %w", i, err)
		}
		out[i] = r
	}
	return out, nil
}

type objectValue struct {
	keys []string
	vals []Value
}

func (o objectValue) Eval(env map[string]any) (any, error) {
	out := make(map[string]any, len(o.keys))
	for i, v := range o.vals {
		r, err := v.Eval(env)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", keyPath(o.keys[i]), err)
		}
		out[o.keys[i]] = r
	}
	return out, nil
}

// keyPath renders an object key as a path step for error messages.
func keyPath(k string) string {
	if isIdent(k) {
		return "." + k
	}
	return "[" + strconv.Quote(k) + "]"
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (i > 0 && r >= '0' && r <= '9') {
			continue
		}
		return false
	}
	return true
}

type mixedPart struct {
	text string
	expr *exprValue
}

// mixedValue renders text with {{ }} parts to a string.
type mixedValue struct {
	parts    []mixedPart
	textLen  int
	maxBytes int
}

func (m *mixedValue) Eval(env map[string]any) (any, error) {
	var b strings.Builder
	b.Grow(m.textLen + 16*len(m.parts))
	for _, p := range m.parts {
		if p.expr == nil {
			b.WriteString(p.text)
			continue
		}
		v, err := p.expr.eval(env)
		if err != nil {
			return nil, err
		}
		if err := appendText(&b, v, m.maxBytes-b.Len()); err != nil {
			return nil, err
		}
		if b.Len() > m.maxBytes {
			break
		}
	}
	if b.Len() > m.maxBytes {
		return nil, resultLimitError(m.maxBytes)
	}
	return b.String(), nil
}

func resultLimitError(max int) error {
	return &LimitError{Limit: "MaxResultBytes", Max: int64(max), What: "result too large"}
}

// appendText writes v as template text: strings as they are, other values as
// JSON. room is how many more bytes the result may take.
func appendText(b *strings.Builder, v any, room int) error {
	switch v := v.(type) {
	case string:
		if len(v) > room {
			return resultLimitError(b.Len() + room)
		}
		b.WriteString(v)
		return nil
	case nil:
		b.WriteString("null")
		return nil
	case bool:
		b.WriteString(strconv.FormatBool(v))
		return nil
	case int:
		b.WriteString(strconv.Itoa(v))
		return nil
	case int64:
		b.WriteString(strconv.FormatInt(v, 10))
		return nil
	case float64:
		b.Write(appendFloat(nil, v))
		return nil
	}
	n, err := normalize(v, room)
	if err != nil {
		return err
	}
	out, err := json.Marshal(n)
	if err != nil {
		return fmt.Errorf("cannot render %T as text: %v", v, err)
	}
	b.Write(out)
	return nil
}

// appendFloat formats f as encoding/json does.
func appendFloat(dst []byte, f float64) []byte {
	abs := f
	if abs < 0 {
		abs = -abs
	}
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	return strconv.AppendFloat(dst, f, format, -1, 64)
}

// checkJSON rejects constants that are not JSON values.
func checkJSON(v any) error {
	switch v.(type) {
	case nil, bool, float64, float32, int, int64, int32, uint, uint64, uint32, json.Number:
		return nil
	}
	return fmt.Errorf("unsupported value of type %T", v)
}
