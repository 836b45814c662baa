package expr

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/expr-lang/expr/vm/runtime"
)

// pathSpec describes a path lookup: its keys and, for errors, the text of
// the path up to each key.
type pathSpec struct {
	// fromEnv: the base is the environment and keys[0] a context name.
	fromEnv bool
	keys    []any // string or int
	texts   []string
	// lenient: a missing step yields nil instead of an error.
	lenient bool
}

// getFn is rune:get(base, *pathSpec).
func getFn(args ...any) (any, error) {
	v, s := args[0], args[1].(*pathSpec)
	for i, k := range s.keys {
		next, msg := step(v, k)
		if msg != "" {
			if s.lenient {
				return nil, nil
			}
			if i == 0 && s.fromEnv {
				msg = "not defined"
			}
			return nil, &PathError{Path: s.texts[i], Msg: msg}
		}
		v = next
	}
	return v, nil
}

// indexFn is rune:index(base, key, *pathSpec), a lookup by a computed key.
func indexFn(args ...any) (any, error) {
	base, key, s := args[0], args[1], args[2].(*pathSpec)
	switch k := key.(type) {
	case float64:
		if k != math.Trunc(k) || math.Abs(k) > 1<<53 {
			if s.lenient {
				return nil, nil
			}
			return nil, &PathError{Path: s.texts[0], Msg: fmt.Sprintf("index %v is not an integer", k)}
		}
		key = int(k)
	case int64:
		key = int(k)
	case int, string:
	default:
		if s.lenient {
			return nil, nil
		}
		return nil, &PathError{Path: s.texts[0], Msg: "cannot use " + TypeName(key) + " as a key"}
	}
	v, msg := step(base, key)
	if msg != "" {
		if s.lenient {
			return nil, nil
		}
		return nil, &PathError{Path: s.texts[0], Msg: msg}
	}
	return v, nil
}

// step looks k up in v. A non-empty message says why it is not there.
func step(v, k any) (any, string) {
	switch c := v.(type) {
	case map[string]any:
		if s, ok := k.(string); ok {
			if r, ok := c[s]; ok {
				return r, ""
			}
			return nil, fmt.Sprintf("no such key %q", s)
		}
		return nil, "cannot index an object with a number"
	case []any:
		if i, ok := k.(int); ok {
			return indexAt(len(c), i, func(i int) any { return c[i] })
		}
		return nil, fmt.Sprintf("cannot read key %q of an array", k)
	case nil:
		if s, ok := k.(string); ok {
			return nil, fmt.Sprintf("cannot read key %q of null", s)
		}
		return nil, "cannot index null"
	}
	// Values built by builtins: []string, []int, map[any][]any, ...
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Map:
		kv := reflect.ValueOf(k)
		if !kv.Type().AssignableTo(rv.Type().Key()) {
			return nil, fmt.Sprintf("cannot use %v as a key of %s", k, TypeName(v))
		}
		r := rv.MapIndex(kv)
		if !r.IsValid() {
			return nil, fmt.Sprintf("no such key %v", strconv.Quote(fmt.Sprint(k)))
		}
		return r.Interface(), ""
	case reflect.Slice, reflect.Array, reflect.String:
		i, ok := k.(int)
		if !ok {
			return nil, fmt.Sprintf("cannot read key %q of %s", k, TypeName(v))
		}
		if rv.Kind() == reflect.String {
			return indexAt(rv.Len(), i, func(i int) any { return runtime.Fetch(v, i) })
		}
		return indexAt(rv.Len(), i, func(i int) any { return rv.Index(i).Interface() })
	}
	return nil, fmt.Sprintf("cannot read key %v of %s", strconv.Quote(fmt.Sprint(k)), TypeName(v))
}

func indexAt(n, i int, at func(int) any) (any, string) {
	j := i
	if j < 0 {
		j += n // expr's negative indexes count from the end
	}
	if j < 0 || j >= n {
		return nil, fmt.Sprintf("index %d out of range (length %d)", i, n)
	}
	return at(j), ""
}

// TypeName names v's JSON type for messages ("a number", "an object", …).
func TypeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case float64, float32, int, int64, int32, int16, int8, uint, uint64, uint32, uint16, uint8, json.Number:
		return "a number"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	}
	switch reflect.ValueOf(v).Kind() {
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map:
		return "an object"
	}
	return fmt.Sprintf("a %T", v)
}

// budget is one evaluation's account of iterations, time and memory.
type budget struct {
	lim   *Limits
	iters int
	mem   int
	start time.Time
}

// newBudget is rune:budget(), called once at the start of an evaluation
// that has loops or growing operations.
func (c *Compiler) newBudget(...any) (any, error) {
	return &budget{lim: &c.limits, start: time.Now()}, nil
}

// clockEvery is how many loop iterations pass between looks at the clock:
// often enough that a costly body cannot run long past MaxDuration, rarely
// enough that time.Now stays cheap next to the loop itself.
const clockEvery = 16

func (b *budget) charge(n int) error {
	b.mem += n
	if n < 0 || b.mem > b.lim.MaxMemory {
		return &LimitError{Limit: "MaxMemory", Max: int64(b.lim.MaxMemory), What: "evaluation allocated too much"}
	}
	return nil
}

// tickFn is rune:tick(budget, v) around every loop body: it counts the
// iteration, looks at the clock now and then, and charges what the body
// produced.
func tickFn(args ...any) (any, error) {
	b, v := args[0].(*budget), args[1]
	b.iters++
	if b.iters > b.lim.MaxIterations {
		return nil, &LimitError{Limit: "MaxIterations", Max: int64(b.lim.MaxIterations), What: "too many loop iterations"}
	}
	if b.iters%clockEvery == 0 && time.Since(b.start) > b.lim.MaxDuration {
		return nil, &LimitError{Limit: "MaxDuration", Max: int64(b.lim.MaxDuration), What: "evaluation took too long"}
	}
	if err := b.charge(shallowSize(v)); err != nil {
		return nil, err
	}
	return v, nil
}

// shallowSize estimates what producing v may have allocated, not counting
// what it shares with its elements.
func shallowSize(v any) int {
	switch v := v.(type) {
	case nil, bool, int, float64:
		return 0
	case string:
		return len(v)
	case []any:
		return 16 * len(v)
	case map[string]any:
		return 32 * len(v)
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.String:
		return rv.Len()
	case reflect.Slice, reflect.Array:
		return 16 * rv.Len()
	case reflect.Map:
		return 32 * rv.Len()
	}
	return 0
}

// addFn is rune:add(budget, a, b): + with string concatenation charged
// before it allocates.
func addFn(args ...any) (any, error) {
	b, x, y := args[0].(*budget), args[1], args[2]
	if xs, ok := x.(string); ok {
		if ys, ok := y.(string); ok {
			if err := b.charge(len(xs) + len(ys)); err != nil {
				return nil, err
			}
			return xs + ys, nil
		}
	}
	return runtime.Add(x, y), nil
}

// guardFn is rune:guard(budget, v): it charges v's deep size before a
// builtin walks all of it.
func guardFn(args ...any) (any, error) {
	b, v := args[0].(*budget), args[1]
	room := b.lim.MaxMemory - b.mem
	n, ok := jsonSize(v, room)
	if !ok {
		return nil, &LimitError{Limit: "MaxMemory", Max: int64(b.lim.MaxMemory), What: "evaluation allocated too much"}
	}
	if err := b.charge(n); err != nil {
		return nil, err
	}
	return v, nil
}

// repeatFn is rune:repeat(budget, s, n), repeat with its size charged first.
func repeatFn(args ...any) (any, error) {
	if len(args) != 3 {
		return nil, fmt.Errorf("repeat takes 2 arguments, got %d", len(args)-1)
	}
	b := args[0].(*budget)
	s, ok := args[1].(string)
	if !ok {
		return nil, fmt.Errorf("repeat: cannot repeat %s", TypeName(args[1]))
	}
	n := runtime.ToInt(args[2])
	if n < 0 {
		return nil, fmt.Errorf("repeat: negative count %d", n)
	}
	if len(s) > 0 && n > b.lim.MaxMemory/len(s) {
		return nil, &LimitError{Limit: "MaxMemory", Max: int64(b.lim.MaxMemory), What: "evaluation allocated too much"}
	}
	if err := b.charge(len(s) * n); err != nil {
		return nil, err
	}
	return strings.Repeat(s, n), nil
}

// jsonSize estimates the length of v as JSON, stopping as soon as it passes
// max (ok false), so shared or huge structures cost at most max steps.
func jsonSize(v any, max int) (n int, ok bool) {
	n = sizeOf(v, max, 0)
	return n, n <= max
}

const maxDepth = 256

func sizeOf(v any, max, depth int) int {
	if depth > maxDepth {
		return max + 1
	}
	switch v := v.(type) {
	case nil:
		return 4
	case bool:
		return 5
	case float64, int, int64, float32, int32, uint, uint64, uint32, int16, int8, uint16, uint8:
		return 8
	case string:
		return len(v) + 2
	case []any:
		n := 2 + len(v)
		for _, e := range v {
			if n > max {
				return n
			}
			n += sizeOf(e, max-n, depth+1)
		}
		return n
	case map[string]any:
		n := 2 + len(v)
		for k, e := range v {
			if n > max {
				return n
			}
			n += len(k) + 3 + sizeOf(e, max-n, depth+1)
		}
		return n
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Slice, reflect.Array:
		n := 2 + rv.Len()
		for i := 0; i < rv.Len() && n <= max; i++ {
			n += sizeOf(rv.Index(i).Interface(), max-n, depth+1)
		}
		return n
	case reflect.Map:
		n := 2 + rv.Len()
		it := rv.MapRange()
		for it.Next() && n <= max {
			n += 3 + sizeOf(it.Key().Interface(), max-n, depth+1) + sizeOf(it.Value().Interface(), max-n, depth+1)
		}
		return n
	case reflect.String:
		return rv.Len() + 2
	}
	return 16
}

// normalize checks v's size against max and converts what expr's builtins
// return (ranges, time.Time, map[any]..., ...) to JSON-compatible values.
// JSON values come back as they are, without copying.
func normalize(v any, max int) (any, error) {
	if _, ok := jsonSize(v, max); !ok {
		return nil, resultLimitError(max)
	}
	if isJSON(v, 0) {
		return v, nil
	}
	return convert(v, 0)
}

func isJSON(v any, depth int) bool {
	if depth > maxDepth {
		return false
	}
	switch v := v.(type) {
	case nil, bool, string, int, int64:
		return true
	case float64:
		return !math.IsInf(v, 0) && !math.IsNaN(v)
	case []any:
		for _, e := range v {
			if !isJSON(e, depth+1) {
				return false
			}
		}
		return true
	case map[string]any:
		for _, e := range v {
			if !isJSON(e, depth+1) {
				return false
			}
		}
		return true
	}
	return false
}

func convert(v any, depth int) (any, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("result nested deeper than %d levels", maxDepth)
	}
	switch v := v.(type) {
	case nil, bool, string, int, int64, json.Number:
		return v, nil
	case float64:
		if math.IsInf(v, 0) || math.IsNaN(v) {
			return nil, fmt.Errorf("result %v is not a finite number", v)
		}
		return v, nil
	case float32:
		return convert(float64(v), depth)
	case time.Time:
		return v.UTC().Format(time.RFC3339Nano), nil
	case time.Duration:
		return v.String(), nil
	case []byte:
		return string(v), nil
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return rv.Int(), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		u := rv.Uint()
		if u > math.MaxInt64 {
			return float64(u), nil
		}
		return int64(u), nil
	case reflect.Float32, reflect.Float64:
		return convert(rv.Float(), depth)
	case reflect.Bool:
		return rv.Bool(), nil
	case reflect.String:
		return rv.String(), nil
	case reflect.Slice, reflect.Array:
		out := make([]any, rv.Len())
		for i := range out {
			e, err := convert(rv.Index(i).Interface(), depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = e
		}
		return out, nil
	case reflect.Map:
		out := make(map[string]any, rv.Len())
		it := rv.MapRange()
		for it.Next() {
			e, err := convert(it.Value().Interface(), depth+1)
			if err != nil {
				return nil, err
			}
			out[fmt.Sprint(it.Key().Interface())] = e
		}
		return out, nil
	case reflect.Pointer, reflect.Interface:
		if rv.IsNil() {
			return nil, nil
		}
		return convert(rv.Elem().Interface(), depth+1)
	}
	return nil, fmt.Errorf("result of type %T is not a JSON value", v)
}

// modFn is % for JSON numbers: the remainder of whole numbers, whatever Go
// type holds them; math.Mod for fractions.
func modFn(args ...any) (any, error) {
	a, okA := Number(args[0])
	b, okB := Number(args[1])
	if !okA || !okB {
		return nil, fmt.Errorf("%% needs numbers, got %s and %s", TypeName(args[0]), TypeName(args[1]))
	}
	if b == 0 {
		return nil, fmt.Errorf("%% by zero")
	}
	if a == math.Trunc(a) && b == math.Trunc(b) && math.Abs(a) < 1<<53 && math.Abs(b) < 1<<53 {
		return int(a) % int(b), nil
	}
	return math.Mod(a, b), nil
}

// Number returns v as a float64 when it is a number of any Go numeric type.
func Number(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case float32:
		return float64(n), true
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	case int32:
		return float64(n), true
	case uint:
		return float64(n), true
	case uint64:
		return float64(n), true
	}
	return 0, false
}
