package workflow

import (
	"fmt"
	"slices"
	"strings"

	"github.com/rune-org/rune/internal/suggest"
)

// Problem is one thing wrong with a definition, at a JSON path such as
// "nodes[3].parameters.true_edge_id".
type Problem struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

func (p Problem) String() string {
	if p.Path == "" {
		return p.Message
	}
	return p.Path + ": " + p.Message
}

// Problems is every problem found in a definition. As an error it lists them
// one per line.
type Problems []Problem

func (ps Problems) Error() string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.String()
	}
	return fmt.Sprintf("invalid workflow: %d problem(s):\n  %s", len(ps), strings.Join(lines, "\n  "))
}

// NodeChecker checks what only a node's type knows: its parameters.
// node.Registry implements it.
type NodeChecker interface {
	CheckNode(c *NodeCheck)
}

// NodeCheck is what a node type sees while checking one node.
type NodeCheck struct {
	Node *Node
	// Path is the node's JSON path, "nodes[3]".
	Path string
	// Outgoing are the edges that leave the node.
	Outgoing []Edge
	problems *Problems
	// names are the context names the workflow's nodes give ("$fetch"),
	// nil when unknown (References then checks nothing).
	names *contextNames
}

// NewNodeCheck returns a check of node n at path whose problems are appended to ps.
func NewNodeCheck(n *Node, path string, outgoing []Edge, ps *Problems) *NodeCheck {
	return &NodeCheck{Node: n, Path: path, Outgoing: outgoing, problems: ps}
}

// Report records a problem at field, a path relative to the node
// ("parameters.true_edge_id").
func (c *NodeCheck) Report(field, format string, args ...any) {
	*c.problems = append(*c.problems, Problem{Path: c.Path + "." + field, Message: fmt.Sprintf(format, args...)})
}

// References reports, at field, each context name in refs (as expr.Refs
// lists them: "$fetch", "$node.fetch") that neither the engine nor a node
// of the workflow defines: such a reference could only fail when the node
// runs.
func (c *NodeCheck) References(field string, refs []string) {
	if c.names == nil {
		return
	}
	for _, r := range refs {
		if msg := c.names.check(r); msg != "" {
			c.Report(field, "%s", msg)
		}
	}
}

// EdgeHint is "; did you mean "e_big"?" when id, which does not leave the
// node, is a near miss of an edge that does; "" otherwise.
func (c *NodeCheck) EdgeHint(id string) string { return edgeHint(c.Outgoing, id) }

func edgeHint(out []Edge, id string) string {
	ids := make([]string, len(out))
	for i, e := range out {
		ids[i] = e.ID
	}
	if s := suggest.Closest(id, ids); s != "" {
		return fmt.Sprintf("; did you mean %q?", s)
	}
	return ""
}

// LeavesNode reports whether edge id is one of the node's outgoing edges.
func (c *NodeCheck) LeavesNode(id string) bool {
	for _, e := range c.Outgoing {
		if e.ID == id {
			return true
		}
	}
	return false
}

// contextNames are the names an expression of a workflow may read.
type contextNames struct {
	// ids are the node ids whose output is in the context, the trigger's
	// excepted: its output is $trigger.
	ids     map[string]bool
	trigger string
	// names and nodeKeys are the candidates of suggestions for a name and
	// for a key of $node.
	names, nodeKeys []string
	// suggested counts the suggestions made: each costs a pass over the
	// names, so a definition full of bad references gets only the first.
	suggested int
}

const maxSuggestions = 100

func newContextNames(d *Definition) *contextNames {
	cn := &contextNames{ids: make(map[string]bool, len(d.Nodes)), nodeKeys: []string{"trigger", "error"}}
	for k := range reservedIDs {
		cn.names = append(cn.names, k)
	}
	slices.Sort(cn.names)
	for i := range d.Nodes {
		n := &d.Nodes[i]
		switch {
		case n.Trigger:
			cn.trigger = n.ID
		case ValidNodeID(n.ID) && !cn.ids[n.ID]:
			cn.ids[n.ID] = true
			cn.names = append(cn.names, n.ID)
			cn.nodeKeys = append(cn.nodeKeys, n.ID)
		}
	}
	return cn
}

// check returns what is wrong with the reference r, or "".
func (cn *contextNames) check(r string) string {
	name, ok := strings.CutPrefix(r, "$")
	if !ok || name == "env" {
		return ""
	}
	if key, ok := strings.CutPrefix(name, "node."); ok {
		switch {
		case key == "trigger" || key == "error" || cn.ids[key]:
			return ""
		case key == cn.trigger:
			return fmt.Sprintf("%s: the trigger's output is $node.trigger, whatever the trigger node's id", r)
		}
		return cn.unknown("$node.", key, cn.nodeKeys)
	}
	switch {
	case reservedIDs[name] || cn.ids[name]:
		return ""
	case name == cn.trigger:
		return fmt.Sprintf("%s: the trigger's output is $trigger, whatever the trigger node's id", r)
	}
	return cn.unknown("$", name, cn.names)
}

// unknown says that id names no node, with a suggestion when one is near.
func (cn *contextNames) unknown(prefix, id string, candidates []string) string {
	msg := fmt.Sprintf("%s%s: no node %q in this workflow", prefix, truncate(id), truncate(id))
	if cn.suggested < maxSuggestions {
		cn.suggested++
		if s := suggest.Closest(id, candidates); s != "" {
			msg += fmt.Sprintf("; did you mean %s%s?", prefix, s)
		}
	}
	return msg
}
