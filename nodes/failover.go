package nodes

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rune-org/rune/node"
	"github.com/rune-org/rune/workflow"
)

// DefaultProviderTimeout bounds one provider's try when a node names
// failover credentials (Options.ProviderTimeout).
const DefaultProviderTimeout = 10 * time.Second

// CodeProviderTimeout is an SMS provider that did not answer within
// Options.ProviderTimeout: the next credential of the list is tried.
const CodeProviderTimeout = "PROVIDER_TIMEOUT"

// credRefs is the node's credentials in the order a send tries them.
func credRefs(n *workflow.Node) []string {
	if n.Credentials == nil || n.Credentials.Ref == "" {
		return nil
	}
	return n.Credentials.Refs()
}

// checkSingleCredential reports a failover list on a node type that
// cannot fail over.
func checkSingleCredential(c *workflow.NodeCheck) {
	if c.Node.Credentials != nil && len(c.Node.Credentials.Failover) > 0 {
		c.Report("credentials.ref", "a list of credentials (provider failover) is for email and sms nodes; name one credential")
	}
}

// failsOver says whether a provider's failure lets the same attempt move
// on to the next credential: the provider could not be reached, did not
// answer in time, or answered with a 5xx about itself. A 4xx (the request
// is wrong, or the account is limited) and a refused recipient would be
// refused by the next provider too.
func failsOver(err error) bool {
	var ne *node.Error
	if !errors.As(err, &ne) {
		return false
	}
	switch ne.Code {
	case CodeSMSConnection, CodeSMTPConnection, CodeProviderTimeout:
		return true
	case CodeSMS:
		status, _ := ne.Details["status"].(int)
		return status >= 500
	case CodeSMTP:
		code, _ := ne.Details["smtp_code"].(int)
		param, _ := ne.Details["parameter"].(string)
		rcpt := param == "parameters.to" || param == "parameters.cc" || param == "parameters.bcc"
		return code >= 500 && !rcpt
	}
	return false
}

// failover calls try with each credential of refs in turn, within one
// attempt, while the failure lets it move on (failsOver) and the try has
// not handed the message over (handed, for an email once its data is
// written). The output names the credential that sent ("credential") and,
// when earlier ones failed, each of them with its error ("failover"). A
// send that fails on every credential returns the last error, its details
// listing the others'.
//
// Every try carries the same idempotency key: a provider that honours it
// drops a copy it already has. The window in which two providers may both
// deliver is a try that timed out or lost its connection after the
// provider had taken the message (docs/notifications.md).
func failover(ctx context.Context, timeout time.Duration, refs []string, handed func() bool,
	try func(ctx context.Context, ref string, failed []any) (map[string]any, error)) (map[string]any, error) {
	var failed []any
	for i, ref := range refs {
		last := i == len(refs)-1
		tctx, cancel := ctx, context.CancelFunc(func() {})
		if !last && timeout > 0 {
			tctx, cancel = context.WithTimeout(ctx, timeout)
		}
		out, err := try(tctx, ref, failed)
		timedOut := tctx.Err() != nil && ctx.Err() == nil
		cancel()
		if err == nil {
			sentWith(out, ref, failed)
			return out, nil
		}
		if timedOut {
			err = &node.Error{Code: CodeProviderTimeout, Retryable: true,
				Message: fmt.Sprintf("credential %q: no answer within %s", ref, timeout)}
		}
		if ctx.Err() != nil || last || (handed != nil && handed()) || !failsOver(err) {
			if len(failed) > 0 {
				err = withFailover(err, failed)
			}
			return nil, err
		}
		failed = append(failed, map[string]any{"credential": ref, "error": errorText(err)})
	}
	return nil, errors.New("failover: no credential") // refs is never empty
}

// sentWith names in out the credential that sent and those that failed
// before it. A send that records its result before it returns (an email)
// calls it itself.
func sentWith(out map[string]any, ref string, failed []any) {
	out["credential"] = ref
	if len(failed) > 0 {
		out["failover"] = failed
	}
}

// withFailover adds the earlier credentials' failures to err.
func withFailover(err error, failed []any) error {
	var ne *node.Error
	if !errors.As(err, &ne) {
		return err
	}
	c := *ne
	c.Details = map[string]any{"failover": failed}
	for k, v := range ne.Details {
		c.Details[k] = v
	}
	var names []string
	for _, f := range failed {
		names = append(names, fmt.Sprintf("%q", f.(map[string]any)["credential"]))
	}
	c.Message = ne.Message + " (after " + strings.Join(names, ", ") + " failed)"
	return &c
}

func errorText(err error) string {
	var ne *node.Error
	if errors.As(err, &ne) {
		return ne.Code + ": " + ne.Message
	}
	return err.Error()
}
