// Package nodes implements the built-in node types of dsl.md ("Node types")
// that do work: trigger, http, conditional, switch, set, log, email and
// sms. The control nodes (wait, delay, split, aggregator, merge) are the
// engine's own (engine/control.go).
package nodes

import (
	"crypto/tls"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/rune-org/rune/coord"
	"github.com/rune-org/rune/egress"
	"github.com/rune-org/rune/expr"
	"github.com/rune-org/rune/node"
	"github.com/rune-org/rune/templates"
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
	// ProviderTimeout bounds each try but the last of an sms node that
	// names failover credentials: past it, the next provider is tried.
	// Default DefaultProviderTimeout (issue 36).
	ProviderTimeout time.Duration
	// Subscribers is where nodes naming a "subscriber" find it (issue 36).
	// Nil: such a node fails (rune run has no store).
	Subscribers Subscribers
	// Templates finds the message templates email and sms nodes name with
	// "template", each at the version current when the execution started
	// (issue 36; a store.Store is one). Nil: such a node fails with
	// TEMPLATE_NOT_FOUND (rune run has no template store).
	Templates templates.Source

	renderer *templates.Renderer
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
	if o.ProviderTimeout <= 0 {
		o.ProviderTimeout = DefaultProviderTimeout
	}
	if o.HTTPClient == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = IdleConnsPerHost
		t.MaxIdleConns = max(t.MaxIdleConns, 4*IdleConnsPerHost)
		o.Egress.Guard(t)
		o.HTTPClient = &http.Client{Transport: t}
	}
	o.HTTPClient = redirectClient(o.HTTPClient, o.Egress)
	o.renderer = &templates.Renderer{}
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
	CodeExpression       = node.CodeExpression
	CodeExpressionType   = node.CodeExpressionType
	CodeInvalidParameter = node.CodeInvalidParameter
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

// evalBool evaluates a condition; a non-boolean result is EXPRESSION_TYPE.
func evalBool(v expr.Value, env map[string]any, field string) (bool, error) {
	r, err := v.Eval(env)
	if err != nil {
		return false, node.ExprError(field, err)
	}
	b, ok := r.(bool)
	if !ok {
		return false, node.TypeError(field, "must be a boolean", r)
	}
	return b, nil
}
