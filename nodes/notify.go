package nodes

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"

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
// record a send it made, and where it has recorded it.
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
		return "", exprError(f.name, err)
	}
	s, _ := out.(string)
	return s, nil
}

// checkLiquid reports a Liquid parameter that does not compile.
func (p paramCheck) liquid(field, src string) {
	if _, err := expr.NewCompiler(expr.Limits{}).Liquid(src); err != nil {
		p.c.Report(field, "%v", err)
	}
}

// liquidParam compiles the string parameter name, nil when absent.
func liquidParam(n *workflow.Node, c *expr.Compiler, name string) (*liquidField, error) {
	s, _ := n.Parameters[name].(string)
	if s == "" {
		return nil, nil
	}
	v, err := c.Liquid(s)
	if err != nil {
		return nil, compileErr(n, name, err)
	}
	return &liquidField{name: name, v: v}, nil
}

// checkStringOrList checks a parameter that is a string or a list of strings,
// each a Liquid template.
func (p paramCheck) stringOrList(name string, required bool) {
	v, present := p.params[name]
	if !present || v == nil {
		if required {
			p.c.Report("parameters."+name, "required")
		}
		return
	}
	switch v := v.(type) {
	case string:
		if required && strings.TrimSpace(v) == "" {
			p.c.Report("parameters."+name, "required")
			return
		}
		p.liquid("parameters."+name, v)
	case []any:
		if required && len(v) == 0 {
			p.c.Report("parameters."+name, "required: at least one address")
		}
		for i, e := range v {
			s, ok := e.(string)
			if !ok {
				p.c.Report(fmt.Sprintf("parameters.%s[%d]", name, i), "must be a string, not %s", expr.TypeName(e))
				continue
			}
			p.liquid(fmt.Sprintf("parameters.%s[%d]", name, i), s)
		}
	default:
		p.c.Report("parameters."+name, "must be a string or a list of strings, not %s", expr.TypeName(v))
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
			return nil, compileErr(n, name, err)
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
// not called. Between a send and its record is the one window left: a
// worker that dies there sends again on redelivery, with the same key (the
// email's Message-ID, the SMS provider's Idempotency-Key), which is what
// lets the receiving side drop the duplicate.
func sendOnce(ctx context.Context, opts *Options, in *node.Input, send func() (map[string]any, error)) (map[string]any, error) {
	key := in.IdempotencyKey
	if opts.Effects == nil || key == "" {
		return send()
	}
	ef, err := opts.Effects.Begin(ctx, key)
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
			log.Info("already sent: the recorded result is used", "execution_id", in.ExecutionID, "node_id", in.NodeID)
			return out, nil
		}
	}
	if ef.Intents > 1 {
		log.Warn("an earlier attempt may have sent without recording it: sending again with the same idempotency key",
			"execution_id", in.ExecutionID, "node_id", in.NodeID, "intents", ef.Intents)
	}
	out, err := send()
	if err != nil {
		return nil, err
	}
	opts.fault(FaultSent)
	raw, _ := json.Marshal(out)
	if err := opts.Effects.Record(ctx, key, raw); err != nil {
		// The send happened: failing the node would send again. The
		// engine's own record of this attempt still covers redeliveries.
		log.Error("the send succeeded but could not be recorded", "execution_id", in.ExecutionID, "node_id", in.NodeID, "err", err)
	}
	opts.fault(FaultRecorded)
	return out, nil
}

func (o *Options) fault(point string) {
	if o.Fault != nil {
		o.Fault(point)
	}
}
