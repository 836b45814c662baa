package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"github.com/rune-org/rune/coord"
)

// The context by reference as a whole (issue 33 item 2). A long chain's
// context grows with every node output, and each hop used to encode and
// decode all of it: on a 400-node http chain a third of a worker's CPU.
// Once the values a message would carry inline may reach PackThreshold
// bytes of JSON together (jsonBound), they are stored as one blob (a pack: a JSON object of
// context entries) and the message carries the pack's reference in the
// list under packsKey instead. The next messages carry only the entries
// added since, and the list; a worker reads each pack once (blobCache).
//
// A message's context is, in order: the entries of each pack of the list,
// then its own entries (which win over a pack's). The engine expands it at
// the start of a step (unpack), so every node, barrier, frozen message and
// completion sees the whole context as before; only the successors of a
// plain hop (follow) are packed. A pack's content, and so its reference,
// depends only on the context: a redelivered or replayed step makes the same
// pack and the same successor. Messages without packsKey (every older
// message) read as before; a worker older than this reads a packed message
// as a context missing its nodes' outputs, so workers are upgraded before
// the runtime that starts executions (docs/architecture.md).

// packsKey holds the pack references of a message's context: a JSON array
// of strings, oldest first.
const packsKey = "$rune_packs"

// DefaultPackThreshold is Config.PackThreshold's default.
const DefaultPackThreshold = 8 << 10

// packs returns the pack references acc holds, and whether it holds a
// well-formed list.
func packsOf(acc map[string]any) ([]string, bool, error) {
	v, ok := acc[packsKey]
	if !ok {
		return nil, false, nil
	}
	var refs []string
	switch l := v.(type) {
	case []string:
		refs = l
	case []any:
		refs = make([]string, 0, len(l))
		for _, r := range l {
			s, ok := r.(string)
			if !ok {
				return nil, false, fmt.Errorf("context %s: want an array of references, got an element of type %T", packsKey, r)
			}
			refs = append(refs, s)
		}
	default:
		return nil, false, fmt.Errorf("context %s: want an array of references, got %T", packsKey, v)
	}
	return refs, true, nil
}

// unpack replaces the step's message with a copy whose context is whole:
// the packs' entries and the message's own. It records what came from the
// packs, so that the successors carry the same packs (pack). Without
// packsKey (or without a blob store, where nothing is a pack) it changes
// nothing. A pack that is gone is ErrBlobNotFound: the execution ended (its
// blobs were released) or its blobs expired.
func (s *step) unpack(ctx context.Context) error {
	if s.e.cfg.Blobs == nil {
		return nil
	}
	refs, ok, err := packsOf(s.m.AccumulatedContext)
	if err != nil {
		return fmt.Errorf("%w: message %s: %v", ErrInvalid, s.m.MessageID, err)
	}
	if !ok {
		return nil
	}
	whole := make(map[string]any, len(s.m.AccumulatedContext)*2)
	packed := make(map[string]any)
	for _, ref := range refs {
		v, err := s.e.packValue(ctx, s.m.ExecutionID, ref)
		if err != nil {
			return err
		}
		for k, e := range v {
			whole[k] = e
			packed[k] = e
		}
	}
	for k, e := range s.m.AccumulatedContext {
		if k == packsKey {
			continue
		}
		whole[k] = e
		delete(packed, k) // the message's own entry wins
	}
	m := *s.m
	m.AccumulatedContext = whole
	s.m = &m
	s.packRefs, s.packed = refs, packed
	return nil
}

// packValue returns pack ref of exec, decoded (cached like any blob).
func (e *Engine) packValue(ctx context.Context, exec, ref string) (map[string]any, error) {
	if v, ok := e.blobs.get(ref); ok {
		if m, ok := v.(map[string]any); ok {
			return m, nil
		}
	}
	raw, err := e.cfg.Blobs.Get(ctx, exec, ref)
	if errors.Is(err, coord.ErrBlobNotFound) {
		return nil, fmt.Errorf("context pack %s of execution %s: %w", ref, exec, err)
	}
	if err != nil {
		return nil, &infraError{fmt.Errorf("engine: read context pack %s: %w", ref, err)}
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, fmt.Errorf("%w: context pack %s of execution %s is not a JSON object", ErrInvalid, ref, exec)
	}
	e.blobs.put(ref, m, len(raw))
	return m, nil
}

// pack returns next as a successor carries it: the entries that the step's
// packs hold unchanged are left out and the packs listed instead; when the
// rest may reach PackThreshold bytes of JSON (jsonBound, an upper bound:
// encoding it to learn its size would cost what packs save), it becomes one
// more pack. When
// next lost an entry a pack holds (nothing in the engine removes one; this
// is a guard), it is carried whole.
func (s *step) pack(ctx context.Context, next map[string]any) (map[string]any, error) {
	blobs, limit := s.e.cfg.Blobs, s.e.cfg.PackThreshold
	if blobs == nil || (s.packRefs == nil && (limit <= 0 || jsonBound(next, limit) < limit)) {
		return next, nil // the common case: a small context, no copy
	}
	for k := range s.packed {
		if _, ok := next[k]; !ok {
			return next, nil
		}
	}
	live := make(map[string]any, len(next)-len(s.packed)+1)
	for k, v := range next {
		if p, ok := s.packed[k]; ok && same(p, v) {
			continue
		}
		live[k] = v
	}
	refs := s.packRefs
	if limit > 0 && jsonBound(live, limit) >= limit {
		raw, err := json.Marshal(live)
		if err != nil {
			return nil, fmt.Errorf("engine: encode a context pack: %w", err)
		}
		ref, err := blobs.Put(ctx, s.m.ExecutionID, raw)
		if err != nil {
			return nil, &infraError{fmt.Errorf("engine: store a context pack (%d bytes): %w", len(raw), err)}
		}
		var v map[string]any // as every other reader decodes it
		if err := json.Unmarshal(raw, &v); err == nil {
			s.e.blobs.put(ref, v, len(raw))
		}
		refs = append(refs[:len(refs):len(refs)], ref)
		live = map[string]any{}
	}
	if len(refs) == 0 {
		return next, nil
	}
	l := make([]any, len(refs))
	for i, r := range refs {
		l[i] = r
	}
	live[packsKey] = l
	return live, nil
}

// same reports whether v is the very value p (a pack's entry) rather than an
// equal one: contexts are copied by reference, so an entry carried on from
// the message is the pack's own.
func same(p, v any) bool {
	switch x := p.(type) {
	case map[string]any:
		y, ok := v.(map[string]any)
		return ok && reflect.ValueOf(x).UnsafePointer() == reflect.ValueOf(y).UnsafePointer()
	case []any:
		y, ok := v.([]any)
		return ok && len(x) == len(y) && (len(x) == 0 || &x[0] == &y[0])
	case string, float64, bool, nil:
		return p == v
	}
	return false
}
