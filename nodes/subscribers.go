package nodes

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"

	"github.com/rune-org/rune/expr"
	"github.com/rune-org/rune/node"
	"github.com/rune-org/rune/workflow"
)

// Error codes of the subscriber parameters of email and sms (issue 36).
const (
	// CodeSubscriberNotFound: parameters.subscriber names no subscriber.
	// Not retryable.
	CodeSubscriberNotFound = "SUBSCRIBER_NOT_FOUND"
	// CodeSubscribers: the subscribers could not be read (retryable), or
	// the runtime has none (rune run: not retryable).
	CodeSubscribers = "SUBSCRIBERS"
)

// OptedOut is the reason of a send the subscriber's preferences forbid.
const OptedOut = "OPTED_OUT"

// ErrNoSubscriber is what Subscribers.Subscriber wraps for an unknown id.
var ErrNoSubscriber = errors.New("no such subscriber")

// Subscriber is a recipient as the email and sms nodes see it.
type Subscriber struct {
	ID, Email, Phone, Timezone, Locale string
	Data                               map[string]any
	// Allows says whether a send on channel ("email", "sms") of category
	// ("" for none) by workflow is allowed by the subscriber's preferences.
	Allows func(channel, category, workflow string) bool
	// QuietHours, when set, defer the non-critical sends that fall in
	// them until they end (quiet.go).
	QuietHours *QuietHours
}

// Subscribers is where the email and sms nodes find the subscriber their
// "subscriber" parameter names: the server's store (the runtimes of rune
// server and rune worker set it). Safe for concurrent use.
type Subscribers interface {
	// Subscriber returns subscriber id with its preferences, or an error
	// wrapping ErrNoSubscriber when there is none.
	Subscriber(ctx context.Context, id string) (*Subscriber, error)
	// UnsubscribeURL is the one-click unsubscribe URL (RFC 8058) of
	// subscriber id for category: "" when the server has no public URL.
	UnsubscribeURL(id, category string) string
}

// SubscriberVar is the Liquid name of the subscriber in the templates of a
// node that names one: {{ subscriber.data.first_name }}.
const SubscriberVar = expr.SubscriberVar

var categoryRe = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,64}$`)

// checkAudience checks the subscriber, category and critical parameters.
func checkAudience(p node.Params) {
	if s, ok := p.String("subscriber", false); ok {
		checkLiquid(p, "parameters.subscriber", s)
	}
	if s, ok := p.String("category", false); ok && !categoryRe.MatchString(s) {
		p.C.Report("parameters.category", "%q is not a category: 1 to 64 letters, digits, _ . : -", s)
	}
	if v, present := p.Values["critical"]; present {
		if _, ok := v.(bool); !ok {
			p.C.Report("parameters.critical", "must be a boolean, not %s", expr.TypeName(v))
		}
	}
}

// audience is a node's subscriber, category and critical parameters.
type audience struct {
	subscriber *liquidField
	category   string
	critical   bool
}

func compileAudience(n *workflow.Node, c *expr.Compiler) (audience, error) {
	var a audience
	var err error
	if a.subscriber, err = liquidParam(n, c, "subscriber"); err != nil {
		return a, err
	}
	a.category, _ = n.Parameters["category"].(string)
	a.critical, _ = n.Parameters["critical"].(bool)
	return a, nil
}

// recipient is the subscriber a run sends to, and the env its templates
// see (in.Env, plus "subscriber").
type recipient struct {
	sub      *Subscriber
	env      map[string]any
	optedOut bool
}

// resolve finds the node's subscriber, when it names one, and whether its
// preferences allow this send on channel.
func (a *audience) resolve(ctx context.Context, opts *Options, in *node.Input, channel string) (recipient, error) {
	if a.subscriber == nil {
		return recipient{env: in.Env}, nil
	}
	id, err := a.subscriber.render(in.Env)
	if err != nil {
		return recipient{}, err
	}
	if id == "" {
		return recipient{}, node.InvalidParam("subscriber", "rendered to an empty id")
	}
	if opts.Subscribers == nil {
		return recipient{}, &node.Error{Code: CodeSubscribers, Message: fmt.Sprintf(
			"parameters.subscriber: this runtime has no subscribers to find %q in (rune run has no store: run the workflow on rune server)", id)}
	}
	sub, err := opts.Subscribers.Subscriber(ctx, id)
	if errors.Is(err, ErrNoSubscriber) {
		return recipient{}, &node.Error{Code: CodeSubscriberNotFound, Message: fmt.Sprintf("parameters.subscriber: subscriber %q does not exist (PUT /v1/subscribers/{id} creates it)", id),
			Details: map[string]any{"subscriber": id}}
	}
	if err != nil {
		if ctx.Err() != nil {
			return recipient{}, ctx.Err()
		}
		return recipient{}, &node.Error{Code: CodeSubscribers, Message: fmt.Sprintf("parameters.subscriber: reading subscriber %q: %v", id, err), Retryable: true}
	}
	env := make(map[string]any, len(in.Env)+1)
	maps.Copy(env, in.Env)
	data := sub.Data
	if data == nil {
		data = map[string]any{}
	}
	env[SubscriberVar] = map[string]any{"id": sub.ID, "email": sub.Email, "phone": sub.Phone, "timezone": sub.Timezone, "locale": sub.Locale, "data": data}
	optedOut := !a.critical && sub.Allows != nil && !sub.Allows(channel, a.category, in.WorkflowID)
	return recipient{sub: sub, env: env, optedOut: optedOut}, nil
}

// optedOutOutput is the output of a send the preferences forbid.
func optedOutOutput() map[string]any {
	return map[string]any{"sent": false, "reason": OptedOut}
}

// marked adds what the node's audience says to a send's output.
func (rc recipient) marked(out map[string]any) map[string]any {
	if rc.sub != nil && out != nil {
		if _, ok := out["sent"]; !ok {
			out["sent"] = true
		}
		out["subscriber"] = rc.sub.ID
	}
	return out
}
