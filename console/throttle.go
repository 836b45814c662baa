package console

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// throttle counts failed logins per client address over a sliding window:
// after max failures within window, an address waits until the oldest of
// them leaves the window. A success counts nothing. It is this process's
// count: each replica of the server throttles on its own.
type throttle struct {
	max    int
	window time.Duration
	mu     sync.Mutex
	// fails are each address's failure times within the window, oldest first.
	fails map[string][]time.Time
}

// maxAddrs bounds how many addresses the throttle remembers; past it,
// addresses with no failure left in the window are forgotten.
const maxAddrs = 10_000

// wait returns how long addr must wait before its next login attempt (0:
// it may try now).
func (t *throttle) wait(addr string, now time.Time) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	fs := t.recent(addr, now)
	if len(fs) < t.max {
		return 0
	}
	return fs[len(fs)-t.max].Add(t.window).Sub(now)
}

// fail records a failed login of addr at now.
func (t *throttle) fail(addr string, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.fails == nil {
		t.fails = map[string][]time.Time{}
	}
	if len(t.fails) >= maxAddrs {
		for a := range t.fails {
			if len(t.recent(a, now)) == 0 {
				delete(t.fails, a)
			}
		}
	}
	fs := append(t.recent(addr, now), now)
	if len(fs) > t.max {
		fs = fs[len(fs)-t.max:]
	}
	t.fails[addr] = fs
}

// recent drops addr's failures older than the window and returns the rest.
func (t *throttle) recent(addr string, now time.Time) []time.Time {
	fs := t.fails[addr]
	i := 0
	for i < len(fs) && !fs[i].Add(t.window).After(now) {
		i++
	}
	fs = fs[i:]
	if len(fs) == 0 {
		delete(t.fails, addr)
	} else {
		t.fails[addr] = fs
	}
	return fs
}

// clientAddr is the address a login comes from: the connection's peer
// (a forwarding proxy's X-Forwarded-For is not trusted: anyone can send it).
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
