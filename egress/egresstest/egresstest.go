// Package egresstest helps tests of the egress policy stay on loopback: a
// resolver that maps test names to addresses, and a dialer that records
// every address it is asked for and connects only to loopback ones.
package egresstest

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
	"testing"
)

// Resolver maps host names to addresses (egress.Resolver); other names are
// not found. Nothing is looked up.
type Resolver map[string][]string

// LookupNetIP implements egress.Resolver.
func (r Resolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, s := range r[host] {
		out = append(out, netip.MustParseAddr(s))
	}
	if out == nil {
		return nil, &net.DNSError{Err: "no such test host", Name: host, IsNotFound: true}
	}
	return out, nil
}

// Dialer records the addresses it is asked to dial; only loopback ones are
// dialled, any other fails the test (a test never sends a packet off the
// host, not even to show a refusal).
type Dialer struct {
	T     testing.TB
	mu    sync.Mutex
	addrs []string
}

// Dial is an egress.DialFunc.
func (d *Dialer) Dial(ctx context.Context, network, address string) (net.Conn, error) {
	d.mu.Lock()
	d.addrs = append(d.addrs, address)
	d.mu.Unlock()
	ap, err := netip.ParseAddrPort(address)
	if err != nil || !ap.Addr().Unmap().IsLoopback() {
		d.T.Errorf("dial %s: not a loopback address; not dialled", address)
		return nil, errors.New("egresstest: refusing to leave loopback")
	}
	var nd net.Dialer
	return nd.DialContext(ctx, network, address)
}

// Dialled returns the addresses dialled so far.
func (d *Dialer) Dialled() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.addrs...)
}
