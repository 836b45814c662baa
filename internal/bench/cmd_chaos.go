package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rune-org/rune/broker"
	"github.com/rune-org/rune/broker/amqp"
	"github.com/rune-org/rune/client"
	"github.com/rune-org/rune/message"
)

// chaosFaults are the faults --mode chaos injects, by name.
var chaosFaults = []string{"kill-worker", "term-worker", "kill-scheduler", "stop-scheduler"}

type chaosBench struct {
	executions, workers int
	faults              []string
	every, stopFor      time.Duration
	asJSON              bool
}

// chaosReport is what --mode chaos prints.
type chaosReport struct {
	Executions int            `json:"executions"`
	Completed  int            `json:"completed"`
	Duplicates int            `json:"duplicate_completions"`
	Differing  int            `json:"differing_duplicates"`
	Calls      int            `json:"http_calls"`
	Repeats    int            `json:"http_repeats_same_key"`
	Problems   []string       `json:"problems,omitempty"`
	Faults     map[string]int `json:"faults"`
	Elapsed    time.Duration  `json:"elapsed_ns"`
}

// chaosProc is a `rune worker` or `rune scheduler` the chaos bench runs,
// kills and replaces.
type chaosProc struct {
	name string
	cmd  *exec.Cmd
	log  *logTail
	done chan struct{}
}

func startChaosProc(name string, args []string) (*chaosProc, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	marker := "worker started"
	if args[0] == "scheduler" {
		marker = "scheduler started"
	}
	p := &chaosProc{name: name, log: newLogTail(marker), done: make(chan struct{})}
	p.cmd = exec.Command(exe, args...)
	p.cmd.Stderr = p.log
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	select {
	case <-p.log.found:
		return p, nil
	case <-p.done:
		return nil, fmt.Errorf("%s exited at start-up; its log:\n%s", name, p.log.String())
	case <-time.After(60 * time.Second):
		_ = p.cmd.Process.Kill()
		return nil, fmt.Errorf("%s did not start within a minute; its log:\n%s", name, p.log.String())
	}
}

// end stops p with sig and waits (a minute, then kills it).
func (p *chaosProc) end(sig syscall.Signal) {
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(time.Minute):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// benchChaos runs executions of FaultWorkflow on spawned workers and
// a scheduler while killing, stopping and replacing them, and checks that
// every execution completed once with its side effects under one key each.
func benchChaos(ctx context.Context, env *Env, srv *Deployment, o chaosBench) error {
	if srv.AMQPURL == "" {
		return usagef("--mode chaos runs the distributed runtime: give --amqp and --redis")
	}
	if err := srv.check(true); err != nil {
		return err
	}
	for _, f := range o.faults {
		if !slices.Contains(chaosFaults, f) {
			return usagef("--faults: unknown fault %q (want some of %s)", f, strings.Join(chaosFaults, ", "))
		}
	}
	if o.workers < 1 {
		o.workers = 2
	}
	defer ownPrefix(env, srv, o.workers)()
	args := func(role string) []string {
		a := append([]string{role}, srv.args()...)
		if role == "worker" {
			a = append(a, egressAllow...)
		}
		return a
	}
	var (
		mu         sync.Mutex
		workers    []*chaosProc
		schedulers []*chaosProc
		n          int
	)
	start := func(role string) error {
		mu.Lock()
		n++
		name := fmt.Sprintf("%s %d", role, n)
		mu.Unlock()
		p, err := startChaosProc(name, args(role))
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		if role == "worker" {
			workers = append(workers, p)
		} else {
			schedulers = append(schedulers, p)
		}
		return nil
	}
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, p := range append(workers, schedulers...) {
			p.end(syscall.SIGKILL)
		}
	}()
	for range o.workers {
		if err := start("worker"); err != nil {
			return err
		}
	}
	if err := start("scheduler"); err != nil {
		return err
	}
	rt, err := srv.connect(ctx, env.Logger, amqp.RoleMaster)
	if err != nil {
		return err
	}
	defer rt.Close()
	fx := NewSideEffects()
	defer fx.Close()
	wf, err := rt.Engine.Compile(FaultWorkflow(fx.URL))
	if err != nil {
		return err
	}

	rep := &chaosReport{Executions: o.executions, Faults: map[string]int{}}
	first := map[string][]byte{}
	var cmu sync.Mutex
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		_ = rt.Broker.Consume(cctx, broker.Completion, broker.ConsumeOptions{Concurrency: 1, Prefetch: 500}, func(_ context.Context, d *broker.Delivery) error {
			c, ok := d.Body.(*message.Completion)
			if !ok {
				return nil
			}
			raw, _ := json.Marshal(c)
			cmu.Lock()
			defer cmu.Unlock()
			if prev, dup := first[c.ExecutionID]; dup {
				rep.Duplicates++
				if string(prev) != string(raw) || d.ID != c.ExecutionID {
					rep.Differing++
				}
				return nil
			}
			first[c.ExecutionID] = raw
			return nil
		})
	}()
	completed := func() int {
		cmu.Lock()
		defer cmu.Unlock()
		return len(first)
	}

	fmt.Fprintf(env.Stderr, "rune bench: chaos: %d executions on %d workers and a scheduler, prefix %q; a fault (%s) every %v\n",
		o.executions, o.workers, srv.Prefix, strings.Join(o.faults, ", "), o.every)
	began := time.Now()
	ids := make([]string, o.executions)
	for i := range ids {
		ids[i] = fmt.Sprintf("chaos_%s_%06d", srv.Prefix, i)
	}
	go func() {
		for _, id := range ids {
			if cctx.Err() != nil {
				return
			}
			if err := client.Start(cctx, rt.Broker, rt.Engine, wf, id, FaultInput()); err != nil {
				fmt.Fprintf(env.Stderr, "rune bench: start %s: %v\n", id, err)
			}
		}
	}()

	tick := time.NewTicker(o.every)
	defer tick.Stop()
	progress := time.NewTicker(5 * time.Second)
	defer progress.Stop()
	deadline := time.Now().Add(time.Duration(o.executions)*50*time.Millisecond + 5*time.Minute)
	for f := 0; completed() < o.executions; {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-progress.C:
			fmt.Fprintf(env.Stderr, "rune bench: %d of %d completed\n", completed(), o.executions)
			continue
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("chaos: only %d of %d executions completed by the deadline", completed(), o.executions)
		}
		if len(o.faults) == 0 {
			continue
		}
		fault := o.faults[f%len(o.faults)]
		f++
		if err := injectChaos(env, fault, o.stopFor, &mu, &workers, &schedulers, start); err != nil {
			return err
		}
		rep.Faults[fault]++
	}
	rep.Elapsed = time.Since(began)
	// Stop everything gracefully, then give late duplicates a moment.
	mu.Lock()
	for _, p := range append(workers, schedulers...) {
		p.end(syscall.SIGTERM)
	}
	workers, schedulers = nil, nil
	mu.Unlock()
	time.Sleep(2 * time.Second)
	cancel()
	rep.Completed = completed()
	rep.Problems, rep.Repeats, rep.Calls = fx.Check(ids)
	sort.Strings(rep.Problems)
	if o.asJSON {
		return json.NewEncoder(env.Stdout).Encode(rep)
	}
	rep.print(env.Stdout)
	if len(rep.Problems) > 0 || rep.Differing > 0 || rep.Completed != rep.Executions {
		return errors.New("chaos: the run had problems (above)")
	}
	return nil
}

// injectChaos applies one fault and starts a replacement for a process it
// ended.
func injectChaos(env *Env, fault string, stopFor time.Duration, mu *sync.Mutex, workers, schedulers *[]*chaosProc, start func(string) error) error {
	mu.Lock()
	pool, role := workers, "worker"
	if strings.HasSuffix(fault, "scheduler") {
		pool, role = schedulers, "scheduler"
	}
	if len(*pool) == 0 {
		mu.Unlock()
		return start(role)
	}
	victim := (*pool)[0]
	*pool = (*pool)[1:]
	mu.Unlock()
	fmt.Fprintf(env.Stderr, "rune bench: %s: %s\n", fault, victim.name)
	switch fault {
	case "kill-worker", "kill-scheduler":
		victim.end(syscall.SIGKILL)
	case "term-worker":
		victim.end(syscall.SIGTERM)
	case "stop-scheduler":
		// Frozen past its lease while a replacement takes over; then woken,
		// it must fire nothing again, and it stays.
		_ = victim.cmd.Process.Signal(syscall.SIGSTOP)
		if err := start(role); err != nil {
			return err
		}
		time.Sleep(stopFor)
		_ = victim.cmd.Process.Signal(syscall.SIGCONT)
		mu.Lock()
		*pool = append(*pool, victim)
		mu.Unlock()
		return nil
	}
	return start(role)
}

func (r *chaosReport) print(w io.Writer) {
	fmt.Fprintf(w, "chaos: %d executions in %v\n", r.Executions, r.Elapsed.Round(time.Millisecond))
	var faults []string
	for f, n := range r.Faults {
		faults = append(faults, fmt.Sprintf("%s ×%d", f, n))
	}
	sort.Strings(faults)
	fmt.Fprintf(w, "  faults:                 %s\n", strings.Join(faults, ", "))
	fmt.Fprintf(w, "  completed:              %d\n", r.Completed)
	fmt.Fprintf(w, "  duplicate completions:  %d (%d differing from the first)\n", r.Duplicates, r.Differing)
	fmt.Fprintf(w, "  http calls:             %d, %d repeated under the same idempotency key\n", r.Calls, r.Repeats)
	for _, p := range r.Problems[:min(len(r.Problems), 20)] {
		fmt.Fprintf(w, "  problem: %s\n", p)
	}
}
