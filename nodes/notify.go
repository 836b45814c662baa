package nodes

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/rune-org/rune/coord"
	"github.com/rune-org/rune/expr"
	"github.com/rune-org/rune/node"
	"github.com/rune-org/rune/workflow"
)

// Error codes of the notification nodes (email, sms).
const (
	CodeInvalidAddress = "INVALID_ADDRESS"
	CodeSMTP           = "SMTP"
	CodeSMTPConnection = "SMTP_CONNECTION"
	CodeSMS            = "SMS_PROVIDER"
	CodeSMSConnection  = "SMS_CONNECTION"
	CodeEffects        = "EFFECTS"
)

// Fault points of Options.Fault: where a notification node is about to
// record a send that has left the worker (an email's final "." written, its
// reply not yet read; an SMS provider's or an http endpoint's answer read),
// and where it has recorded it.
const (
	FaultSent     = "sent"
	FaultRecorded = "recorded"
)

// varsRunner marks runners whose output is also recorded as
// $vars.<VarName()> (notification spec §3.1: email_<nodeId>, sms_<nodeId>).
type varsRunner struct{ name string }

// VarName implements node.Vars.
func (v varsRunner) VarName() string { return v.name }

// liquidField is one Liquid parameter of a notification node.
type liquidField struct {
	name string
	v    expr.Value
}

func (f *liquidField) render(env map[string]any) (string, error) {
	if f == nil || f.v == nil {
		return "", nil
	}
	out, err := f.v.Eval(env)
	if err != nil {
		return "", node.ExprError(f.name, err)
	}
	s, _ := out.(string)
	return s, nil
}

// checkLiquid reports a Liquid parameter that does not compile or reads a
// name no node defines.
func checkLiquid(p node.Params, field, src string) {
	v, err := expr.NewCompiler(expr.Limits{}).Liquid(src)
	if err != nil {
		p.C.Report(field, "%v", err)
		return
	}
	p.C.References(field, expr.Refs(v))
}

// liquidParam compiles the string parameter name, nil when absent.
func liquidParam(n *workflow.Node, c *expr.Compiler, name string) (*liquidField, error) {
	s, _ := n.Parameters[name].(string)
	if s == "" {
		return nil, nil
	}
	v, err := c.Liquid(s)
	if err != nil {
		return nil, node.CompileError(n, name, err)
	}
	return &liquidField{name: name, v: v}, nil
}

// checkStringOrList checks a parameter that is a string or a list of strings,
// each a Liquid template.
func checkStringOrList(p node.Params, name string, required bool) {
	v, present := p.Values[name]
	if !present || v == nil {
		if required {
			p.C.Report("parameters."+name, "required")
		}
		return
	}
	switch v := v.(type) {
	case string:
		if required && strings.TrimSpace(v) == "" {
			p.C.Report("parameters."+name, "required")
			return
		}
		checkLiquid(p, "parameters."+name, v)
	case []any:
		if required && len(v) == 0 {
			p.C.Report("parameters."+name, "required: at least one address")
		}
		for i, e := range v {
			s, ok := e.(string)
			if !ok {
				p.C.Report(fmt.Sprintf("parameters.%s[%d]", name, i), "must be a string, not %s", expr.TypeName(e))
				continue
			}
			checkLiquid(p, fmt.Sprintf("parameters.%s[%d]", name, i), s)
		}
	default:
		p.C.Report("parameters."+name, "must be a string or a list of strings, not %s", expr.TypeName(v))
	}
}

// liquidList compiles a string-or-list parameter.
func liquidList(n *workflow.Node, c *expr.Compiler, name string) ([]*liquidField, error) {
	var srcs []string
	switch v := n.Parameters[name].(type) {
	case string:
		srcs = []string{v}
	case []any:
		for _, e := range v {
			s, _ := e.(string)
			srcs = append(srcs, s)
		}
	}
	var out []*liquidField
	for i, s := range srcs {
		v, err := c.Liquid(s)
		if err != nil {
			return nil, node.CompileError(n, name, err)
		}
		field := name
		if _, isList := n.Parameters[name].([]any); isList {
			field = fmt.Sprintf("%s[%d]", name, i)
		}
		out = append(out, &liquidField{name: field, v: v})
	}
	return out, nil
}

// credentialFields resolves the node's credential and checks its type.
func credentialFields(ctx context.Context, in *node.Input, ref string, types ...string) (map[string]string, error) {
	if ref == "" {
		return nil, &node.Error{Code: CodeCredentials, Message: "credentials.ref: required"}
	}
	if in.Secrets == nil {
		return nil, &node.Error{Code: CodeCredentials, Message: fmt.Sprintf("credential %q: no secret store is configured", ref)}
	}
	fields, err := in.Secrets.Resolve(ctx, ref)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &node.Error{Code: CodeCredentials, Message: err.Error()}
	}
	if t := fields["type"]; !slices.Contains(types, t) {
		return nil, &node.Error{Code: CodeCredentials, Message: fmt.Sprintf("credential %q: field \"type\" is %q, want one of %v", ref, t, types)}
	}
	return fields, nil
}

func credRef(n *workflow.Node) string {
	if n.Credentials == nil {
		return ""
	}
	return n.Credentials.Ref
}

// sendOnce performs send at most once per idempotency key as far as the
// effects store can tell: a send recorded earlier (by an attempt or delivery
// that then died or failed later) returns its recorded result, and send is
// not called.
//
// send gets the send's record: it calls rec.ready and then rec.handedOver
// at the moment the send leaves its hands when it can tell that moment
// apart from the reply (an email, after writing the final "." of its data
// and before reading the server's answer), and rec.withdraw when the reply
// then refuses it. A send that does not call handedOver is recorded once it
// returns. What is left between the send leaving and its record is the one
// window (docs/dsl.md, "Sending exactly once"): a worker that dies there
// sends again on redelivery, with the same key (the email's Message-ID, the
// SMS provider's Idempotency-Key), which is what lets the receiving side
// drop the duplicate.
func sendOnce(ctx context.Context, opts *Options, in *node.Input, send func(rec *sendRecord) (map[string]any, error)) (map[string]any, error) {
	return sendOnceGated(ctx, opts, in, nil, send)
}

// sendOnceGated is sendOnce with a gate, which may keep a send that was not
// made yet from being made now (its error is returned): a send already
// recorded is reported whatever the gate would say (quiet hours that began
// since it was made do not hold back its redelivery).
func sendOnceGated(ctx context.Context, opts *Options, in *node.Input, gate func() error, send func(rec *sendRecord) (map[string]any, error)) (map[string]any, error) {
	if gate == nil {
		gate = func() error { return nil }
	}
	key := in.IdempotencyKey
	if opts.Effects == nil || key == "" {
		if err := gate(); err != nil {
			return nil, err
		}
		return send(nil)
	}
	effects := opts.Effects
	if h, ok := effects.(coord.Holder); ok {
		// One connection from Begin to Record: the record after the send
		// then waits for nothing.
		held, release := h.Hold(ctx, key)
		defer release()
		effects = held
	}
	ef, err := effects.Begin(ctx, key)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		// Sending without a record could send twice: try again later.
		return nil, &node.Error{Code: CodeEffects, Message: "recording the send's intent: " + err.Error(), Retryable: true}
	}
	log := in.Logger
	if log == nil {
		log = slog.Default()
	}
	if ef.Done {
		var out map[string]any
		if err := json.Unmarshal(ef.Result, &out); err == nil {
			delete(out, recordAttempt)
			log.Info("already sent: the recorded result is used", "execution_id", in.ExecutionID, "node_id", in.NodeID)
			return out, nil
		}
	}
	if err := gate(); err != nil {
		return nil, err
	}
	// Each attempt begins once. More intents than attempts means a delivery
	// of an attempt began and never returned (its worker died, or a copy
	// of its message runs at once): it may have sent. An earlier attempt
	// that returned its failure (a refused connection) is no such case.
	if ef.Intents > max(in.Attempt, 1) {
		log.Warn("an earlier attempt may have sent without recording it: sending again with the same idempotency key",
			"execution_id", in.ExecutionID, "node_id", in.NodeID, "intents", ef.Intents)
	}
	rec := &sendRecord{ctx: ctx, effects: effects, opts: opts, in: in, log: log}
	defer rec.close()
	out, err := send(rec)
	if err != nil {
		return nil, err
	}
	if !rec.made() {
		rec.ready(out)
		rec.handedOver()
	}
	return out, nil
}

// sendRecord is the record of one send under its idempotency key. A nil
// *sendRecord (no effects store, or no key) records nothing.
type sendRecord struct {
	ctx     context.Context
	effects coord.Effects
	opts    *Options
	in      *node.Input
	log     *slog.Logger
	// result is what ready prepared and handedOver records (nil once
	// withdrawn); handed says whether handedOver ran.
	result []byte
	handed bool
	// recordCtx, made by ready, is what the record runs under; stop
	// releases it.
	recordCtx context.Context
	stop      context.CancelFunc
}

// recordAttempt is the member of a recorded result that names the attempt
// that made it (random, not part of the node's output). Two attempts that
// sent at once (a message redelivered while its first worker still waited
// for the server's reply) record the same output; with it, the one whose
// send was then refused withdraws its own record only, never the other's.
const recordAttempt = "~attempt"

func (r *sendRecord) made() bool { return r == nil || r.handed }

// ready prepares the record of out, the send's result, and the context it
// runs under, so that handedOver has nothing left to do but write it.
func (r *sendRecord) ready(out map[string]any) {
	if r == nil {
		return
	}
	rec := maps.Clone(out)
	if rec == nil {
		rec = map[string]any{}
	}
	rec[recordAttempt] = rand.Text()
	r.result, _ = json.Marshal(rec)
	if r.stop == nil {
		// A worker shutting down still records: the send has left it.
		r.recordCtx, r.stop = r.detached()
	}
}

// close releases what ready took.
func (r *sendRecord) close() {
	if r.stop != nil {
		r.stop()
	}
}

// handedOver records the result ready prepared: the send has left the
// worker, and a redelivery must not send again. Only its first call counts.
func (r *sendRecord) handedOver() {
	if r.made() {
		return
	}
	r.handed = true
	r.opts.fault(FaultSent, r.in.IdempotencyKey)
	// A record that failed may still have been made (its reply lost, not
	// the command): withdraw removes it all the same.
	if err := r.effects.Record(r.recordCtx, r.in.IdempotencyKey, r.result); err != nil {
		// The send happened: failing the node would send again. The
		// engine's own record of this attempt still covers redeliveries.
		r.log.Error("the send succeeded but could not be recorded", "execution_id", r.in.ExecutionID, "node_id", r.in.NodeID, "err", err)
	}
	r.opts.fault(FaultRecorded, r.in.IdempotencyKey)
}

// detached is the send's context without its cancellation, bounded by
// recordTimeout: a record, or its withdrawal, must not be given up halfway
// because the worker is shutting down.
func (r *sendRecord) detached() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(r.ctx), recordTimeout)
}

// withdraw removes the record handedOver made: the receiving side refused
// what it was handed, or the connection broke before it answered, and the
// node fails (or retries) as if nothing was sent. It returns an error only
// when the record stays: a retry would then find it and not send, so the
// node must fail for good instead.
func (r *sendRecord) withdraw() error {
	if r == nil || !r.handed || r.result == nil {
		return nil
	}
	raw := r.result
	r.result = nil
	// A record left behind would stand for a send that did not happen.
	ctx, cancel := r.detached()
	defer cancel()
	if err := r.effects.Withdraw(ctx, r.in.IdempotencyKey, raw); err != nil {
		r.log.Error("a refused send is still recorded as sent", "execution_id", r.in.ExecutionID, "node_id", r.in.NodeID, "err", err)
		return &node.Error{Code: CodeEffects, Message: "the send was refused after it was recorded, and the record could not be withdrawn (" +
			err.Error() + "): not retried, since a retry would take it as sent"}
	}
	return nil
}

// recordTimeout bounds one Record or Withdraw.
const recordTimeout = 10 * time.Second

func (o *Options) fault(point, key string) {
	if o.Fault != nil {
		o.Fault(point, key)
	}
}
