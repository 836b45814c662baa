package brokertest

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rune-org/rune/broker"
	"github.com/rune-org/rune/broker/memory"
	"github.com/rune-org/rune/message"
)

// The suite proves itself: each mutant is the memory broker with one promise
// broken, and the cases listed for it must fail. Every case must be killed by
// some mutant, so none of them can pass vacuously. Mutants run in child
// processes (the suite's failures would fail this test otherwise).

const mutantEnv = "BROKERTEST_MUTANT"

type mutant struct {
	kills []string // cases that must fail
	opts  memory.Options
	wrap  func(*memory.Broker) broker.Broker
}

var mutants = map[string]mutant{
	"corrupt-time": {kills: []string{"RoundTrip"}, wrap: func(b *memory.Broker) broker.Broker {
		return &handlerMut{Broker: b, mut: func(ctx context.Context, d *broker.Delivery, h broker.Handler) error {
			if e, ok := d.Body.(*message.NodeExecution); ok {
				c := *e
				c.StartedAt = c.StartedAt.Truncate(time.Second) // a lossy encoding
				d.Body = &c
			}
			return h(ctx, d)
		}}
	}},
	"drop-key": {kills: []string{"IDAndKeyPreserved", "RoundTrip"}, wrap: func(b *memory.Broker) broker.Broker {
		return &handlerMut{Broker: b, mut: func(ctx context.Context, d *broker.Delivery, h broker.Handler) error {
			d.Key = ""
			return h(ctx, d)
		}}
	}},
	"accept-invalid": {kills: []string{"PublishInvalid"}, wrap: func(b *memory.Broker) broker.Broker {
		return &publishMut{Broker: b, mut: func(ctx context.Context, msgs []broker.Message) broker.Pending {
			for _, m := range msgs {
				if m.Validate() != nil {
					return broker.Done{}
				}
			}
			return b.Publish(ctx, msgs...)
		}}
	}},
	"no-redelivered-flag": {kills: []string{"RedeliveryAfterError", "ShutdownHandsMessageOn"}, wrap: func(b *memory.Broker) broker.Broker {
		return &handlerMut{Broker: b, mut: func(ctx context.Context, d *broker.Delivery, h broker.Handler) error {
			d.Redelivered = false
			return h(ctx, d)
		}}
	}},
	"ack-on-error": {kills: []string{"RedeliveryAfterError", "ShutdownHandsMessageOn", "UnconsumedSurvive"}, wrap: func(b *memory.Broker) broker.Broker {
		return &handlerMut{Broker: b, mut: func(ctx context.Context, d *broker.Delivery, h broker.Handler) error {
			if err := h(ctx, d); errors.Is(err, broker.ErrReject) {
				return err
			}
			return nil
		}}
	}},
	"drop-on-shutdown": {kills: []string{"ShutdownHandsMessageOn", "UnconsumedSurvive"}, wrap: func(b *memory.Broker) broker.Broker {
		return &handlerMut{Broker: b, mut: func(ctx context.Context, d *broker.Delivery, h broker.Handler) error {
			if err := h(ctx, d); err != nil && ctx.Err() == nil {
				return err
			}
			return nil
		}}
	}},
	"hot-loop": {kills: []string{"NoHotLoop"}, opts: memory.Options{RedeliveryPause: time.Microsecond}},
	"reject-as-retry": {kills: []string{"RejectDeadLetters"}, wrap: func(b *memory.Broker) broker.Broker {
		return &handlerMut{Broker: b, mut: func(ctx context.Context, d *broker.Delivery, h broker.Handler) error {
			if err := h(ctx, d); err != nil {
				return errors.New(err.Error())
			}
			return nil
		}}
	}},
	"raw-lost": {kills: []string{"PublishRawUndecodable"}, wrap: func(b *memory.Broker) broker.Broker {
		return &rawLost{b}
	}},
	"ignore-delay": {kills: []string{"Delay", "MixedDelays", "TimeoutWithDelay"}, wrap: func(b *memory.Broker) broker.Broker {
		return &publishMut{Broker: b, mut: func(ctx context.Context, msgs []broker.Message) broker.Pending {
			msgs = append([]broker.Message(nil), msgs...)
			for i := range msgs {
				msgs[i].Delay = 0
			}
			return b.Publish(ctx, msgs...)
		}}
	}},
	"head-of-line": {kills: []string{"MixedDelays"}, wrap: newHeadOfLine},
	"follow-drops-completion": {kills: []string{"Follow"}, wrap: func(b *memory.Broker) broker.Broker {
		return &followMut{Broker: b, keep: func(m broker.Message) bool { return m.Topic != broker.Completion }}
	}},
	"follow-all-keys": {kills: []string{"Follow"}, wrap: newFollowAll},
	"serial": {kills: []string{"Concurrency"}, wrap: func(b *memory.Broker) broker.Broker {
		return &consumeMut{Broker: b, mut: func(ctx context.Context, topic broker.Topic, opts broker.ConsumeOptions, h broker.Handler) error {
			opts.Concurrency = 1
			return b.Consume(ctx, topic, opts, h)
		}}
	}},
	"duplicate": {kills: []string{"ManyMessages"}, wrap: func(b *memory.Broker) broker.Broker {
		var n atomic.Int64
		return &handlerMut{Broker: b, mut: func(ctx context.Context, d *broker.Delivery, h broker.Handler) error {
			if n.Add(1)%500 == 0 {
				_ = h(ctx, d)
			}
			return h(ctx, d)
		}}
	}},
	"lose": {kills: []string{"ManyMessages"}, wrap: func(b *memory.Broker) broker.Broker {
		var n atomic.Int64
		return &handlerMut{Broker: b, mut: func(ctx context.Context, d *broker.Delivery, h broker.Handler) error {
			if n.Add(1)%500 == 0 {
				return nil
			}
			return h(ctx, d)
		}}
	}},
	"return-early": {kills: []string{"ConsumeWaitsForHandlers"}, wrap: func(b *memory.Broker) broker.Broker {
		return &consumeMut{Broker: b, mut: func(ctx context.Context, topic broker.Topic, opts broker.ConsumeOptions, h broker.Handler) error {
			go b.Consume(ctx, topic, opts, h)
			<-ctx.Done()
			return nil
		}}
	}},
}

func newMutant(name string) func(t *testing.T) broker.Broker {
	m, ok := mutants[name]
	if !ok {
		panic("unknown mutant " + name)
	}
	return func(t *testing.T) broker.Broker {
		opts := m.opts
		opts.Logger = slog.New(slog.DiscardHandler)
		b := memory.New(opts)
		if m.wrap == nil {
			return b
		}
		return m.wrap(b)
	}
}

// TestMutantChild runs the suite on the mutant named by $BROKERTEST_MUTANT.
func TestMutantChild(t *testing.T) {
	name := os.Getenv(mutantEnv)
	if name == "" {
		t.Skip("runs in the child processes of TestMutants")
	}
	patience = 5 * time.Second // mutants fail by timing out; the long delay is 3s
	Run(t, newMutant(name))
}

func TestMutants(t *testing.T) {
	if os.Getenv(mutantEnv) != "" {
		t.Skip("child process")
	}
	if testing.Short() {
		t.Skip("runs the suite in child processes")
	}
	killed := map[string]bool{}
	for _, c := range cases {
		killed[c.name] = false
	}
	// The children run all at once, not t.Parallel's GOMAXPROCS at a time:
	// most of them spend their time waiting for a deadline.
	type result struct {
		mutant, kase string
		out          []byte
		err          error
	}
	var (
		wg      sync.WaitGroup
		results []*result
	)
	for name, m := range mutants {
		for _, c := range m.kills {
			if _, ok := killed[c]; !ok {
				t.Fatalf("mutant %s names unknown case %s", name, c)
			}
			killed[c] = true
			r := &result{mutant: name, kase: c}
			results = append(results, r)
			wg.Go(func() {
				cmd := exec.Command(os.Args[0], "-test.run=^TestMutantChild$/^"+c+"$", "-test.count=1", "-test.v")
				cmd.Env = append(os.Environ(), mutantEnv+"="+name)
				r.out, r.err = cmd.CombinedOutput()
			})
		}
	}
	wg.Wait()
	for _, r := range results {
		if r.err == nil || !strings.Contains(string(r.out), "--- FAIL: TestMutantChild/"+r.kase+" ") {
			t.Errorf("case %s passed on mutant %s, which breaks what it checks (err=%v):\n%s", r.kase, r.mutant, r.err, r.out)
		}
	}
	for c, k := range killed {
		if !k {
			t.Errorf("no mutant shows that case %s can fail", c)
		}
	}
}

// TestMemoryPasses guards the mutants' baseline: unbroken, the suite passes.
func TestMemoryPasses(t *testing.T) {
	if os.Getenv(mutantEnv) != "" {
		t.Skip("child process")
	}
	Run(t, func(t *testing.T) broker.Broker {
		return memory.New(memory.Options{Logger: slog.New(slog.DiscardHandler)})
	})
}

// ---- mutant plumbing. Each embeds *memory.Broker, so PublishRaw stays.

type handlerMut struct {
	*memory.Broker
	mut func(ctx context.Context, d *broker.Delivery, h broker.Handler) error
}

func (m *handlerMut) Consume(ctx context.Context, topic broker.Topic, opts broker.ConsumeOptions, h broker.Handler) error {
	return m.Broker.Consume(ctx, topic, opts, func(ctx context.Context, d *broker.Delivery) error { return m.mut(ctx, d, h) })
}

type publishMut struct {
	*memory.Broker
	mut func(ctx context.Context, msgs []broker.Message) broker.Pending
}

func (m *publishMut) Publish(ctx context.Context, msgs ...broker.Message) broker.Pending {
	return m.mut(ctx, msgs)
}

type consumeMut struct {
	*memory.Broker
	mut func(ctx context.Context, topic broker.Topic, opts broker.ConsumeOptions, h broker.Handler) error
}

func (m *consumeMut) Consume(ctx context.Context, topic broker.Topic, opts broker.ConsumeOptions, h broker.Handler) error {
	return m.mut(ctx, topic, opts, h)
}

type rawLost struct{ *memory.Broker }

func (rawLost) PublishRaw(context.Context, broker.Topic, []byte) error { return nil }

type followMut struct {
	*memory.Broker
	keep func(broker.Message) bool
}

func (m *followMut) Follow(ctx context.Context, key string) (<-chan broker.Message, error) {
	in, err := m.Broker.Follow(ctx, key)
	if err != nil {
		return nil, err
	}
	out := make(chan broker.Message, 64)
	go func() {
		defer close(out)
		for msg := range in {
			if m.keep(msg) {
				out <- msg
			}
		}
	}()
	return out, nil
}

// headOfLine delays messages through one FIFO: a long delay holds back
// every later one.
type headOfLine struct {
	*memory.Broker
	fifo chan broker.Message
}

func newHeadOfLine(b *memory.Broker) broker.Broker {
	h := &headOfLine{Broker: b, fifo: make(chan broker.Message, 1024)}
	go func() {
		for m := range h.fifo {
			time.Sleep(m.Delay)
			m.Delay = 0
			b.Publish(context.Background(), m)
		}
	}()
	return h
}

func (h *headOfLine) Publish(ctx context.Context, msgs ...broker.Message) broker.Pending {
	for _, m := range msgs {
		if m.Delay > 0 {
			h.fifo <- m
		} else if err := h.Broker.Publish(ctx, m).Wait(ctx); err != nil {
			return broker.Done{Err: err}
		}
	}
	return broker.Done{}
}

// followAll gives every follower every Status and Completion message.
type followAll struct {
	*memory.Broker
	mu   sync.Mutex
	subs []chan broker.Message
}

func newFollowAll(b *memory.Broker) broker.Broker { return &followAll{Broker: b} }

func (f *followAll) Publish(ctx context.Context, msgs ...broker.Message) broker.Pending {
	p := f.Broker.Publish(ctx, msgs...)
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range msgs {
		if m.Topic == broker.Status || m.Topic == broker.Completion {
			for _, s := range f.subs {
				s <- m
			}
		}
	}
	return p
}

func (f *followAll) Follow(ctx context.Context, key string) (<-chan broker.Message, error) {
	ch := make(chan broker.Message, 1024)
	f.mu.Lock()
	f.subs = append(f.subs, ch)
	f.mu.Unlock()
	return ch, nil
}
