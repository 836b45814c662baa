// Package expr evaluates the {{ }} expressions and Liquid templates of dsl.md
// ("Expressions and templates"), compiled once per workflow definition and
// evaluated sandboxed and bounded.
//
// Expressions use the language of github.com/expr-lang/expr. Every name of the
// context starts with "$" ("$trigger", "$fetch_user", "$node", ...). The
// compiler rewrites the parsed expression so that:
//
//   - a path to something missing is an error naming the path
//     ("$fetch_user.body.itemz: no such key \"itemz\""), not nil; a path on
//     the left of ?? or before ?. yields nil instead;
//   - loops (map, filter, reduce, ...) count iterations, watch the clock and
//     charge what they produce to a memory budget;
//   - string concatenation, repeat, toJSON, string and flatten are charged to
//     that budget before they allocate.
//
// There are no functions with file, network or process access.
package expr

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/expr-lang/expr/vm"
	"github.com/osteele/liquid"
)

// Limits bound compilation and evaluation. A zero field takes its default.
type Limits struct {
	// MaxSource is the longest expression or template source, in bytes. Default 4 KiB.
	MaxSource int
	// MaxNodes is the most syntax nodes one expression may have. Default 1000.
	MaxNodes int
	// MaxResultBytes bounds the approximate size of one result (a value, a
	// rendered string, a Liquid output). Default 1 MiB.
	MaxResultBytes int
	// MaxMemory is the approximate number of bytes one evaluation may produce:
	// ranges, arrays and maps built, loop results and concatenated strings.
	// Default 16 MiB (about expr's own default of one million elements).
	MaxMemory int
	// MaxIterations is the most loop iterations (map, filter, reduce, ... bodies)
	// one evaluation may run, nested loops counted in full. Default 10 million.
	MaxIterations int
	// MaxDuration is the longest one evaluation may run. Loops check the clock
	// every few iterations; code outside loops is linear in the expression and
	// bounded by MaxNodes and MaxMemory. Default 1 s.
	MaxDuration time.Duration
}

// Defaults of Limits.
const (
	DefaultMaxSource      = 4 << 10
	DefaultMaxNodes       = 1000
	DefaultMaxResultBytes = 1 << 20
	DefaultMaxMemory      = 16 << 20
	DefaultMaxIterations  = 10_000_000
	DefaultMaxDuration    = time.Second
)

func (l Limits) withDefaults() Limits {
	if l.MaxSource <= 0 {
		l.MaxSource = DefaultMaxSource
	}
	if l.MaxNodes <= 0 {
		l.MaxNodes = DefaultMaxNodes
	}
	if l.MaxResultBytes <= 0 {
		l.MaxResultBytes = DefaultMaxResultBytes
	}
	if l.MaxMemory <= 0 {
		l.MaxMemory = DefaultMaxMemory
	}
	if l.MaxIterations <= 0 {
		l.MaxIterations = DefaultMaxIterations
	}
	if l.MaxDuration <= 0 {
		l.MaxDuration = DefaultMaxDuration
	}
	return l
}

// Value is a compiled parameter value, expression or template.
type Value interface {
	// Eval evaluates against env, which maps "$trigger", "$<node_id>", ... to
	// JSON-compatible values; Eval does not modify env. The result is
	// JSON-compatible: nil, bool, float64, int, int64, string, []any or
	// map[string]any. It may share structure with env and with constants of the
	// compiled value: callers must not modify it.
	Eval(env map[string]any) (any, error)
}

// Compiler compiles expressions and templates under one set of Limits.
// It is safe for concurrent use.
type Compiler struct {
	limits Limits
	// vms recycles expr VMs, whose stacks and scopes are reused between runs.
	vms sync.Pool
	// vmBudget is MaxMemory in expr's units (about 16 bytes per element).
	vmBudget uint

	// liquid's parser keeps per-engine state while parsing, so parses are
	// serialised; rendering a parsed template is concurrent.
	liquidMu sync.Mutex
	liquid   *liquid.Engine
}

// NewCompiler returns a compiler enforcing l; zero fields take their defaults.
func NewCompiler(l Limits) *Compiler {
	c := &Compiler{limits: l.withDefaults()}
	c.liquid = newLiquidEngine(&c.limits)
	c.vms.New = func() any { return new(vm.VM) }
	c.vmBudget = uint(c.limits.MaxMemory / 16)
	return c
}

// Limits returns the limits the compiler enforces, defaults filled in.
func (c *Compiler) Limits() Limits { return c.limits }

// Value compiles a parameter value. A string is a template: exactly one
// {{ expression }} (with only white space around it) evaluates to the
// expression's JSON value; text around or between {{ }} parts renders a
// string; a string without {{ is a constant. Arrays and objects are walked and
// the strings inside compiled. Other values are constants.
func (c *Compiler) Value(v any) (Value, error) {
	return c.value(v, 0)
}

const maxValueDepth = 64

func (c *Compiler) value(v any, depth int) (Value, error) {
	if depth > maxValueDepth {
		return nil, fmt.Errorf("value nested deeper than %d levels", maxValueDepth)
	}
	switch v := v.(type) {
	case string:
		return c.template(v)
	case []any:
		vals := make([]Value, len(v))
		constant := true
		for i, e := range v {
			ev, err := c.value(e, depth+1)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			if _, ok := ev.(constValue); !ok {
				constant = false
			}
			vals[i] = ev
		}
		if constant {
			return constValue{v}, nil
		}
		return arrayValue(vals), nil
	case map[string]any:
		obj := objectValue{keys: make([]string, 0, len(v)), vals: make([]Value, 0, len(v))}
		constant := true
		for _, k := range slices.Sorted(maps.Keys(v)) {
			ev, err := c.value(v[k], depth+1)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", keyPath(k), err)
			}
			if _, ok := ev.(constValue); !ok {
				constant = false
			}
			obj.keys = append(obj.keys, k)
			obj.vals = append(obj.vals, ev)
		}
		if constant {
			return constValue{v}, nil
		}
		return obj, nil
	default:
		if err := checkJSON(v); err != nil {
			return nil, err
		}
		return constValue{v}, nil
	}
}

// Expression compiles a bare expression such as `$x.total > 3`. An enclosing
// {{ }} is allowed.
func (c *Compiler) Expression(src string) (Value, error) {
	if len(src) > c.limits.MaxSource {
		return nil, sourceLimitError(len(src), c.limits.MaxSource)
	}
	if parts, err := splitTemplate(src); err == nil && len(parts) == 1 && parts[0].isExpr {
		return c.compileExpr(parts[0].text, src, parts[0].offset)
	}
	return c.compileExpr(src, src, 0)
}

// Check compiles v as a parameter value (see Compiler.Value) under the
// default limits, for validation.
func Check(v any) error {
	_, err := defaultCompiler.Value(v)
	return err
}

// CheckExpression compiles src as a bare expression (see
// Compiler.Expression) under the default limits, for validation.
func CheckExpression(src string) error {
	_, err := defaultCompiler.Expression(src)
	return err
}

// defaultCompiler is configured once; its only state is a pool of VMs.
var defaultCompiler = NewCompiler(Limits{})

// LimitError is an evaluation or compilation that exceeded one of the Limits.
type LimitError struct {
	// Limit is the name of the Limits field, "MaxMemory".
	Limit string
	// Max is the limit's value (bytes, nodes, iterations or nanoseconds).
	Max int64
	// What says what went over.
	What string
}

func (e *LimitError) Error() string {
	if e.Limit == "MaxDuration" {
		return fmt.Sprintf("%s: over the %s limit of %s", e.What, e.Limit, time.Duration(e.Max))
	}
	return fmt.Sprintf("%s: over the %s limit of %d", e.What, e.Limit, e.Max)
}

func sourceLimitError(n, max int) error {
	return &LimitError{Limit: "MaxSource", Max: int64(max), What: fmt.Sprintf("source is %d bytes", n)}
}

// SyntaxError is an expression or template that does not compile.
type SyntaxError struct {
	// Line and Column (both from 1) locate the problem in the source given to
	// the compiler (the whole template, not just the expression inside it).
	Line, Column int
	Msg          string
}

func (e *SyntaxError) Error() string {
	if e.Line > 1 {
		return fmt.Sprintf("%s (line %d, column %d)", e.Msg, e.Line, e.Column)
	}
	return fmt.Sprintf("%s (column %d)", e.Msg, e.Column)
}

// PathError is a reference to something that is not there.
type PathError struct {
	// Path is the reference as written, "$fetch_user.body.itemz".
	Path string
	// Msg says what is wrong, `no such key "itemz"`.
	Msg string
}

func (e *PathError) Error() string { return e.Path + ": " + e.Msg }

// IsLimit reports whether err is (or wraps) a *LimitError.
func IsLimit(err error) bool {
	var le *LimitError
	return errors.As(err, &le)
}
