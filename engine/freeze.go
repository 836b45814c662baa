package engine

import (
	"bytes"
	"compress/flate"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"sync"
	"time"

	"github.com/rune-org/rune/message"
)

// Frozen messages of waiting branches (RFC 006 §5.1). A million waiting
// executions of one workflow would otherwise store its definition a million
// times: with a definition store, a frozen message holds a reference to the
// definition instead, and is compressed. The timer store keeps a million of
// them in memory, so every byte counts: see docs/benchmarks.md, "Timers".

// definitionsExec is the pseudo-execution under which definitions are kept
// in Config.Definitions.
const definitionsExec = "definitions"

// Leading bytes of a frozen message. Plain JSON of a NodeExecution (no
// definition store) starts with '{'.
const (
	// frozenV1 starts flate-compressed JSON of frozenJSON. Written until
	// 2026-11; still thawed.
	frozenV1 = 0x01
	// frozenV2 starts the compact form, frozen by Freeze:
	//
	//	0x02
	//	uvarint  len(ref)<<1 | 1 when ref is lowercase hex kept as raw bytes
	//	bytes    ref
	//	varint   execution_started_at, Unix seconds
	//	uvarint  its nanoseconds
	//	varint   its zone offset in seconds (0: UTC)
	//	uvarint  attempt
	//	flate    with the dictionary frozenDict + the definition, of the
	//	         uvarint-length-prefixed workflow_id, execution_id,
	//	         current_node, from_node, accumulated_context (JSON) and
	//	         lineage_stack (JSON, empty when none)
	//
	// The message id is not kept: it is the timer id (TimerID), which Thaw
	// gets back from the timer store. Flate primed with the definition finds
	// the node ids, set-node keys and template text a context repeats; it
	// takes the payload of docs/benchmarks.md from 419 bytes (v1) to 236.
	frozenV2 = 0x02
)

// frozenDict primes every frozen message's compressor with what contexts
// hold whatever the workflow, before the definition itself.
var frozenDict = []byte(`exec_2026{"$trigger":{"id":"","name":"","email":"","status":"","type":"","data":{"items":[],"count":0,"total":0,"created_at":"2026-01-01T00:00:00Z","url":"https://"},"ok":true,"error":null,"value":false}`)

// maxDict is flate's window: only the last 32 KiB of a dictionary count.
const maxDict = 32 << 10

// frozenJSON is the v1 form.
type frozenJSON struct {
	Definition string                 `json:"d"`
	Message    *message.NodeExecution `json:"m"`
}

// TimerID is the id of the timer that suspends message m: the same for every
// redelivery of m, so suspending twice schedules one timer. The message id
// alone is unique: it derives from the execution id through a
// collision-resistant hash (childID). It is short, and Freeze leaves it out
// of the payload, as Thaw is given it back.
func TimerID(m *message.NodeExecution) string { return m.MessageID }

// Freeze encodes m for the timer store, to be scheduled under TimerID(m):
// compact when the engine has a definition store.
func (e *Engine) Freeze(ctx context.Context, m *message.NodeExecution) ([]byte, error) {
	if e.cfg.Definitions == nil {
		return json.Marshal(m)
	}
	raw, err := e.rawDefinition(ctx, m)
	if err != nil {
		return nil, err
	}
	def, err := e.storeDefinition(ctx, raw)
	if err != nil {
		return nil, err
	}
	acc, err := json.Marshal(m.AccumulatedContext)
	if err != nil {
		return nil, err
	}
	var lineage []byte
	if len(m.LineageStack) > 0 {
		if lineage, err = json.Marshal(m.LineageStack); err != nil {
			return nil, err
		}
	}
	buf := make([]byte, 0, 256)
	buf = append(buf, frozenV2)
	if raw, err := hex.DecodeString(def.ref); err == nil && hex.EncodeToString(raw) == def.ref {
		buf = binary.AppendUvarint(buf, uint64(len(raw))<<1|1)
		buf = append(buf, raw...)
	} else {
		buf = binary.AppendUvarint(buf, uint64(len(def.ref))<<1)
		buf = append(buf, def.ref...)
	}
	_, off := m.StartedAt.Zone()
	buf = binary.AppendVarint(buf, m.StartedAt.Unix())
	buf = binary.AppendUvarint(buf, uint64(m.StartedAt.Nanosecond()))
	buf = binary.AppendVarint(buf, int64(off))
	buf = binary.AppendUvarint(buf, uint64(max(m.Attempt, 0)))

	var body []byte
	for _, s := range [][]byte{[]byte(m.WorkflowID), []byte(m.ExecutionID), []byte(m.CurrentNode), []byte(m.FromNode), acc, lineage} {
		body = binary.AppendUvarint(body, uint64(len(s)))
		body = append(body, s...)
	}
	out := bytes.NewBuffer(buf)
	w := def.flaters.Get().(*flate.Writer) // a new one allocates about 1 MB
	defer def.flaters.Put(w)
	w.Reset(out)
	if _, err := w.Write(body); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// frozenDictFor is the flate dictionary of messages of definition def.
func frozenDictFor(def []byte) []byte {
	d := make([]byte, 0, len(frozenDict)+len(def))
	d = append(append(d, frozenDict...), def...)
	return d[max(0, len(d)-maxDict):]
}

// Thaw decodes and validates a frozen message from the timer store, given
// the id of its timer. A payload that can never be resumed is an error
// wrapping ErrInvalid.
func (e *Engine) Thaw(ctx context.Context, timerID string, payload []byte) (*message.NodeExecution, error) {
	_, timerID = pausedTimer(timerID) // a paused branch's timer (pause.go)
	var m *message.NodeExecution
	var err error
	switch {
	case len(payload) > 0 && payload[0] == frozenV2:
		m, err = e.thawV2(ctx, timerID, payload[1:])
	case len(payload) > 0 && payload[0] == frozenV1:
		m, err = e.thawV1(ctx, payload[1:])
	default:
		if m, err = message.DecodeExecution(payload); err != nil {
			return nil, errors.Join(ErrInvalid, err)
		}
		return m, nil
	}
	if err != nil {
		return nil, err
	}
	if err := m.Validate(); err != nil {
		return nil, errors.Join(ErrInvalid, err)
	}
	return m, nil
}

func (e *Engine) thawV1(ctx context.Context, payload []byte) (*message.NodeExecution, error) {
	raw, err := io.ReadAll(io.LimitReader(flate.NewReader(bytes.NewReader(payload)), message.MaxSize+1))
	if err != nil {
		return nil, fmt.Errorf("%w: frozen message does not decompress: %v", ErrInvalid, err)
	}
	var f frozenJSON
	if err := json.Unmarshal(raw, &f); err != nil || f.Message == nil {
		return nil, fmt.Errorf("%w: frozen message is not readable: %v", ErrInvalid, err)
	}
	if _, err = e.definition(ctx, f.Definition); err != nil {
		return nil, err
	}
	// Thawed, it refers to its definition, as the engine's messages do.
	f.Message.WorkflowDefinition, f.Message.DefinitionRef = nil, f.Definition
	return f.Message, nil
}

// frozenReader reads a v2 header, remembering the first problem.
type frozenReader struct {
	b   []byte
	err error
}

func (r *frozenReader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: frozen message: bad %s", ErrInvalid, what)
	}
}

func (r *frozenReader) uvarint(what string) uint64 { return readVarint(r, binary.Uvarint, what) }

func (r *frozenReader) varint(what string) int64 { return readVarint(r, binary.Varint, what) }

func readVarint[T int64 | uint64](r *frozenReader, read func([]byte) (T, int), what string) T {
	v, n := read(r.b)
	if n <= 0 {
		r.fail(what)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *frozenReader) bytes(n uint64, what string) []byte {
	if n > uint64(len(r.b)) {
		r.fail(what + " (truncated)")
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (e *Engine) thawV2(ctx context.Context, timerID string, payload []byte) (*message.NodeExecution, error) {
	r := &frozenReader{b: payload}
	refLen := r.uvarint("definition reference length")
	ref := string(r.bytes(refLen>>1, "definition reference"))
	if refLen&1 == 1 {
		ref = hex.EncodeToString([]byte(ref))
	}
	sec := r.varint("start time")
	nsec := r.uvarint("start time nanoseconds")
	off := r.varint("start time zone")
	attempt := r.uvarint("attempt")
	if r.err == nil && (nsec >= 1e9 || off < -24*3600 || off > 24*3600 || attempt > 1<<31) {
		r.fail("start time or attempt (out of range)")
	}
	if r.err != nil {
		return nil, r.err
	}
	def, err := e.definition(ctx, ref)
	if err != nil {
		return nil, err
	}
	fr := e.inflaters.Get().(io.ReadCloser)
	defer e.inflaters.Put(fr)
	if err := fr.(flate.Resetter).Reset(bytes.NewReader(r.b), frozenDictFor(def)); err != nil {
		return nil, fmt.Errorf("%w: frozen message does not decompress: %v", ErrInvalid, err)
	}
	body, err := io.ReadAll(io.LimitReader(fr, message.MaxSize+1))
	if err != nil {
		return nil, fmt.Errorf("%w: frozen message does not decompress: %v", ErrInvalid, err)
	}
	br := &frozenReader{b: body}
	var f [6][]byte
	for i, what := range []string{"workflow_id", "execution_id", "current_node", "from_node", "accumulated_context", "lineage_stack"} {
		f[i] = br.bytes(br.uvarint(what+" length"), what)
	}
	if br.err == nil && len(br.b) > 0 {
		br.fail("end (trailing bytes)")
	}
	if br.err != nil {
		return nil, br.err
	}
	m := &message.NodeExecution{
		MessageID:   timerID,
		WorkflowID:  string(f[0]),
		ExecutionID: string(f[1]),
		CurrentNode: string(f[2]),
		FromNode:    string(f[3]),
		Attempt:     int(attempt),
		StartedAt:   time.Unix(sec, int64(nsec)).In(zone(int(off))),
		// Thawed, it refers to its definition, as the engine's messages do.
		DefinitionRef: ref,
	}
	if err := json.Unmarshal(f[4], &m.AccumulatedContext); err != nil {
		return nil, fmt.Errorf("%w: frozen message: bad accumulated_context: %v", ErrInvalid, err)
	}
	if len(f[5]) > 0 {
		if err := json.Unmarshal(f[5], &m.LineageStack); err != nil {
			return nil, fmt.Errorf("%w: frozen message: bad lineage_stack: %v", ErrInvalid, err)
		}
	}
	return m, nil
}

// zone is what decoding JSON gives for a UTC offset.
func zone(off int) *time.Location {
	if off == 0 {
		return time.UTC
	}
	return time.FixedZone("", off)
}

// definition reads a frozen message's definition: from the compiled
// definitions when ref is among them (a reference names its content, so
// the bytes cannot have changed), else from the definition store. A
// scheduler resuming thousands of waits of a few workflows thus reads each
// definition once, not once per timer (issue 33).
func (e *Engine) definition(ctx context.Context, ref string) ([]byte, error) {
	if wf := e.cache.getRef(ref); wf != nil {
		return wf.Raw, nil
	}
	if e.cfg.Definitions == nil {
		return nil, fmt.Errorf("%w: frozen message refers to definition %s, but this runtime has no definition store", ErrInvalid, ref)
	}
	def, err := e.cfg.Definitions.Get(ctx, definitionsExec, ref)
	if err != nil {
		return nil, &infraError{fmt.Errorf("engine: read definition %s: %w", ref, err)}
	}
	return def, nil
}

// storeDefinition puts def in the definition store, at most once an hour per
// process (each put refreshes its time to live; a waiting branch thus costs
// no round trip for it).
func (e *Engine) storeDefinition(ctx context.Context, def []byte) (*storedDef, error) {
	h := maphash.Bytes(e.cache.seed, def)
	e.defsMu.Lock()
	st := e.defsStored[h]
	fresh := st != nil && e.cfg.Now().Sub(st.at) < time.Hour
	e.defsMu.Unlock()
	if fresh {
		return st, nil
	}
	ref, err := e.cfg.Definitions.Put(ctx, definitionsExec, def)
	if err != nil {
		return nil, &infraError{fmt.Errorf("engine: store definition: %w", err)}
	}
	if st == nil || st.ref != ref {
		// Writers are primed with the definition, so they are kept per
		// definition (Reset keeps a writer's dictionary).
		dict := frozenDictFor(def)
		st = &storedDef{ref: ref}
		st.flaters.New = func() any {
			w, _ := flate.NewWriterDict(nil, flate.DefaultCompression, dict)
			return w
		}
	}
	e.defsMu.Lock()
	st.at = e.cfg.Now()
	if len(e.defsStored) > 1024 {
		clear(e.defsStored)
	}
	e.defsStored[h] = st
	e.defsMu.Unlock()
	return st, nil
}

type storedDef struct {
	ref     string
	at      time.Time // under defsMu
	flaters sync.Pool // *flate.Writer with the definition's dictionary
}
