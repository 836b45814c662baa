package expr

import (
	"errors"
	"fmt"
	"strings"

	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/builtin"
	"github.com/expr-lang/expr/checker"
	"github.com/expr-lang/expr/compiler"
	"github.com/expr-lang/expr/conf"
	"github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/optimizer"
	"github.com/expr-lang/expr/parser"
	"github.com/expr-lang/expr/vm"
)

// Names of the functions the rewrite inserts. They contain ':' so that no
// expression can spell them.
const (
	fnGet    = "rune:get"
	fnIndex  = "rune:index"
	fnTick   = "rune:tick"
	fnAdd    = "rune:add"
	fnMod    = "rune:mod"
	fnGuard  = "rune:guard"
	fnRepeat = "rune:repeat"
	fnBudget = "rune:budget"
	varBudg  = "rune:b"
)

// exprValue is one compiled expression.
type exprValue struct {
	prog *vm.Program
	c    *Compiler
	// src is the template the expression came from and offset where the
	// expression starts in it, to report run-time errors by column.
	src    string
	offset int
	// refs are the context names it reads (see Refs).
	refs []string
}

func (e *exprValue) Eval(env map[string]any) (any, error) {
	v, err := e.eval(env)
	if err != nil {
		return nil, err
	}
	return normalize(v, e.c.limits.MaxResultBytes)
}

func (e *exprValue) eval(env map[string]any) (_ any, err error) {
	defer recoverInto("expression evaluation", &err)
	m := e.c.vms.Get().(*vm.VM)
	m.MemoryBudget = e.c.vmBudget
	out, err := m.Run(e.prog, env)
	// Drop references into env so pooled VMs do not keep contexts alive.
	clear(m.Stack[:cap(m.Stack)])
	clear(m.Variables)
	e.c.vms.Put(m)
	if err != nil {
		return nil, e.runError(err)
	}
	return out, nil
}

func (e *exprValue) runError(err error) error {
	var pe *PathError
	if errors.As(err, &pe) {
		return pe
	}
	var le *LimitError
	if errors.As(err, &le) {
		return le
	}
	var fe *file.Error
	if errors.As(err, &fe) {
		if strings.Contains(fe.Message, "memory budget exceeded") {
			return e.c.memoryLimitError()
		}
		_, col := e.position(fe.From)
		return fmt.Errorf("%s (column %d)", fe.Message, col)
	}
	return err
}

// position turns a rune offset in the expression into a line and column of
// the whole template.
func (e *exprValue) position(runeOff int) (line, col int) {
	return position(e.src, e.offset+runeToByte(e.src[e.offset:], runeOff))
}

func runeToByte(s string, n int) int {
	for i := range s {
		if n == 0 {
			return i
		}
		n--
	}
	return len(s)
}

func (c *Compiler) memoryLimitError() error {
	return &LimitError{Limit: "MaxMemory", Max: int64(c.limits.MaxMemory), What: "evaluation allocated too much"}
}

// compileExpr compiles src, an expression found at byte offset off of tmpl.
func (c *Compiler) compileExpr(src, tmpl string, off int) (_ *exprValue, err error) {
	defer recoverInto("expression compile", &err)
	if len(tmpl) > c.limits.MaxSource {
		return nil, sourceLimitError(len(tmpl), c.limits.MaxSource)
	}
	e := &exprValue{c: c, src: tmpl, offset: off}
	syntaxErr := func(runeOff int, msg string) error {
		line, col := e.position(runeOff)
		return &SyntaxError{Line: line, Column: col, Msg: msg}
	}
	if strings.TrimSpace(src) == "" {
		return nil, syntaxErr(0, "empty expression")
	}
	cfg := c.config()
	tree, err := parser.ParseWithConfig(src, cfg)
	if err != nil {
		return nil, c.compileError(err, syntaxErr)
	}
	rw := &rewriter{}
	tree.Node = rw.node(tree.Node, false)
	if rw.err != nil {
		return nil, syntaxErr(rw.errAt, rw.err.Error())
	}
	if rw.needBudget {
		root := &ast.VariableDeclaratorNode{
			Name:  varBudg,
			Value: &ast.CallNode{Callee: &ast.IdentifierNode{Value: fnBudget}},
			Expr:  tree.Node,
		}
		root.SetLocation(tree.Node.Location())
		tree.Node = root
	}
	if _, err := checker.Check(tree, cfg); err != nil {
		return nil, c.compileError(err, syntaxErr)
	}
	if err := optimizer.Optimize(&tree.Node, cfg); err != nil {
		return nil, c.compileError(err, syntaxErr)
	}
	prog, err := compiler.Compile(tree, cfg)
	if err != nil {
		return nil, c.compileError(err, syntaxErr)
	}
	e.prog = prog
	e.refs = rw.refs
	return e, nil
}

func (c *Compiler) compileError(err error, syntaxErr func(int, string) error) error {
	var fe *file.Error
	if !errors.As(err, &fe) {
		return err
	}
	if strings.Contains(fe.Message, "maximum allowed nodes") {
		return &LimitError{Limit: "MaxNodes", Max: int64(c.limits.MaxNodes), What: "expression too complex"}
	}
	return syntaxErr(fe.From, fe.Message)
}

// config returns a fresh expr configuration: the rewrite's functions, the
// node limit, no environment (every name is looked up through rune:get).
func (c *Compiler) config() *conf.Config {
	cfg := conf.CreateNew()
	cfg.MaxNodes = uint(c.limits.MaxNodes)
	cfg.Strict = false
	add := func(name string, fn func(...any) (any, error)) {
		cfg.Functions[name] = &builtin.Function{Name: name, Func: fn}
	}
	add(fnGet, getFn)
	add(fnIndex, indexFn)
	add(fnTick, tickFn)
	add(fnAdd, addFn)
	add(fnMod, modFn)
	add(fnGuard, guardFn)
	add(fnRepeat, repeatFn)
	add(fnBudget, c.newBudget)
	return cfg
}

// rewriter turns an expression's paths into checked lookups and instruments
// loops and growing operations (see the package comment).
type rewriter struct {
	lets       []string
	refs       []string // context names read, see Refs
	needBudget bool
	err        error
	errAt      int
}

func (r *rewriter) fail(n ast.Node, format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf(format, args...)
		r.errAt = n.Location().From
	}
}

func (r *rewriter) isLet(name string) bool {
	for i := len(r.lets) - 1; i >= 0; i-- {
		if r.lets[i] == name {
			return true
		}
	}
	return false
}

func call(at ast.Node, name string, args ...ast.Node) ast.Node {
	n := &ast.CallNode{Callee: &ast.IdentifierNode{Value: name}, Arguments: args}
	n.SetLocation(at.Location())
	n.Callee.SetLocation(at.Location())
	return n
}

func (r *rewriter) budget(at ast.Node) ast.Node {
	r.needBudget = true
	n := &ast.IdentifierNode{Value: varBudg}
	n.SetLocation(at.Location())
	return n
}

func constNode(at ast.Node, v any) ast.Node {
	n := &ast.ConstantNode{Value: v}
	n.SetLocation(at.Location())
	return n
}

// node rewrites n. lenient is set on the left of ?? and before ?.: there a
// missing path yields nil.
func (r *rewriter) node(n ast.Node, lenient bool) ast.Node {
	if n == nil || r.err != nil {
		return n
	}
	switch n := n.(type) {
	case *ast.IdentifierNode:
		if r.isLet(n.Value) || n.Value == "$env" {
			return n
		}
		if n.Value == "null" {
			return constNode(n, nil) // JSON's spelling of expr's nil
		}
		if !strings.HasPrefix(n.Value, "$") {
			r.fail(n, "unknown name %s (names of the context start with $, as in $trigger)", n.Value)
			return n
		}
		return r.path(n, lenient)
	case *ast.MemberNode:
		if n.Optional {
			n.Node = r.node(n.Node, true)
			if _, ok := constKey(n.Property); !ok {
				n.Property = r.node(n.Property, false)
			}
			return n
		}
		if _, ok := constKey(n.Property); ok {
			return r.path(n, lenient)
		}
		text := n.String()
		base := r.node(n.Node, lenient)
		key := r.node(n.Property, false)
		return call(n, fnIndex, base, key, constNode(n, &pathSpec{texts: []string{text}, lenient: lenient}))
	case *ast.ChainNode:
		n.Node = r.node(n.Node, lenient)
		return n
	case *ast.BinaryNode:
		switch n.Operator {
		case "??":
			n.Left = r.node(n.Left, true)
			n.Right = r.node(n.Right, false)
			return n
		case "+":
			n.Left = r.node(n.Left, false)
			n.Right = r.node(n.Right, false)
			if isNumberLiteral(n.Left) || isNumberLiteral(n.Right) {
				return n // cannot concatenate strings: nothing to charge
			}
			return call(n, fnAdd, r.budget(n), n.Left, n.Right)
		case "%":
			// JSON numbers are float64; expr's % takes integers only.
			return call(n, fnMod, r.node(n.Left, false), r.node(n.Right, false))
		}
		n.Left = r.node(n.Left, false)
		n.Right = r.node(n.Right, false)
		return n
	case *ast.UnaryNode:
		n.Node = r.node(n.Node, false)
		return n
	case *ast.SliceNode:
		n.Node = r.node(n.Node, false)
		n.From = r.node(n.From, false)
		n.To = r.node(n.To, false)
		return n
	case *ast.CallNode:
		// Builtins parse as BuiltinNode and the context holds no functions:
		// what remains are methods of values builtins return, such as
		// date(x).Year().
		m, ok := n.Callee.(*ast.MemberNode)
		if !ok {
			r.fail(n, "unknown function %s", n.Callee)
			return n
		}
		m.Node = r.node(m.Node, false)
		for i := range n.Arguments {
			n.Arguments[i] = r.node(n.Arguments[i], false)
		}
		return n
	case *ast.BuiltinNode:
		for i, a := range n.Arguments {
			if p, ok := a.(*ast.PredicateNode); ok {
				p.Node = call(p.Node, fnTick, r.budget(p), r.node(p.Node, false))
				continue
			}
			n.Arguments[i] = r.node(a, false)
		}
		switch n.Name {
		case "toJSON", "string", "flatten":
			// Their cost is the deep size of the argument, which shared
			// sub-arrays can make exponential in the expression's size.
			if len(n.Arguments) > 0 {
				n.Arguments[0] = call(n.Arguments[0], fnGuard, r.budget(n), n.Arguments[0])
			}
		case "repeat":
			return call(n, fnRepeat, append([]ast.Node{r.budget(n)}, n.Arguments...)...)
		}
		return n
	case *ast.PredicateNode:
		n.Node = call(n.Node, fnTick, r.budget(n), r.node(n.Node, false))
		return n
	case *ast.VariableDeclaratorNode:
		if strings.HasPrefix(n.Name, "$") {
			r.fail(n, "variable %s: names starting with $ are reserved for the context", n.Name)
			return n
		}
		n.Value = r.node(n.Value, false)
		r.lets = append(r.lets, n.Name)
		n.Expr = r.node(n.Expr, false)
		r.lets = r.lets[:len(r.lets)-1]
		return n
	case *ast.SequenceNode:
		for i := range n.Nodes {
			n.Nodes[i] = r.node(n.Nodes[i], false)
		}
		return n
	case *ast.ConditionalNode:
		n.Cond = r.node(n.Cond, false)
		n.Exp1 = r.node(n.Exp1, false)
		n.Exp2 = r.node(n.Exp2, false)
		return n
	case *ast.ArrayNode:
		for i := range n.Nodes {
			n.Nodes[i] = r.node(n.Nodes[i], false)
		}
		return n
	case *ast.MapNode:
		for i := range n.Pairs {
			n.Pairs[i] = r.node(n.Pairs[i], false)
		}
		return n
	case *ast.PairNode:
		if _, ok := n.Key.(*ast.StringNode); !ok {
			n.Key = r.node(n.Key, false)
		}
		n.Value = r.node(n.Value, false)
		return n
	default:
		// Literals and # pointers.
		return n
	}
}

func isNumberLiteral(n ast.Node) bool {
	switch n := n.(type) {
	case *ast.IntegerNode, *ast.FloatNode:
		return true
	case *ast.UnaryNode:
		return isNumberLiteral(n.Node)
	}
	return false
}

// constKey returns the key of a member access with a literal property.
func constKey(n ast.Node) (any, bool) {
	switch n := n.(type) {
	case *ast.StringNode:
		return n.Value, true
	case *ast.IntegerNode:
		return n.Value, true
	case *ast.UnaryNode:
		if i, ok := n.Node.(*ast.IntegerNode); ok && n.Operator == "-" {
			return -i.Value, true
		}
	}
	return nil, false
}

// path rewrites a chain of literal member accesses (and the context name it
// may start from) into one rune:get call.
func (r *rewriter) path(n ast.Node, lenient bool) ast.Node {
	var keys []any
	cur := n
	for {
		m, ok := cur.(*ast.MemberNode)
		if !ok || m.Optional {
			break
		}
		k, ok := constKey(m.Property)
		if !ok {
			break
		}
		keys = append(keys, k)
		cur = m.Node
	}
	// keys were collected outermost first.
	for i, j := 0, len(keys)-1; i < j; i, j = i+1, j-1 {
		keys[i], keys[j] = keys[j], keys[i]
	}
	spec := &pathSpec{lenient: lenient}
	var base ast.Node
	var prefix string
	if id, ok := cur.(*ast.IdentifierNode); ok && strings.HasPrefix(id.Value, "$") && id.Value != "$env" && !r.isLet(id.Value) {
		spec.fromEnv = true
		r.ref(id.Value)
		if k, ok := firstKey(keys); ok && id.Value == "$node" {
			r.ref("$node." + k)
		}
		keys = append([]any{id.Value}, keys...)
		env := &ast.IdentifierNode{Value: "$env"}
		env.SetLocation(id.Location())
		base = env
	} else {
		prefix = cur.String()
		base = r.node(cur, lenient)
	}
	spec.keys = keys
	spec.texts = make([]string, len(keys))
	text := prefix
	for i, k := range keys {
		switch k := k.(type) {
		case string:
			if i == 0 && spec.fromEnv {
				text = k
			} else {
				text += keyPath(k)
			}
		case int:
			text += fmt.Sprintf("[%d]", k)
		}
		spec.texts[i] = text
	}
	return call(n, fnGet, base, constNode(n, spec))
}
