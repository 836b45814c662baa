package bench

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// The bench finds the local process behind a server URL by the port it
// listens on: here, this test process.
func TestLocalServerPIDs(t *testing.T) {
	listen := func() int {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l.Addr().(*net.TCPAddr).Port
	}
	a, b := listen(), listen()
	self := []int{os.Getpid()}
	for _, c := range []struct {
		url  string
		want []int
	}{
		{fmt.Sprintf("amqp://guest:guest@127.0.0.1:%d/", a), self},
		{fmt.Sprintf("redis://localhost:%d/0", a), self},
		{fmt.Sprintf("redis://127.0.0.1:%d,127.0.0.1:%d?shards=16", a, b), self}, // one process, counted once
		{fmt.Sprintf("redis://10.1.2.3:%d/0", a), nil},                           // not this machine's
		{"redis://127.0.0.1:1/0", nil},                                           // nothing listens
		{"http://127.0.0.1/", nil},
	} {
		if got := localServerPIDs(c.url, 6379); !slices.Equal(got, c.want) {
			t.Errorf("localServerPIDs(%q) = %v, want %v", c.url, got, c.want)
		}
	}
}

func TestCPUOf(t *testing.T) {
	self := []int{os.Getpid()}
	before := cpuOf(self)
	// Spin until /proc shows the time (10 ms ticks); a loaded machine
	// gives the spinner less than all of a core, hence the long deadline.
	for deadline := time.Now().Add(time.Minute); cpuOf(self)-before < 50*time.Millisecond; {
		if time.Now().After(deadline) {
			t.Fatalf("cpuOf counted %v after a minute of spinning", cpuOf(self)-before)
		}
	}
	if cpuOf([]int{-1}) != 0 {
		t.Fatal("a process that does not exist counted CPU")
	}
}

// The CPU line adds up the processes and, when all of them ran here, says
// what the machine's cores can carry at that cost.
func TestCPUPerNodePrint(t *testing.T) {
	var b strings.Builder
	c := cpuPerNode{Worker: 300 * time.Microsecond, RabbitMQ: 600 * time.Microsecond, Redis: 100 * time.Microsecond, Bench: time.Millisecond}
	c.print(&b)
	want := fmt.Sprintf("worker 300µs, RabbitMQ 600µs, Redis 100µs, this bench 1ms (total 2ms)\n  so %d cores carry at most %d node executions/s", runtime.NumCPU(), 500*runtime.NumCPU())
	if !strings.Contains(b.String(), want) {
		t.Fatalf("printed:\n%s\nwant it to hold %q", b.String(), want)
	}
	b.Reset()
	cpuPerNode{Worker: 300 * time.Microsecond, Bench: time.Millisecond}.print(&b) // the servers are elsewhere
	if strings.Contains(b.String(), "carry") || !strings.Contains(b.String(), "(total 1.3ms)") {
		t.Fatalf("printed:\n%s\nwant the total of two processes and no ceiling", b.String())
	}
}

// A stand-in for RabbitMQ's Erlang VM: this test binary, re-run with
// fakeBeamEnv set, sleeps under whatever command line it was given.
const fakeBeamEnv = "RUNE_TEST_FAKE_BEAM"

func init() {
	if os.Getenv(fakeBeamEnv) != "" {
		time.Sleep(10 * time.Minute)
		os.Exit(0)
	}
}

// The bench tells RabbitMQ's Erlang VM by its beam.smp command line.
func TestBinaryHeapDefault(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	start := func(args ...string) int {
		cmd := &exec.Cmd{Path: os.Args[0], Args: args, Env: append(os.Environ(), fakeBeamEnv+"=1")}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		// /proc shows the command line once the child has exec'd.
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
			data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", cmd.Process.Pid))
			if strings.HasPrefix(string(data), args[0]+"\x00") {
				return cmd.Process.Pid
			}
			if time.Now().After(deadline) {
				t.Fatalf("the stand-in's command line is %q after a minute", data)
			}
		}
	}
	// erlexec hands emulator flags to beam.smp as -flag.
	beam := "/usr/lib/erlang/erts-13.0/bin/beam.smp"
	def := start(beam, "-W", "w", "-sbwt", "none", "--", "-root", "/usr/lib/erlang")
	tuned := start(beam, "-W", "w", "-hmbs", "1485504", "--", "-root", "/usr/lib/erlang")
	other := start("redis-server", "-hmbs")
	for _, c := range []struct {
		pids []int
		want bool
	}{
		{[]int{def}, true},
		{[]int{tuned}, false},
		{[]int{other}, false},     // not an Erlang VM
		{[]int{other, def}, true}, // a server's PIDs may include others
		{[]int{-1}, false},        // gone
	} {
		if got := binaryHeapDefault(c.pids); got != c.want {
			t.Errorf("binaryHeapDefault(%v) = %v, want %v", c.pids, got, c.want)
		}
	}
	var b strings.Builder
	cpuPerNode{RabbitMQ: time.Millisecond, RabbitMQDefaultBinaryHeap: true}.print(&b)
	if !strings.Contains(b.String(), "+hmbs") || !strings.Contains(b.String(), "docs/operations.md") {
		t.Fatalf("printed:\n%s\nwant the binary heap hint", b.String())
	}
}
