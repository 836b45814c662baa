package node

import (
	"fmt"
	"slices"
	"sort"

	"github.com/rune-org/rune/expr"
	"github.com/rune-org/rune/workflow"
)

// What node types share to check their parameters and report their
// failures: the engine's control nodes and package nodes' working ones.

// Error codes of parameter failures.
const (
	CodeExpression       = "EXPRESSION"
	CodeExpressionType   = "EXPRESSION_TYPE"
	CodeInvalidParameter = "INVALID_PARAMETER"
)

// Params helps a type's Check walk a node's parameters.
type Params struct {
	C      *workflow.NodeCheck
	Values map[string]any
}

// CheckParams returns c's node's parameters, having reported each one not
// in known.
func CheckParams(c *workflow.NodeCheck, known ...string) Params {
	p := Params{C: c, Values: c.Node.Parameters}
	names := make([]string, 0, len(p.Values))
	for name := range p.Values {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if !slices.Contains(known, name) {
			if len(known) == 0 {
				c.Report("parameters."+name, "unknown parameter: %s nodes take no parameters", c.Node.Type)
			} else {
				c.Report("parameters."+name, "unknown parameter (known: %v)", known)
			}
		}
	}
	return p
}

// String returns the string parameter name; ok is false when it is absent or
// not a string (reported).
func (p Params) String(name string, required bool) (string, bool) {
	v, present := p.Values[name]
	if !present || v == nil {
		if required {
			p.C.Report("parameters."+name, "required")
		}
		return "", false
	}
	s, ok := v.(string)
	if !ok {
		p.C.Report("parameters."+name, "must be a string, not %s", expr.TypeName(v))
		return "", false
	}
	if required && s == "" {
		p.C.Report("parameters."+name, "required")
		return "", false
	}
	return s, true
}

// Edge checks that the edge named at field leaves the node.
func (p Params) Edge(field, id string) {
	switch {
	case !p.C.LeavesNode(id):
		p.C.Report(field, "edge %q does not leave node %q%s", id, p.C.Node.ID, p.C.EdgeHint(id))
	case id == p.C.Node.ErrorEdge():
		p.C.Report(field, "edge %q is the node's error edge, which is followed only on failure", id)
	}
}

// Template reports a parameter value that does not compile or reads a name
// no node defines.
func (p Params) Template(field string, v any) {
	refs, err := expr.CheckRefs(v)
	if err != nil {
		p.C.Report(field, "%v", err)
		return
	}
	p.C.References(field, refs)
}

// Expression reports a bare expression that does not compile or reads a
// name no node defines.
func (p Params) Expression(field, src string) {
	refs, err := expr.CheckExpressionRefs(src)
	if err != nil {
		p.C.Report(field, "%v", err)
		return
	}
	p.C.References(field, refs)
}

// IsTemplate reports whether s holds a {{ }} expression.
func IsTemplate(s string) bool {
	for i := 0; i+1 < len(s); i++ {
		if s[i] == '{' && s[i+1] == '{' {
			return true
		}
	}
	return false
}

// ExprError turns an evaluation failure of the parameter at field into a
// node error: limits and missing paths alike are EXPRESSION, not retryable,
// since the same context gives the same result.
func ExprError(field string, err error) error {
	return &Error{
		Code:    CodeExpression,
		Message: "parameters." + field + ": " + err.Error(),
		Details: map[string]any{"parameter": "parameters." + field},
	}
}

// InvalidParam is a parameter that rendered to something unusable.
func InvalidParam(field, format string, args ...any) error {
	return &Error{
		Code:    CodeInvalidParameter,
		Message: "parameters." + field + ": " + fmt.Sprintf(format, args...),
		Details: map[string]any{"parameter": "parameters." + field},
	}
}

// TypeError is a parameter that evaluated to a value of the wrong type.
func TypeError(field, want string, got any) error {
	return &Error{
		Code:    CodeExpressionType,
		Message: fmt.Sprintf("parameters.%s: %s, got %s", field, want, expr.TypeName(got)),
		Details: map[string]any{"parameter": "parameters." + field},
	}
}

// CompileError wraps a compile failure of a node that Check would have
// rejected.
func CompileError(n *workflow.Node, field string, err error) error {
	return fmt.Errorf("node %q: parameters.%s: %w", n.ID, field, err)
}
