package engine

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"strings"
	"sync"

	"github.com/rune-org/rune/node"
	"github.com/rune-org/rune/workflow"
)

// Workflow is a decoded, validated and compiled definition: every expression
// of every node compiled once.
type Workflow struct {
	Def   *workflow.Definition
	Graph *workflow.Graph
	// Raw is the definition as it travels in messages.
	Raw     json.RawMessage
	runners map[string]node.Runner
	// uses* are false when no expression can mention $node, $execution or
	// $now, which spares building them for every node run.
	usesNodeMap, usesExecution, usesNow bool

	// Fan-in (see analyse): the aggregator closing each split, each merge's
	// parents, and the merges each not-taken edge cuts off.
	aggregatorOf map[string]string
	// params holds each node's parameters as JSON text, to tell which
	// context keys its expressions may read.
	params  map[string]string
	parents map[string][]string
	dead    map[string][]deadArrival
	// flow holds the rate_limit and throttle of the nodes that have one
	// (flow.go).
	flow map[string]*flowControl
}

// Compile decodes, validates and compiles a definition. Results are cached by
// content, so a definition carried by every message is compiled once.
// The error is a workflow.Problems listing every problem when the definition
// is invalid.
func (e *Engine) Compile(raw []byte) (*Workflow, error) {
	if wf := e.cache.get(raw); wf != nil {
		return wf, nil
	}
	def, err := workflow.Load(raw, e.types)
	if err != nil {
		return nil, err
	}
	wf := &Workflow{
		Def:     def,
		Graph:   workflow.NewGraph(def),
		Raw:     append(json.RawMessage(nil), raw...),
		runners: make(map[string]node.Runner, len(def.Nodes)),
		// A textual test is enough: a false positive only costs the value.
		usesNodeMap:   bytes.Contains(raw, []byte("$node")),
		usesExecution: bytes.Contains(raw, []byte("$execution")),
		usesNow:       bytes.Contains(raw, []byte("$now")),
	}
	for i := range def.Nodes {
		n := &def.Nodes[i]
		if n.Trigger {
			continue
		}
		t, _ := e.types.Lookup(n.Type) // Validate checked it exists
		r, err := t.Compile(n, e.compiler)
		if err != nil {
			return nil, workflow.Problems{{Path: fmt.Sprintf("nodes[%d]", i), Message: err.Error()}}
		}
		if r != nil {
			wf.runners[n.ID] = r
		}
	}
	if err := wf.compileFlow(e.compiler); err != nil {
		return nil, err
	}
	wf.params = make(map[string]string, len(def.Nodes))
	for i := range def.Nodes {
		raw, _ := json.Marshal(def.Nodes[i].Parameters)
		wf.params[def.Nodes[i].ID] = string(raw)
	}
	if ps := wf.analyse(); len(ps) > 0 {
		return nil, ps
	}
	e.cache.put(wf)
	return wf, nil
}

// VarNames maps the id of each node whose output is also recorded under
// $vars (its runner implements node.Vars) to the variable's name.
func (wf *Workflow) VarNames() map[string]string {
	var names map[string]string
	for id, r := range wf.runners {
		if v, ok := r.(node.Vars); ok {
			if names == nil {
				names = map[string]string{}
			}
			names[id] = v.VarName()
		}
	}
	return names
}

// cache holds compiled workflows by the hash of their raw definition.
type cache struct {
	seed maphash.Seed
	max  int
	mu   sync.RWMutex
	m    map[uint64]*Workflow
	// refs holds the same workflows by definition reference.
	refs map[string]*Workflow
}

func newCache(max int) *cache {
	return &cache{seed: maphash.MakeSeed(), max: max, m: map[uint64]*Workflow{}, refs: map[string]*Workflow{}}
}

func (c *cache) getRef(ref string) *Workflow {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.refs[ref]
}

func (c *cache) putRef(ref string, wf *Workflow) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.refs[ref] == wf {
		return
	}
	if len(c.refs) >= c.max {
		for k := range c.refs { // as put: an evicted definition is fetched again
			delete(c.refs, k)
			break
		}
	}
	c.refs[ref] = wf
}

func (c *cache) get(raw []byte) *Workflow {
	h := maphash.Bytes(c.seed, raw)
	c.mu.RLock()
	wf := c.m[h]
	c.mu.RUnlock()
	if wf != nil && bytes.Equal(wf.Raw, raw) {
		return wf
	}
	return nil
}

func (c *cache) put(wf *Workflow) {
	h := maphash.Bytes(c.seed, wf.Raw)
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= c.max {
		for k := range c.m { // evict an arbitrary entry; definitions are cheap to recompile
			delete(c.m, k)
			break
		}
	}
	c.m[h] = wf
}

// mentions returns which context keys node id may read: those its parameters
// name (a textual test; a false positive only costs a load), or every key
// when they use $node.
func (wf *Workflow) mentions(id string) func(string) bool {
	text := wf.params[id]
	if strings.Contains(text, "$node") {
		return nil
	}
	return func(key string) bool { return strings.Contains(text, key) }
}
