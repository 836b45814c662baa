package workflow

import (
	"fmt"
	"strings"
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

// LeavesNode reports whether edge id is one of the node's outgoing edges.
func (c *NodeCheck) LeavesNode(id string) bool {
	for _, e := range c.Outgoing {
		if e.ID == id {
			return true
		}
	}
	return false
}
