package nodes

import (
	"context"

	"github.com/rune-org/rune/expr"
	"github.com/rune-org/rune/node"
	"github.com/rune-org/rune/workflow"
)

// checkIdempotencyKey checks the http node's "idempotency_key" parameter.
func checkIdempotencyKey(c *workflow.NodeCheck) {
	if v, present := c.Node.Parameters["idempotency_key"]; present {
		if _, ok := v.(bool); !ok {
			c.Report("parameters.idempotency_key", "must be true or false, not %s", expr.TypeName(v))
		}
	}
}

// Eager implements node.Eager: an http hop on a first copy makes one
// coordination round trip (its Finish) instead of two; a call short next to
// a round trip is what makes the second one count (docs/benchmarks.md).
func (*httpRunner) Eager() {}

// Run calls the endpoint. With idempotency_key: true the call is made at
// most once per idempotency key, as an email or a text is: a retry or
// redelivery after a successful call returns the recorded response
// (dsl.md "Sending exactly once").
func (r *httpRunner) Run(ctx context.Context, in *node.Input) (node.Result, error) {
	if !r.once {
		return r.call(ctx, in)
	}
	out, err := sendOnce(ctx, &r.opts, in, func(*sendRecord) (map[string]any, error) {
		res, err := r.call(ctx, in)
		if err != nil {
			return nil, err
		}
		m, _ := res.Output.(map[string]any)
		return m, nil
	})
	if err != nil {
		return node.Result{}, err
	}
	return node.Result{Output: out}, nil
}
