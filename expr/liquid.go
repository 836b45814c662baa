package expr

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/osteele/liquid"
	"github.com/osteele/liquid/filters"
	"github.com/osteele/liquid/render"
	"github.com/osteele/liquid/values"
)

// Liquid identifiers cannot start with "$", so "$name" in markup is
// rewritten to liquidPrefix+"name" and bound under that name.
const liquidPrefix = "__rune_"

// Names of the tick tag and of the binding holding an evaluation's budget.
const (
	liquidTick   = "__rune_tick"
	liquidBudget = "__rune_budget"
)

func newLiquidEngine(lim *Limits) *liquid.Engine {
	e := liquid.NewEngine()
	// include and render read templates from files.
	e.UnregisterTag("include")
	e.UnregisterTag("render")
	// Several filters multiply the size of their input (append, replace,
	// url_encode, escape, json, concat, ...); chained, they grow
	// exponentially. Every standard filter is wrapped so that a result over
	// MaxMemory fails.
	filters.AddStandardFilters(filterAdder(func(name string, fn any) {
		e.RegisterFilter(name, sizeCheckedFilter(name, fn, lim))
	}))
	registerLiquidJSFilters(e)
	e.RegisterTag(liquidTick, func(ctx render.Context) (string, error) {
		b, ok := ctx.Get(liquidBudget).(*liquidBudgetState)
		if !ok {
			return "", nil
		}
		return "", b.tick(ctx)
	})
	return e
}

type filterAdder func(string, any)

func (f filterAdder) AddFilter(name string, fn any) { f(name, fn) }

var errorType = reflect.TypeFor[error]()

const filterLimitMsg = "filter result too large"

// sizeCheckedFilter wraps fn, a Liquid filter, in a function that fails
// when fn's result is over MaxMemory. Array parameters are taken as any and
// converted here, after a check: Liquid would otherwise expand a range such
// as (1..999999999) into an array before any check could run.
func sizeCheckedFilter(name string, fn any, lim *Limits) any {
	fv := reflect.ValueOf(fn)
	ft := fv.Type()
	ins := make([]reflect.Type, ft.NumIn())
	converted := make([]bool, ft.NumIn())
	for i := range ins {
		ins[i] = ft.In(i)
		variadic := ft.IsVariadic() && i == ft.NumIn()-1
		if k := ins[i].Kind(); !variadic && (k == reflect.Slice || k == reflect.Array) {
			ins[i], converted[i] = anyType, true
		}
	}
	outs := []reflect.Type{ft.Out(0), errorType}
	wt := reflect.FuncOf(ins, outs, ft.IsVariadic())
	fail := func(err error) []reflect.Value {
		return []reflect.Value{reflect.Zero(ft.Out(0)), reflect.ValueOf(&err).Elem()}
	}
	maxElems := lim.MaxMemory / 16
	return reflect.MakeFunc(wt, func(args []reflect.Value) []reflect.Value {
		for i, ok := range converted {
			if !ok {
				continue
			}
			a := args[i].Interface()
			if r, isRange := a.(values.Range); isRange && r.Len() > maxElems {
				return fail(&LimitError{Limit: "MaxMemory", Max: int64(lim.MaxMemory), What: filterLimitMsg})
			}
			c, err := values.Convert(a, ft.In(i))
			if err != nil {
				return fail(err)
			}
			if c == nil {
				args[i] = reflect.Zero(ft.In(i))
			} else {
				args[i] = reflect.ValueOf(c)
			}
		}
		var res []reflect.Value
		if ft.IsVariadic() {
			res = fv.CallSlice(args)
		} else {
			res = fv.Call(args)
		}
		if len(res) > 1 && !res[1].IsNil() {
			return []reflect.Value{res[0], res[1]}
		}
		if _, ok := jsonSize(res[0].Interface(), lim.MaxMemory); !ok {
			return fail(&LimitError{Limit: "MaxMemory", Max: int64(lim.MaxMemory), What: filterLimitMsg})
		}
		return []reflect.Value{res[0], reflect.Zero(errorType)}
	}).Interface()
}

var anyType = reflect.TypeFor[any]()

// liquidBudgetState is one rendering's account of loop iterations, time and
// the size of the variables the template assigns.
type liquidBudgetState struct {
	lim   *Limits
	start time.Time
	iters int
	vars  []string
	err   error
}

// tick runs at the start of every loop iteration and after every assign
// and capture (the tick tag is inserted there at compile time).
func (b *liquidBudgetState) tick(ctx render.Context) error {
	b.iters++
	switch {
	case b.iters > b.lim.MaxIterations:
		b.err = &LimitError{Limit: "MaxIterations", Max: int64(b.lim.MaxIterations), What: "too many loop iterations"}
	case b.iters%clockEvery == 0 && time.Since(b.start) > b.lim.MaxDuration:
		b.err = &LimitError{Limit: "MaxDuration", Max: int64(b.lim.MaxDuration), What: "rendering took too long"}
	default:
		size := 0
		for _, v := range b.vars {
			size += shallowSize(ctx.Get(v))
		}
		if size > b.lim.MaxMemory {
			b.err = &LimitError{Limit: "MaxMemory", Max: int64(b.lim.MaxMemory), What: "template variables too large"}
		}
	}
	return b.err
}

// SubscriberVar is the one name without "$" a template may read: the email
// and sms nodes that name a subscriber put it in the env
// ({{ subscriber.data.first_name }}, issue 36). Absent, it renders as
// nothing, as a missing name does in Liquid.
const SubscriberVar = "subscriber"

// Liquid compiles a Liquid template (tags such as {% if %} and {% for %},
// filters such as upcase, default and date) rendered against the context,
// "$" names included: {{ $trigger.name | upcase }}. Eval yields a string.
//
// A "$name" that is not in the context is an error; a missing key below it
// renders as nothing, as Liquid does, so that the default filter works.
func (c *Compiler) Liquid(src string) (Value, error) {
	if len(src) > c.limits.MaxSource {
		return nil, sourceLimitError(len(src), c.limits.MaxSource)
	}
	rewritten, names, vars, err := rewriteLiquid(src)
	if err != nil {
		return nil, err
	}
	t, err := c.parseLiquid(rewritten)
	if err != nil {
		return nil, err
	}
	return &liquidValue{t: t, names: names, vars: vars, c: c}, nil
}

// parseLiquid parses a rewritten template; a panic in Liquid's lexer or
// parser (found by FuzzCompileEval: an integer literal out of int64's range)
// is an error of this template.
func (c *Compiler) parseLiquid(src string) (t *liquid.Template, err error) {
	c.liquidMu.Lock()
	defer c.liquidMu.Unlock()
	defer recoverInto("liquid parse", &err)
	t, serr := c.liquid.ParseString(src)
	if serr != nil {
		return nil, errors.New(unrewrite(serr.Error()))
	}
	return t, nil
}

type liquidValue struct {
	t     *liquid.Template
	names []string // context names used, without "$"
	vars  []string // variables the template assigns or captures
	c     *Compiler
}

func (l *liquidValue) Eval(env map[string]any) (out any, err error) {
	// osteele/liquid panics on some malformed tags at render time (found by
	// FuzzLiquid: "{%case {%when ''%}{%endcase%}"): that is the template's
	// error, never the process's.
	defer func() {
		if p := recover(); p != nil {
			msg, _, _ := strings.Cut(unrewrite(fmt.Sprint(p)), "\n") // no stack trace
			out, err = nil, fmt.Errorf("liquid: the template cannot be rendered: %.200s", msg)
		}
	}()
	b := make(map[string]any, len(l.names)+1)
	for _, n := range l.names {
		v, ok := env["$"+n]
		if !ok {
			return nil, &PathError{Path: "$" + n, Msg: "not defined"}
		}
		b[liquidPrefix+n] = v
	}
	// A plain name a runner adds to the env for its own templates.
	if v, ok := env[SubscriberVar]; ok {
		b[SubscriberVar] = v
	}
	now := time.Now()
	budget := &liquidBudgetState{lim: &l.c.limits, start: now, vars: l.vars}
	b[liquidBudget] = budget
	w := &limitWriter{lim: &l.c.limits, start: now}
	if err := l.render(w, b); err != nil {
		var le *LimitError
		switch {
		case w.err != nil:
			return nil, w.err
		case budget.err != nil:
			return nil, budget.err
		case errors.As(err, &le):
			return nil, le
		case strings.Contains(err.Error(), filterLimitMsg):
			// Liquid flattens filter errors into text.
			return nil, &LimitError{Limit: "MaxMemory", Max: int64(l.c.limits.MaxMemory), What: filterLimitMsg}
		}
		return nil, errors.New(unrewrite(err.Error()))
	}
	return w.b.String(), nil
}

// render runs the template; a panic in Liquid is an error of this evaluation.
func (l *liquidValue) render(w *limitWriter, b map[string]any) (err error) {
	defer recoverInto("liquid render", &err)
	return l.t.FRender(w, b)
}

// limitWriter collects Liquid output up to MaxResultBytes and stops a render
// that runs past MaxDuration: every loop iteration that outputs anything
// passes through Write.
type limitWriter struct {
	b      strings.Builder
	lim    *Limits
	start  time.Time
	writes int
	err    error
}

func (w *limitWriter) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	if w.b.Len()+len(p) > w.lim.MaxResultBytes {
		w.err = resultLimitError(w.lim.MaxResultBytes)
		return 0, w.err
	}
	w.writes++
	if w.writes%clockEvery == 0 && time.Since(w.start) > w.lim.MaxDuration {
		w.err = &LimitError{Limit: "MaxDuration", Max: int64(w.lim.MaxDuration), What: "rendering took too long"}
		return 0, w.err
	}
	return w.b.Write(p)
}

var (
	liquidMarkup = regexp.MustCompile(`\{\{|\{%`)
	liquidRaw    = regexp.MustCompile(`^\{%-?\s*raw\s*-?%\}`)
	liquidEndRaw = regexp.MustCompile(`\{%-?\s*endraw\s*-?%\}`)
)

// rewriteLiquid renames "$name" inside {{ }} and {% %} markup (outside string
// literals and raw blocks) and lists the names. It also inserts the tick tag
// at the start of every loop body and after every assign and capture, and
// lists the variables those set.
func rewriteLiquid(src string) (out string, names, vars []string, err error) {
	var b strings.Builder
	addVar := func(v string) {
		if v != "" && !slices.Contains(vars, v) {
			vars = append(vars, v)
		}
	}
	seen := map[string]bool{}
	i := 0
	for {
		loc := liquidMarkup.FindStringIndex(src[i:])
		if loc == nil {
			b.WriteString(src[i:])
			break
		}
		start := i + loc[0]
		b.WriteString(src[i:start])
		if m := liquidRaw.FindString(src[start:]); m != "" {
			end := liquidEndRaw.FindStringIndex(src[start+len(m):])
			if end == nil {
				b.WriteString(src[start:])
				break
			}
			stop := start + len(m) + end[1]
			b.WriteString(src[start:stop])
			i = stop
			continue
		}
		closer := "}}"
		if src[start+1] == '%' {
			closer = "%}"
		}
		b.WriteString(src[start : start+2])
		j := start + 2
		var quote byte
		for j < len(src) {
			ch := src[j]
			if quote != 0 {
				if ch == quote {
					quote = 0
				}
				b.WriteByte(ch)
				j++
				continue
			}
			if ch == '"' || ch == '\'' {
				quote = ch
			} else if ch == '\n' && closer == "}}" {
				// osteele/liquid does not recognise {{ }} spanning lines
				// (LiquidJS does): outside strings a newline is a space.
				ch = ' '
			} else if strings.HasPrefix(src[j:], closer) {
				break
			} else if ch == '$' && j+1 < len(src) && isIdentStart(src[j+1]) {
				k := j + 1
				for k < len(src) && isIdentByte(src[k]) {
					k++
				}
				name := src[j+1 : k]
				if !seen[name] {
					seen[name] = true
					names = append(names, name)
				}
				b.WriteString(liquidPrefix)
				b.WriteString(name)
				j = k
				continue
			}
			b.WriteByte(ch)
			j++
		}
		if j >= len(src) {
			line, col := position(src, start)
			return "", nil, nil, &SyntaxError{Line: line, Column: col, Msg: "unclosed " + src[start:start+2]}
		}
		b.WriteString(closer)
		i = j + 2
		if closer == "%}" {
			words := strings.Fields(strings.Trim(src[start+2:j], "-"))
			if len(words) == 0 {
				continue
			}
			switch words[0] {
			case "assign":
				if len(words) > 1 {
					name, _, _ := strings.Cut(words[1], "=")
					addVar(name)
				}
			case "capture":
				if len(words) > 1 {
					addVar(strings.Trim(words[1], `"'`))
				}
				continue
			case "for", "tablerow", "endcapture":
			default:
				continue
			}
			// The tick inherits a right trim ("-%}") so that the whitespace
			// after the tag is still trimmed.
			if strings.HasSuffix(src[start+2:j], "-") {
				b.WriteString("{% " + liquidTick + " -%}")
			} else {
				b.WriteString("{% " + liquidTick + " %}")
			}
		}
	}
	return b.String(), names, vars, nil
}

func isIdentStart(b byte) bool {
	return b == '_' || (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z')
}

func isIdentByte(b byte) bool { return isIdentStart(b) || (b >= '0' && b <= '9') }

// unrewrite turns rewritten names in Liquid's messages back into "$" names.
func unrewrite(msg string) string { return strings.ReplaceAll(msg, liquidPrefix, "$") }
