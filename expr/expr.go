// Package expr evaluates the {{ }} expressions and Liquid templates of dsl.md
// ("Expressions and templates"), compiled once per workflow definition and
// evaluated sandboxed and bounded.
package expr

// API CONTRACT (implemented by the expr helper; keep these signatures):
//
//   type Limits struct { ... }            // MaxSource, MaxResultBytes, MaxDuration..., documented defaults
//   func NewCompiler(l Limits) *Compiler  // zero Limits = defaults
//   func (c *Compiler) Value(v any) (Value, error)         // a parameter value: strings are templates,
//                                                          // arrays/objects walked, other JSON kept as is
//   func (c *Compiler) Expression(src string) (Value, error) // a bare expression ("$x > 3"), "{{ }}" optional
//   func (c *Compiler) Liquid(src string) (Value, error)    // a Liquid template; Eval yields a string
//   type Value interface { Eval(env map[string]any) (any, error) }
//   func Check(v any) error  // compile-only check used by validation (no env)
//
// Env holds "$trigger", "$<node_id>", "$node", "$item", "$error", "$vars", "$execution", "$now".
// A missing path is an error naming the path ("$fetch_user.body.items: no such key \"items\"").

// Compiler compiles expressions and templates. (Placeholder until the expr package lands.)
type Compiler struct{}
