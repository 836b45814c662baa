package message

import (
	"bytes"
	"fmt"
	"sort"
	"strings"
)

// Invalid is the error of a message that decodes but breaks the protocol.
type Invalid struct {
	// Kind names the message type: "NodeExecution", "NodeStatus", ...
	Kind string
	// Problems lists every problem, each starting with the field it concerns.
	Problems []string
}

func (e *Invalid) Error() string {
	return fmt.Sprintf("invalid %s message: %s", e.Kind, strings.Join(e.Problems, "; "))
}

// problems collects what is wrong with one message.
type problems struct {
	kind string
	list []string
}

func (p *problems) add(field, format string, args ...any) {
	p.list = append(p.list, field+": "+fmt.Sprintf(format, args...))
}

func (p *problems) err() error {
	if len(p.list) == 0 {
		return nil
	}
	return &Invalid{Kind: p.kind, Problems: p.list}
}

// Id lengths: workflow ids as in the DSL; execution ids may carry a prefix
// or a derived suffix, so they get more room.
const (
	maxWorkflowIDLen  = 64
	maxExecutionIDLen = 128
	maxNodeIDLen      = 64
)

func (p *problems) ids(workflowID, executionID string) {
	p.id("workflow_id", workflowID, maxWorkflowIDLen)
	p.id("execution_id", executionID, maxExecutionIDLen)
}

// id checks ^[a-zA-Z0-9_-]{1,max}$.
func (p *problems) id(field, s string, limit int) {
	if s == "" {
		p.add(field, "missing")
		return
	}
	ok := len(s) <= limit
	for i := 0; ok && i < len(s); i++ {
		ok = isAlnum(s[i]) || s[i] == '_' || s[i] == '-'
	}
	if !ok {
		p.add(field, "%q is not valid: want 1 to %d letters, digits, \"_\" or \"-\"", short(s), limit)
	}
}

// nodeID checks ^[A-Za-z_][A-Za-z0-9_]{0,63}$ (dsl.md).
func (p *problems) nodeID(field, s string) {
	if s == "" {
		p.add(field, "missing")
		return
	}
	ok := len(s) <= maxNodeIDLen && !(s[0] >= '0' && s[0] <= '9')
	for i := 0; ok && i < len(s); i++ {
		ok = isAlnum(s[i]) || s[i] == '_'
	}
	if !ok {
		p.add(field, "%q is not a node id: want a letter or \"_\" followed by up to 63 letters, digits or \"_\"", short(s))
	}
}

func (p *problems) lineage(stack []Frame) {
	for i, f := range stack {
		at := fmt.Sprintf("lineage_stack[%d]", i)
		p.nodeID(at+".split_node_id", f.SplitNodeID)
		if f.TotalItems < 1 {
			p.add(at+".total_items", "%d, want 1 or more (an empty split opens no branch)", f.TotalItems)
		} else if f.ItemIndex < 0 || f.ItemIndex >= f.TotalItems {
			p.add(at+".item_index", "%d is out of range [0, %d)", f.ItemIndex, f.TotalItems)
		}
	}
}

// contextKeys checks that every key of a context is "$" and a name.
func (p *problems) contextKeys(field string, ctx map[string]any) {
	var bad []string
	for k := range ctx {
		if len(k) < 2 || k[0] != '$' {
			bad = append(bad, k)
		}
	}
	if len(bad) == 0 {
		return
	}
	sort.Strings(bad) // map order is random; messages must not be
	const show = 5
	quoted := make([]string, 0, show+1)
	for i, k := range bad {
		if i == show {
			quoted = append(quoted, fmt.Sprintf("and %d more", len(bad)-show))
			break
		}
		quoted = append(quoted, fmt.Sprintf("%q", short(k)))
	}
	p.add(field, "keys must be \"$\" followed by a name (\"$trigger\", \"$<node_id>\"), got %s", strings.Join(quoted, ", "))
}

// Validate checks m against RFC 001 §6.1 (with RFC 004's lineage stack and
// RFC 005's from_node) and returns an *Invalid listing every problem.
func (m *NodeExecution) Validate() error {
	p := problems{kind: "NodeExecution"}
	if m.MessageID == "" {
		p.add("message_id", "missing")
	}
	p.ids(m.WorkflowID, m.ExecutionID)
	p.nodeID("current_node", m.CurrentNode)
	if m.FromNode != "" {
		p.nodeID("from_node", m.FromNode)
	}
	if m.Attempt < 1 {
		p.add("attempt", "%d, want 1 or more", m.Attempt)
	}
	switch def := bytes.TrimSpace(m.WorkflowDefinition); {
	case (len(def) == 0 || string(def) == "null") && m.DefinitionRef != "":
		if !isRef(m.DefinitionRef) {
			p.add("definition_ref", "%q is not a definition reference (32 to 64 lowercase hex digits)", short(m.DefinitionRef))
		}
	case len(def) == 0 || string(def) == "null":
		p.add("workflow_definition", "missing")
	case def[0] != '{':
		p.add("workflow_definition", "want a JSON object, got %s", jsonKind(def))
	}
	if m.AccumulatedContext == nil {
		p.add("accumulated_context", "missing (an execution always carries at least $trigger)")
	}
	p.contextKeys("accumulated_context", m.AccumulatedContext)
	p.lineage(m.LineageStack)
	if m.Priority != 0 && (m.Priority < 1 || m.Priority > 10) {
		p.add("priority", "%d, want 1 (lowest) to 10 (highest), or absent (5)", m.Priority)
	}
	return p.err()
}

var statuses = []string{StatusRunning, StatusSuccess, StatusFailed, StatusWaiting, StatusRetrying, StatusSkipped,
	StatusPaused} // paused: issue 34

// Validate checks s against RFC 001 §6.2 and dsl.md "Statuses" and returns an
// *Invalid listing every problem.
func (s *NodeStatus) Validate() error {
	p := problems{kind: "NodeStatus"}
	p.ids(s.WorkflowID, s.ExecutionID)
	p.nodeID("node_id", s.NodeID)
	switch {
	case s.Status == "":
		p.add("status", "missing")
	case !oneOf(s.Status, statuses):
		p.add("status", "%q is not a status: want one of %s", short(s.Status), strings.Join(statuses, ", "))
	}
	if s.Status == StatusFailed && s.Error == nil {
		p.add("error", "missing: a failed status says why")
	}
	if s.Error != nil {
		p.errorObject("error", s.Error)
	}
	if s.DurationMS < 0 {
		p.add("duration_ms", "%d, want 0 or more", s.DurationMS)
	}
	if s.Attempt < 0 {
		p.add("attempt", "%d, want 1 or more (or none)", s.Attempt)
	}
	p.lineage(s.LineageStack)
	// reason (issue 35): a deferred run's, on a waiting status.
	if s.Reason != "" && (s.Status != StatusWaiting || len(s.Reason) > 64) {
		p.add("reason", "%q: a reason goes on a waiting status, at most 64 bytes", short(s.Reason))
	}
	return p.err()
}

func (p *problems) errorObject(field string, e *Error) {
	if e.Code == "" {
		p.add(field+".code", "missing")
	}
	if e.Message == "" {
		p.add(field+".message", "missing")
	}
}

var completionStatuses = []string{CompletionCompleted, CompletionFailed, CompletionHalted}

// Validate checks c against RFC 001 §6.3 and returns an *Invalid listing
// every problem.
func (c *Completion) Validate() error {
	p := problems{kind: "Completion"}
	p.ids(c.WorkflowID, c.ExecutionID)
	switch {
	case c.Status == "":
		p.add("status", "missing")
	case !oneOf(c.Status, completionStatuses):
		p.add("status", "%q is not a completion status: want one of %s", short(c.Status), strings.Join(completionStatuses, ", "))
	}
	// A failed execution may end before any context exists, so only the
	// keys are checked.
	p.contextKeys("final_context", c.FinalContext)
	if c.TotalDurationMS < 0 {
		p.add("total_duration_ms", "%d, want 0 or more", c.TotalDurationMS)
	}
	if f := c.FailureReason; f != nil {
		if f.NodeID != "" {
			p.nodeID("failure_reason.node_id", f.NodeID)
		}
		p.errorObject("failure_reason", &f.Error)
	}
	return p.err()
}

// Validate checks t and returns an *Invalid listing every problem.
func (t *Timeout) Validate() error {
	p := problems{kind: "Timeout"}
	p.ids(t.WorkflowID, t.ExecutionID)
	p.nodeID("node_id", t.NodeID)
	if t.Deadline.IsZero() {
		p.add("deadline", "missing")
	}
	p.lineage(t.LineageStack)
	if t.Message == nil {
		p.add("message", "missing")
	} else if err := t.Message.Validate(); err != nil {
		p.add("message", "%s", err.Error())
	}
	return p.err()
}

func oneOf(s string, set []string) bool {
	for _, x := range set {
		if s == x {
			return true
		}
	}
	return false
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func jsonKind(raw []byte) string {
	switch raw[0] {
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return "number"
	default:
		return "invalid JSON"
	}
}

// short truncates s for an error message: a message can be 10 MiB, its
// error line should not be.
func short(s string) string {
	const limit = 64
	if len(s) <= limit {
		return s
	}
	cut := limit
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}

// isRef says whether ref looks like a content reference: lowercase hex, 128
// to 256 bits.
func isRef(ref string) bool {
	if len(ref) < 32 || len(ref) > 64 {
		return false
	}
	for i := 0; i < len(ref); i++ {
		if c := ref[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
