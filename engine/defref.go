package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/rune-org/rune/coord"
	"github.com/rune-org/rune/message"
)

// Definitions by reference (issue 11; a departure from RFC 001 §6.1 that
// docs/architecture.md explains). With a definition store, the messages the
// engine produces carry the definition's content reference instead of its
// bytes, and a worker compiles each definition once, fetching it on a miss.
// The store keeps a definition at least as long as any execution of it can
// run: every Start (and every step of a message that came inline) puts it
// again at most an hour apart, which renews its time to live, and that time
// to live (Config.Definitions) is longer than an execution can live.

// byRef returns the compiled definition that ref names, from the cache or
// the definition store. A definition the store does not have can never be
// run: the error wraps ErrInvalid (the message is dead-lettered, with the
// reference as reason). A store that cannot be reached is not: the message
// is delivered again.
func (e *Engine) byRef(ctx context.Context, ref string) (*Workflow, error) {
	if wf := e.cache.getRef(ref); wf != nil {
		return wf, nil
	}
	if e.cfg.Definitions == nil {
		return nil, invalidf("definition %s: the message refers to its definition, but this runtime has no definition store", ref)
	}
	raw, err := e.cfg.Definitions.Get(ctx, definitionsExec, ref)
	if errors.Is(err, coord.ErrBlobNotFound) {
		return nil, invalidf("definition %s is not in the definition store (never stored there, or expired)", ref)
	}
	if err != nil {
		return nil, fmt.Errorf("engine: read definition %s: %w", ref, err)
	}
	if coord.BlobRef(raw) != ref {
		return nil, invalidf("definition %s: the stored bytes do not match their reference", ref)
	}
	wf, err := e.Compile(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: definition %s: %v", ErrInvalid, ref, err)
	}
	e.cache.putRef(ref, wf)
	return wf, nil
}

// refFor returns the definition reference that m's successors carry: m's own
// when it came by reference, else (with a definition store) that of wf, put
// in the store; "" when they carry the definition inline (no store).
func (e *Engine) refFor(ctx context.Context, wf *Workflow, m *message.NodeExecution) (string, error) {
	if len(m.WorkflowDefinition) == 0 && m.DefinitionRef != "" {
		return m.DefinitionRef, nil
	}
	if e.cfg.Definitions == nil {
		return "", nil
	}
	st, err := e.storeDefinition(ctx, wf.Raw)
	if err != nil {
		return "", err
	}
	e.cache.putRef(st.ref, wf)
	return st.ref, nil
}

// definitionOf sets the definition fields of m, a message that runs a node
// of the same workflow as from: by reference when ref is set, else inline;
// and m's priority, the execution's, which every message carries (issue 35).
func definitionOf(m *message.NodeExecution, from *message.NodeExecution, ref string) {
	m.Priority = from.Priority
	if ref != "" {
		m.DefinitionRef = ref
		return
	}
	m.WorkflowDefinition = from.WorkflowDefinition
}

// rawDefinition returns m's definition bytes, fetched when m carries a
// reference.
func (e *Engine) rawDefinition(ctx context.Context, m *message.NodeExecution) ([]byte, error) {
	if len(m.WorkflowDefinition) > 0 || m.DefinitionRef == "" {
		return m.WorkflowDefinition, nil
	}
	wf, err := e.byRef(ctx, m.DefinitionRef)
	if err != nil {
		return nil, err
	}
	return wf.Raw, nil
}
