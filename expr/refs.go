package expr

import "slices"

// Refs lists the context names v reads, each once, in order of first use:
// "$trigger", "$fetch_user", and "$node.fetch_user" for a constant key read
// from $node. Validation checks them against the workflow's nodes, so that a
// misspelled name is found before anything runs. A name read only through
// $env or get() is not listed; a Value not made by a Compiler lists none.
func Refs(v Value) []string {
	var out []string
	add := func(names ...string) {
		for _, n := range names {
			if !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
	}
	var walk func(v Value)
	walk = func(v Value) {
		switch v := v.(type) {
		case *exprValue:
			add(v.refs...)
		case *mixedValue:
			for _, p := range v.parts {
				if p.expr != nil {
					add(p.expr.refs...)
				}
			}
		case arrayValue:
			for _, e := range v {
				walk(e)
			}
		case objectValue:
			for _, e := range v.vals {
				walk(e)
			}
		case *liquidValue:
			for _, n := range v.names {
				add("$" + n)
			}
		}
	}
	walk(v)
	return out
}

// CheckRefs is Check, also returning the context names v reads (Refs).
func CheckRefs(v any) ([]string, error) {
	cv, err := defaultCompiler.Value(v)
	if err != nil {
		return nil, err
	}
	return Refs(cv), nil
}

// CheckExpressionRefs is CheckExpression, also returning the context names
// src reads (Refs).
func CheckExpressionRefs(src string) ([]string, error) {
	cv, err := defaultCompiler.Expression(src)
	if err != nil {
		return nil, err
	}
	return Refs(cv), nil
}

func (r *rewriter) ref(name string) {
	if !slices.Contains(r.refs, name) {
		r.refs = append(r.refs, name)
	}
}

// firstKey is the first key of a path when it is a string.
func firstKey(keys []any) (string, bool) {
	if len(keys) == 0 {
		return "", false
	}
	k, ok := keys[0].(string)
	return k, ok
}
