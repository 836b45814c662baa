package engine

import (
	"context"

	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/node"
)

// stepSecrets resolves credentials for one node run through the engine's
// store and remembers the secret values it hands out in the step's redaction
// set, so that whatever the node returns, logs or fails with is cleaned of
// them before it leaves the worker. Any node type resolving credentials
// through node.Secrets gets this without doing anything.
type stepSecrets struct{ s *step }

func (r stepSecrets) Resolve(ctx context.Context, ref string) (map[string]string, error) {
	fields, err := r.s.e.cfg.Secrets.Resolve(ctx, ref)
	if err != nil {
		return nil, err
	}
	// Only the secret fields: the host, port, type, from address and
	// account a user reads in outputs and errors stay (redact.Public).
	r.s.secrets.AddCredential(fields)
	return fields, nil
}

// redactRecord removes the secrets the node resolved from its output, its
// split items and its error: the record is what statuses, the context,
// the completion and the coordinator's stored record are made of.
func (s *step) redactRecord(rec *record) {
	if s.secrets.Empty() {
		return
	}
	rec.Output = s.secrets.Value(rec.Output)
	if s.items != nil {
		// A copy: the node's slice may be shared (a constant array).
		items := make([]any, len(s.items))
		for i, it := range s.items {
			items[i] = s.secrets.Value(it)
		}
		s.items = items
	}
	if e := rec.Err; e != nil {
		red := &message.Error{Code: e.Code, Message: s.secrets.String(e.Message)}
		if e.Details != nil {
			red.Details, _ = s.secrets.Value(e.Details).(map[string]any)
		}
		rec.Err = red
	}
}

var _ node.Secrets = stepSecrets{}
