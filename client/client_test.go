package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/rune-org/rune/broker"
	"github.com/rune-org/rune/client"
	"github.com/rune-org/rune/coord"
	"github.com/rune-org/rune/embedded"
)

// refusing is a broker that refuses execution messages, as RabbitMQ did a
// master without write access (issue 12).
type refusing struct{ broker.Broker }

func (r refusing) Publish(ctx context.Context, msgs ...broker.Message) broker.Pending {
	for _, m := range msgs {
		if m.Topic == broker.Execution {
			return broker.Done{Err: errors.New("access refused")}
		}
	}
	return r.Broker.Publish(ctx, msgs...)
}

// A start whose first messages are refused leaves no live execution behind.
func TestFailedStartEndsTheExecution(t *testing.T) {
	t.Parallel()
	rt, err := embedded.New(embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	wf, err := rt.Engine.Compile([]byte(`{"id":"two","nodes":[{"id":"start","type":"trigger","trigger":true},
		{"id":"a","type":"set","parameters":{"values":{"v":1}}},{"id":"b","type":"set","parameters":{"values":{"v":2}}}],
		"edges":[{"id":"e1","src":"start","dst":"a"},{"id":"e2","src":"start","dst":"b"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	err = client.Start(ctx, refusing{rt.Broker}, rt.Engine, wf, "exec_refused", map[string]any{})
	if err == nil || !strings.Contains(err.Error(), "access refused") {
		t.Fatalf("Start = %v, want the publish error", err)
	}
	b, err := rt.Coord.Begin(ctx, "exec_refused", "some-later-message")
	if err != nil {
		t.Fatal(err)
	}
	if b.State != coord.Drop {
		t.Errorf("after a failed start, a message of the execution gets %v, want Drop (the execution ended)", b.State)
	}
}
