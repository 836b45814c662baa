// Package nodes implements the built-in node types of dsl.md ("Node types"):
// trigger, http, conditional, switch, set, log, wait, delay, split,
// aggregator, merge, email and sms.
package nodes

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"time"

	"github.com/rune-org/rune/coord"
	"github.com/rune-org/rune/egress"
	"github.com/rune-org/rune/expr"
	"github.com/rune-org/rune/node"
	"github.com/rune-org/rune/workflow"
)

// Options configure the built-in node types. Zero fields take their defaults.
type Options struct {
	// HTTPTimeout bounds one HTTP request of an http node that sets no
	// "timeout" parameter. Default 30 s.
	HTTPTimeout time.Duration
	// MaxResponseBytes is the largest response body an http node accepts.
	// Default 10 MiB.
	MaxResponseBytes int64
	// HTTPClient sends the http nodes' and SMS providers' requests. Nil
	// means a client of its own (a clone of http.DefaultTransport keeping
	// IdleConnsPerHost idle connections per host, connecting through
	// Egress); timeouts come from the options above either way. A client
	// given here connects as it is: Egress checks only its redirects to IPs.
	HTTPClient *http.Client
	// Egress decides which addresses nodes may connect to (http, sms, the
	// email node's SMTP server). Nil allows every address: library users
	// choose, and rune server and rune worker set one that denies loopback
	// and link-local by default (docs/operations.md "Egress").
	Egress *egress.Policy
	// Effects records the sends of email and sms nodes by idempotency key, so
	// a retried or redelivered node does not send again. Nil: every attempt
	// sends (the runtimes set one: coord/memory or coord/redis).
	Effects coord.Effects
	// Fault, when set, is called at the points FaultSent and FaultRecorded of
	// a send, with the send's idempotency key. Tests use it to stop a worker
	// there or to time a send; nil in production.
	Fault func(point, key string)
	// TLSConfig is the base of the email node's TLS settings (e.g. RootCAs
	// for a private SMTP server). Nil: the system's roots.
	TLSConfig *tls.Config
	// SMTPTimeout bounds an SMTP session: connecting and every exchange up
	// to the end of the data, and then, on its own, the wait for the
	// server's reply to the data. Default 30 s.
	SMTPTimeout time.Duration
	// Logger receives the log nodes' lines. Nil means the Input's Logger, or
	// slog.Default() when that is nil too.
	Logger *slog.Logger
}

// Defaults of Options.
const (
	DefaultHTTPTimeout      = 30 * time.Second
	DefaultMaxResponseBytes = 10 << 20
	// IdleConnsPerHost is how many idle connections to one host the default
	// client keeps: a worker runs its http nodes many at once (64 handlers
	// by default), often against one host. net/http's default of 2 made
	// every call past the second dial anew, 12 % of a worker's CPU in the
	// bench's http chain (docs/benchmarks.md, round 5).
	IdleConnsPerHost = 64
)

func (o Options) withDefaults() Options {
	if o.HTTPTimeout <= 0 {
		o.HTTPTimeout = DefaultHTTPTimeout
	}
	if o.MaxResponseBytes <= 0 {
		o.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if o.SMTPTimeout <= 0 {
		o.SMTPTimeout = DefaultHTTPTimeout
	}
	if o.HTTPClient == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = IdleConnsPerHost
		t.MaxIdleConns = max(t.MaxIdleConns, 4*IdleConnsPerHost)
		o.Egress.Guard(t)
		o.HTTPClient = &http.Client{Transport: t}
	}
	o.HTTPClient = redirectClient(o.HTTPClient, o.Egress)
	return o
}

// Register adds the built-in node types to r.
func Register(r *node.Registry, opts Options) {
	opts = opts.withDefaults()
	r.Register("trigger", triggerType{})
	r.Register("http", &httpType{opts: opts})
	r.Register("conditional", conditionalType{})
	r.Register("switch", switchType{})
	r.Register("set", setType{})
	r.Register("log", &logType{logger: opts.Logger})
	r.Register("wait", waitType{})
	r.Register("delay", delayType{})
	r.Register("split", splitType{})
	r.Register("aggregator", aggregatorType{})
	r.Register("merge", mergeType{})
	r.Register("email", &emailType{opts: &opts})
	r.Register("sms", &smsType{opts: &opts, bodies: &bodyCache{c: expr.NewCompiler(expr.Limits{})}})
}

// NewRegistry returns a registry holding the built-in node types.
func NewRegistry(opts Options) *node.Registry {
	r := node.NewRegistry()
	Register(r, opts)
	return r
}

// Error codes of the built-in node types, beyond the http ones.
const (
	CodeExpression       = "EXPRESSION"
	CodeExpressionType   = "EXPRESSION_TYPE"
	CodeInvalidParameter = "INVALID_PARAMETER"
	// CodeEgressDenied is a connection the egress policy refused (Options.
	// Egress): not retryable, since the same address is refused again.
	CodeEgressDenied = "EGRESS_DENIED"
)

// egressError is err as an EGRESS_DENIED node error when the egress policy
// refused the connection; what names the request ("GET https://host/path").
func egressError(what string, err error) (*node.Error, bool) {
	var de *egress.DeniedError
	if !errors.As(err, &de) {
		return nil, false
	}
	return &node.Error{
		Code:    CodeEgressDenied,
		Message: what + ": " + de.Error(),
		Details: map[string]any{"host": de.Host, "address": de.Addr.String(), "rule": de.Rule},
	}, true
}

// paramCheck helps a type's Check walk a node's parameters.
type paramCheck struct {
	c      *workflow.NodeCheck
	params map[string]any
}

func newParamCheck(c *workflow.NodeCheck, known ...string) paramCheck {
	p := paramCheck{c: c, params: c.Node.Parameters}
	names := make([]string, 0, len(p.params))
	for name := range p.params {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if !contains(known, name) {
			if len(known) == 0 {
				c.Report("parameters."+name, "unknown parameter: %s nodes take no parameters", c.Node.Type)
			} else {
				c.Report("parameters."+name, "unknown parameter (known: %v)", known)
			}
		}
	}
	return p
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// string returns the string parameter name; ok is false when it is absent or
// not a string (reported).
func (p paramCheck) string(name string, required bool) (string, bool) {
	v, present := p.params[name]
	if !present || v == nil {
		if required {
			p.c.Report("parameters."+name, "required")
		}
		return "", false
	}
	s, ok := v.(string)
	if !ok {
		p.c.Report("parameters."+name, "must be a string, not %s", expr.TypeName(v))
		return "", false
	}
	if required && s == "" {
		p.c.Report("parameters."+name, "required")
		return "", false
	}
	return s, true
}

// edge checks that the edge named at field leaves the node.
func (p paramCheck) edge(field, id string) {
	switch {
	case !p.c.LeavesNode(id):
		p.c.Report(field, "edge %q does not leave node %q%s", id, p.c.Node.ID, p.c.EdgeHint(id))
	case id == p.c.Node.ErrorEdge():
		p.c.Report(field, "edge %q is the node's error edge, which is followed only on failure", id)
	}
}

// RoutingEdges are the edges a conditional or switch node chooses among.
// When such a node fails and its error strategy is ignore, none of them is
// followed: there is no decision to follow.
func RoutingEdges(n *workflow.Node) []string {
	var ids []string
	for _, k := range []string{"true_edge_id", "false_edge_id", "default_edge"} {
		if s, ok := n.Parameters[k].(string); ok {
			ids = append(ids, s)
		}
	}
	cases, _ := n.Parameters["cases"].([]any)
	for _, c := range cases {
		if m, ok := c.(map[string]any); ok {
			if s, ok := m["edge"].(string); ok {
				ids = append(ids, s)
			}
		}
	}
	return ids
}

// template reports a parameter value that does not compile or reads a name
// no node defines.
func (p paramCheck) template(field string, v any) {
	refs, err := expr.CheckRefs(v)
	if err != nil {
		p.c.Report(field, "%v", err)
		return
	}
	p.c.References(field, refs)
}

// expression reports a bare expression that does not compile or reads a
// name no node defines.
func (p paramCheck) expression(field, src string) {
	refs, err := expr.CheckExpressionRefs(src)
	if err != nil {
		p.c.Report(field, "%v", err)
		return
	}
	p.c.References(field, refs)
}

// exprError turns an evaluation failure of the parameter at field into a
// node error: limits and missing paths alike are EXPRESSION, not retryable,
// since the same context gives the same result.
func exprError(field string, err error) error {
	return &node.Error{
		Code:    CodeExpression,
		Message: "parameters." + field + ": " + err.Error(),
		Details: map[string]any{"parameter": "parameters." + field},
	}
}

// invalidParam is a parameter that rendered to something unusable.
func invalidParam(field, format string, args ...any) error {
	return &node.Error{
		Code:    CodeInvalidParameter,
		Message: "parameters." + field + ": " + fmt.Sprintf(format, args...),
		Details: map[string]any{"parameter": "parameters." + field},
	}
}

// compileErr wraps a compile failure of a node that Check would have rejected.
func compileErr(n *workflow.Node, field string, err error) error {
	return fmt.Errorf("node %q: parameters.%s: %w", n.ID, field, err)
}

// evalBool evaluates a condition; a non-boolean result is EXPRESSION_TYPE.
func evalBool(v expr.Value, env map[string]any, field string) (bool, error) {
	r, err := v.Eval(env)
	if err != nil {
		return false, exprError(field, err)
	}
	b, ok := r.(bool)
	if !ok {
		return false, &node.Error{
			Code:    CodeExpressionType,
			Message: fmt.Sprintf("parameters.%s: must be a boolean, got %s", field, expr.TypeName(r)),
			Details: map[string]any{"parameter": "parameters." + field},
		}
	}
	return b, nil
}
