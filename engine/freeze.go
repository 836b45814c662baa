package engine

import (
	"bytes"
	"compress/flate"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"time"

	"github.com/rune-org/rune/message"
)

// Frozen messages of waiting branches (RFC 006 §5.1). A million waiting
// executions of one workflow would otherwise store its definition a million
// times: with a definition store, a frozen message holds a reference to the
// definition instead, and is compressed.

// definitionsExec is the pseudo-execution under which definitions are kept
// in Config.Definitions.
const definitionsExec = "definitions"

// frozenMagic starts a compact frozen message: flate-compressed JSON of
// frozen. Plain JSON of a NodeExecution starts with '{'.
const frozenMagic = 0x01

type frozen struct {
	Definition string                 `json:"d"`
	Message    *message.NodeExecution `json:"m"`
}

// Freeze encodes m for the timer store: compact when the engine has a
// definition store.
func (e *Engine) Freeze(ctx context.Context, m *message.NodeExecution) ([]byte, error) {
	if e.cfg.Definitions == nil {
		return json.Marshal(m)
	}
	ref, err := e.storeDefinition(ctx, m.WorkflowDefinition)
	if err != nil {
		return nil, err
	}
	slim := *m
	slim.WorkflowDefinition = nil
	var buf bytes.Buffer
	buf.WriteByte(frozenMagic)
	w := e.flaters.Get().(*flate.Writer) // a new one allocates about 1 MB
	defer e.flaters.Put(w)
	w.Reset(&buf)
	if err := json.NewEncoder(w).Encode(frozen{Definition: ref, Message: &slim}); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Thaw decodes and validates a frozen message from the timer store.
// A payload that can never be resumed is an error wrapping ErrInvalid.
func (e *Engine) Thaw(ctx context.Context, payload []byte) (*message.NodeExecution, error) {
	if len(payload) == 0 || payload[0] != frozenMagic {
		m, err := message.DecodeExecution(payload)
		if err != nil {
			return nil, errors.Join(ErrInvalid, err)
		}
		return m, nil
	}
	raw, err := io.ReadAll(io.LimitReader(flate.NewReader(bytes.NewReader(payload[1:])), message.MaxSize+1))
	if err != nil {
		return nil, fmt.Errorf("%w: frozen message does not decompress: %v", ErrInvalid, err)
	}
	var f frozen
	if err := json.Unmarshal(raw, &f); err != nil || f.Message == nil {
		return nil, fmt.Errorf("%w: frozen message is not readable: %v", ErrInvalid, err)
	}
	if e.cfg.Definitions == nil {
		return nil, fmt.Errorf("%w: frozen message refers to definition %s, but this runtime has no definition store", ErrInvalid, f.Definition)
	}
	def, err := e.cfg.Definitions.Get(ctx, definitionsExec, f.Definition)
	if err != nil {
		return nil, &infraError{fmt.Errorf("engine: read definition %s: %w", f.Definition, err)}
	}
	f.Message.WorkflowDefinition = def
	if err := f.Message.Validate(); err != nil {
		return nil, errors.Join(ErrInvalid, err)
	}
	return f.Message, nil
}

// storeDefinition puts def in the definition store, at most once an hour per
// process (each put refreshes its time to live; a waiting branch thus costs
// no round trip for it).
func (e *Engine) storeDefinition(ctx context.Context, def []byte) (string, error) {
	h := maphash.Bytes(e.cache.seed, def)
	e.defsMu.Lock()
	st, ok := e.defsStored[h]
	e.defsMu.Unlock()
	if ok && e.cfg.Now().Sub(st.at) < time.Hour {
		return st.ref, nil
	}
	ref, err := e.cfg.Definitions.Put(ctx, definitionsExec, def)
	if err != nil {
		return "", &infraError{fmt.Errorf("engine: store definition: %w", err)}
	}
	e.defsMu.Lock()
	if len(e.defsStored) > 1024 {
		clear(e.defsStored)
	}
	e.defsStored[h] = storedDef{ref: ref, at: e.cfg.Now()}
	e.defsMu.Unlock()
	return ref, nil
}

type storedDef struct {
	ref string
	at  time.Time
}
