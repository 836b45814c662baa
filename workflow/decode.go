package workflow

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/rune-org/rune/internal/suggest"
	"github.com/rune-org/rune/message"
)

// MaxDefinitionSize is the largest definition Decode accepts, in bytes. A
// definition travels inside every NodeExecution message (RFC 001 §6.1), whose
// limit is 10 MiB; half of it is left for the context.
const MaxDefinitionSize = 5 << 20

// Decode parses a JSON workflow definition strictly: malformed JSON is an
// error giving the line and column, and a field of the wrong type or a field
// the DSL does not know is a Problem at its JSON path. All such problems are
// returned at once as Problems. Decode does not check the graph: call
// Validate for that, or Load for both.
func Decode(data []byte) (*Definition, error) {
	def, ps, _, err := decode(data)
	if err != nil {
		return nil, err
	}
	if len(ps) > 0 {
		return nil, ps
	}
	return def, nil
}

// decode is Decode, also returning the definition when its only problems
// are unknown fields (partial false), which leave nothing else unset.
func decode(data []byte) (def *Definition, ps Problems, partial bool, err error) {
	if len(data) > MaxDefinitionSize {
		return nil, nil, false, fmt.Errorf("workflow definition is %d bytes, over the limit of %d bytes (5 MiB)", len(data), MaxDefinitionSize)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, nil, false, errors.New("workflow definition is empty")
	}
	// Checking the syntax of the whole document first means every later
	// error is about types, and syntax errors carry an offset into data.
	if !json.Valid(data) {
		var v any
		return nil, nil, false, syntaxError(data, json.Unmarshal(data, &v))
	}
	// The input policy: encoding/json would turn invalid UTF-8 into U+FFFD
	// silently, and a definition nested past it fails later in a message.
	if err := message.CheckJSON("definition", data); err != nil {
		return nil, nil, false, fmt.Errorf("workflow definition: %w", err)
	}
	var d decoder
	def = d.definition(data)
	return def, d.ps, d.partial, nil
}

// Load decodes data and validates it against types (which may be nil). The
// error is Problems whenever the JSON is well-formed, listing every problem:
// unknown fields are listed with the validation's problems. Validation is
// skipped after any other decoding problem: a field left empty by a type
// error would otherwise cause misleading follow-on problems.
func Load(data []byte, types NodeChecker) (*Definition, error) {
	d, ps, partial, err := decode(data)
	if err != nil {
		return nil, err
	}
	if partial {
		return nil, ps
	}
	if err := Validate(d, types); err != nil {
		var vps Problems
		if errors.As(err, &vps) {
			return nil, append(ps, vps...)
		}
		return nil, err
	}
	if len(ps) > 0 {
		return nil, ps
	}
	return d, nil
}

func syntaxError(data []byte, err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		line, col := position(data, se.Offset)
		return fmt.Errorf("workflow definition is not valid JSON: line %d, column %d: %v", line, col, err)
	}
	return fmt.Errorf("workflow definition is not valid JSON: %v", err)
}

// position turns the offset of a json.SyntaxError, which counts the bytes
// read including the offending one, into its 1-based line and column.
func position(data []byte, offset int64) (line, col int) {
	at := min(max(offset-1, 0), int64(len(data)))
	before := data[:at]
	line = 1 + bytes.Count(before, []byte{'\n'})
	col = int(at) - bytes.LastIndexByte(before, '\n')
	return line, col
}

// decoder decodes a definition field by field so that every problem gets a
// full JSON path with array indices, which encoding/json's errors lack.
type decoder struct {
	ps Problems
	// partial is set by every problem but an unknown field: one that
	// leaves part of the definition unset.
	partial bool
}

// maxDecodeProblems bounds the problems Decode lists: 5 MiB of unknown
// fields would otherwise make hundreds of megabytes of messages.
const maxDecodeProblems = 1000

func (d *decoder) report(path, format string, args ...any) {
	d.partial = true
	d.unknown(path, format, args...)
}

// unknown reports an unknown field, a problem that leaves the rest of the
// definition whole.
func (d *decoder) unknown(path, format string, args ...any) {
	switch {
	case len(d.ps) < maxDecodeProblems:
		d.ps = append(d.ps, Problem{Path: path, Message: fmt.Sprintf(format, args...)})
	case len(d.ps) == maxDecodeProblems:
		d.partial = true // the rest is not checked
		d.ps = append(d.ps, Problem{Message: fmt.Sprintf("more than %d problems; stopped listing them", maxDecodeProblems)})
	}
}

var (
	workflowFields = []string{"id", "name", "nodes", "edges", "settings"}
	settingsFields = []string{"fuse", "concurrency", "debounce", "priority"} // flow control: flow_settings.go
	nodeFields     = []string{"id", "name", "type", "trigger", "parameters", "credentials", "error", "retry", "timeout", "output",
		"rate_limit", "throttle"} // flow control by key (flow.go)
	edgeFields        = []string{"id", "src", "dst", "label"}
	credentialsFields = []string{"ref"}
	errorFields       = []string{"type", "error_edge"}
	retryFields       = []string{"max_attempts", "initial_delay", "multiplier", "on"}
)

// object decodes raw as a JSON object and reports its unknown fields. It
// returns false when raw is null or not an object.
func (d *decoder) object(raw json.RawMessage, path, what string, known []string) (map[string]json.RawMessage, bool) {
	if isNull(raw) {
		return nil, false
	}
	var f map[string]json.RawMessage
	if err := json.Unmarshal(raw, &f); err != nil {
		d.report(path, "want an object, got %s", jsonKind(raw))
		return nil, false
	}
	var unknown []string
	for k := range f {
		if !contains(known, k) {
			unknown = append(unknown, k)
		}
	}
	sort.Strings(unknown) // map order is random; problems must not be
	for _, k := range unknown {
		msg := fmt.Sprintf("unknown field (%s fields: %s)", what, strings.Join(known, ", "))
		if kn := suggest.Closest(k, known); kn != "" {
			msg = fmt.Sprintf("unknown field; did you mean %q?", kn)
		}
		d.unknown(join(path, truncate(k)), "%s", msg)
	}
	return f, true
}

// field decodes f[name], if present, into target and reports a type mismatch.
// It reports whether the field was present and decoded.
func (d *decoder) field(f map[string]json.RawMessage, path, name string, target any) bool {
	raw, ok := f[name]
	if !ok {
		return false
	}
	p := join(path, name)
	if err := json.Unmarshal(raw, target); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			d.report(p, "%s", typeMismatch(reflect.TypeOf(target).Elem(), raw))
		} else {
			d.report(p, "%v", err)
		}
		return false
	}
	return true
}

func (d *decoder) definition(raw json.RawMessage) *Definition {
	if k := jsonKind(raw); k != "object" {
		d.report("", "a workflow definition must be a JSON object, got %s", k)
		return nil
	}
	f, ok := d.object(raw, "", "workflow", workflowFields)
	if !ok {
		return nil
	}
	def := &Definition{}
	d.field(f, "", "id", &def.ID)
	d.field(f, "", "name", &def.Name)
	if raw, ok := f["settings"]; ok && !isNull(raw) {
		if s, ok := d.object(raw, "settings", "settings", settingsFields); ok {
			def.Settings = &Settings{}
			d.field(s, "settings", "fuse", &def.Settings.Fuse)
			d.flowSettings(s, def.Settings) // flow control (issue 35)
		}
	}
	var nodes, edges []json.RawMessage
	// The limits of Validate apply here too, so that a 5 MiB array of
	// empty objects cannot become a million decoded nodes.
	if d.field(f, "", "nodes", &nodes) && len(nodes) > MaxNodes {
		d.report("nodes", "%d nodes, over the limit of %d", len(nodes), MaxNodes)
	} else if nodes != nil {
		def.Nodes = make([]Node, len(nodes))
		for i, n := range nodes {
			d.node(n, fmt.Sprintf("nodes[%d]", i), &def.Nodes[i])
		}
	}
	if d.field(f, "", "edges", &edges) && len(edges) > MaxEdges {
		d.report("edges", "%d edges, over the limit of %d", len(edges), MaxEdges)
	} else if edges != nil {
		def.Edges = make([]Edge, len(edges))
		for i, e := range edges {
			d.edge(e, fmt.Sprintf("edges[%d]", i), &def.Edges[i])
		}
	}
	return def
}

func (d *decoder) node(raw json.RawMessage, path string, n *Node) {
	f, ok := d.object(raw, path, "node", nodeFields)
	if !ok {
		if isNull(raw) {
			d.report(path, "want a node object, got null")
		}
		return
	}
	d.field(f, path, "id", &n.ID)
	d.field(f, path, "name", &n.Name)
	d.field(f, path, "type", &n.Type)
	d.field(f, path, "trigger", &n.Trigger)
	d.field(f, path, "parameters", &n.Parameters)
	d.field(f, path, "timeout", &n.Timeout)
	if raw, ok := f["output"]; ok {
		n.Output = raw // a copy: json.RawMessage copies what it decodes
	}
	if raw, ok := f["credentials"]; ok {
		p := join(path, "credentials")
		if cf, ok := d.object(raw, p, "credentials", credentialsFields); ok {
			n.Credentials = &CredentialRef{}
			d.credentialRef(cf, p, n.Credentials) // a name, or a failover list
		}
	}
	if raw, ok := f["error"]; ok {
		p := join(path, "error")
		if ef, ok := d.object(raw, p, "error", errorFields); ok {
			n.Error = &ErrorPolicy{}
			d.field(ef, p, "type", &n.Error.Type)
			d.field(ef, p, "error_edge", &n.Error.ErrorEdge)
		}
	}
	if raw, ok := f["retry"]; ok {
		p := join(path, "retry")
		if rf, ok := d.object(raw, p, "retry", retryFields); ok {
			r := &RetryPolicy{}
			n.Retry = r
			// Zero means "default" in RetryPolicy, so an explicit zero can
			// only be caught here, before it is lost.
			if d.field(rf, p, "max_attempts", &r.MaxAttempts) && r.MaxAttempts == 0 {
				d.report(join(p, "max_attempts"), "%s", maxAttemptsProblem(0))
			}
			d.field(rf, p, "initial_delay", &r.InitialDelay)
			if d.field(rf, p, "multiplier", &r.Multiplier) && r.Multiplier == 0 {
				d.report(join(p, "multiplier"), "%s", multiplierProblem(0))
			}
			d.field(rf, p, "on", &r.On)
		}
	}
	d.flowControl(f, path, n)
}

func (d *decoder) edge(raw json.RawMessage, path string, e *Edge) {
	f, ok := d.object(raw, path, "edge", edgeFields)
	if !ok {
		if isNull(raw) {
			d.report(path, "want an edge object, got null")
		}
		return
	}
	d.field(f, path, "id", &e.ID)
	d.field(f, path, "src", &e.Src)
	d.field(f, path, "dst", &e.Dst)
	d.field(f, path, "label", &e.Label)
}

// typeMismatch says what a field wanted and what the JSON held.
func typeMismatch(want reflect.Type, raw json.RawMessage) string {
	got := jsonKind(raw)
	var w string
	switch want.Kind() {
	case reflect.String:
		w = "a string"
	case reflect.Bool:
		w = "true or false"
	case reflect.Int, reflect.Int64, reflect.Int32:
		w = "a number"
		if got == "number" {
			return fmt.Sprintf("want a whole number within range, got %s", truncate(string(bytes.TrimSpace(raw))))
		}
	case reflect.Float64, reflect.Float32:
		w = "a number"
	case reflect.Map, reflect.Struct:
		w = "an object"
	case reflect.Slice:
		w = "an array"
	default:
		w = want.String()
	}
	return fmt.Sprintf("want %s, got %s", w, got)
}

// jsonKind names the kind of a valid JSON value.
func jsonKind(raw json.RawMessage) string {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 {
		return "nothing"
	}
	switch t[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	default:
		return "number"
	}
}

func isNull(raw json.RawMessage) bool {
	return string(bytes.TrimSpace(raw)) == "null"
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func join(path, field string) string {
	if path == "" {
		return field
	}
	return path + "." + field
}

// truncate shortens s for an error message, so that a huge value in a
// definition does not blow up every problem that mentions it.
func truncate(s string) string {
	const limit = 64
	if len(s) <= limit {
		return s
	}
	cut := limit
	for cut > 0 && !isRuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }
