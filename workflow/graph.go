package workflow

// Graph answers the questions the engine asks of a definition in constant
// time. It is read-only once built and safe for concurrent use; the slices
// and nodes it returns belong to it (and to the definition) and must not be
// modified.
type Graph struct {
	nodes   map[string]*Node
	edges   map[string]Edge
	out     map[string][]Edge
	in      map[string][]Edge
	trigger *Node
}

// NewGraph indexes d, which should have passed Validate. On an invalid
// definition it does not fail: the first of duplicate ids wins, and edges
// are indexed whatever they name.
func NewGraph(d *Definition) *Graph {
	g := &Graph{
		nodes: make(map[string]*Node, len(d.Nodes)),
		edges: make(map[string]Edge, len(d.Edges)),
		out:   make(map[string][]Edge),
		in:    make(map[string][]Edge),
	}
	for i := range d.Nodes {
		n := &d.Nodes[i]
		if _, dup := g.nodes[n.ID]; dup {
			continue
		}
		g.nodes[n.ID] = n
		if n.Trigger && g.trigger == nil {
			g.trigger = n
		}
	}
	for _, e := range d.Edges {
		if _, dup := g.edges[e.ID]; !dup {
			g.edges[e.ID] = e
		}
		g.out[e.Src] = append(g.out[e.Src], e)
		g.in[e.Dst] = append(g.in[e.Dst], e)
	}
	// Clip capacities so that a caller's append copies instead of writing
	// into memory another goroutine may be reading.
	for k, es := range g.out {
		g.out[k] = es[:len(es):len(es)]
	}
	for k, es := range g.in {
		g.in[k] = es[:len(es):len(es)]
	}
	return g
}

// Node returns the node with id.
func (g *Graph) Node(id string) (*Node, bool) {
	n, ok := g.nodes[id]
	return n, ok
}

// Edge returns the edge with id.
func (g *Graph) Edge(id string) (Edge, bool) {
	e, ok := g.edges[id]
	return e, ok
}

// Outgoing returns the edges leaving node id, in definition order.
func (g *Graph) Outgoing(id string) []Edge { return g.out[id] }

// Incoming returns the edges entering node id, in definition order.
func (g *Graph) Incoming(id string) []Edge { return g.in[id] }

// Trigger returns the trigger node, or nil when there is none.
func (g *Graph) Trigger() *Node { return g.trigger }
