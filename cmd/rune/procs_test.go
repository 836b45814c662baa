package main

import (
	"fmt"
	"net"
	"os"
	"slices"
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
