package engine_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"

	coordmem "github.com/rune-org/rune/coord/memory"
	"github.com/rune-org/rune/engine"
	"github.com/rune-org/rune/expr"
	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/node"
	"github.com/rune-org/rune/nodes"
	"github.com/rune-org/rune/workflow"
)

const leaky = "sk-LEAKY-0123456789"

// leakyType stands for any node type with credentials (an email or SMS
// node, say): it resolves its credential through node.Secrets and then
// puts it everywhere it can — its output, its error, its log.
type leakyType struct{}

func (leakyType) Check(*workflow.NodeCheck) {}
func (leakyType) Compile(n *workflow.Node, _ *expr.Compiler) (node.Runner, error) {
	return leakyRunner{fail: n.Parameters["fail"] == true, ref: n.Credentials.Ref}, nil
}

type leakyRunner struct {
	fail bool
	ref  string
}

func (r leakyRunner) Run(ctx context.Context, in *node.Input) (node.Result, error) {
	f, err := in.Secrets.Resolve(ctx, r.ref)
	if err != nil {
		return node.Result{}, err
	}
	key := f["api_key"]
	in.Logger.Info("sending with "+key, "auth", "Basic "+base64.StdEncoding.EncodeToString([]byte("svc:"+key)))
	if r.fail {
		return node.Result{}, &node.Error{Code: "PROVIDER", Message: "provider refused key " + key,
			Details: map[string]any{"echo": []any{"x-key=" + key}}}
	}
	return node.Result{Output: map[string]any{"sent_with": key, key: "as a key"}}, nil
}

type mapSecrets map[string]map[string]string

func (m mapSecrets) Resolve(_ context.Context, ref string) (map[string]string, error) {
	return m[ref], nil
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// Redaction is the engine's, not the node type's: whatever a node resolves
// through node.Secrets is gone from its output, error and log lines.
func TestResolvedSecretsAreRedactedForEveryNodeType(t *testing.T) {
	reg := nodes.NewRegistry(nodes.Options{})
	reg.Register("leaky", leakyType{})
	co := coordmem.New(coordmem.Options{})
	defer co.Close()
	var logs syncBuf
	eng, err := engine.New(engine.Config{Registry: reg, Coord: co, Barriers: coordmem.NewBarriers(),
		Secrets: mapSecrets{"svc": {"username": "svc", "api_key": leaky}}, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	for _, fail := range []bool{false, true} {
		def := `{"id":"leak","nodes":[{"id":"start","type":"trigger","trigger":true},
			{"id":"send","type":"leaky","credentials":{"ref":"svc"},"parameters":{"fail":` + map[bool]string{false: "false", true: "true"}[fail] + `}}],
			"edges":[{"id":"e1","src":"start","dst":"send"}]}`
		wf, err := eng.Compile([]byte(def))
		if err != nil {
			t.Fatal(err)
		}
		var f engine.Effects
		if err := eng.Start(context.Background(), wf, "exec_leak_"+map[bool]string{false: "ok", true: "fail"}[fail], nil, &f); err != nil {
			t.Fatal(err)
		}
		var all engine.Effects
		if err := eng.Handle(context.Background(), engine.Delivery{}, f.Next[0].Msg, &all); err != nil {
			t.Fatal(err)
		}
		out, _ := json.Marshal(all)
		if strings.Contains(string(out), leaky) || !strings.Contains(string(out), "[redacted]") {
			t.Errorf("fail=%v: effects hold the secret, or nothing was redacted: %s", fail, out)
		}
		if fail && (all.Completion == nil || all.Completion.Status != message.CompletionFailed ||
			all.Completion.FailureReason.Message != "provider refused key [redacted]") {
			t.Errorf("completion %+v", all.Completion)
		}
	}
	if l := logs.b.String(); strings.Contains(l, leaky) || strings.Contains(l, base64.StdEncoding.EncodeToString([]byte("svc:"+leaky))) || !strings.Contains(l, "sending with [redacted]") {
		t.Errorf("logs: %s", l)
	}
}
