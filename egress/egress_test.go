package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/rune-org/rune/egress/egresstest"
)

func mustNew(t *testing.T, cfg Config) *Policy {
	t.Helper()
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCheckAddresses(t *testing.T) {
	def := mustNew(t, Config{})
	private := mustNew(t, Config{Deny: "loopback,link-local,private,203.0.113.0/24"})
	for _, tc := range []struct {
		p    *Policy
		addr string
		rule string // "" allowed
	}{
		{def, "127.0.0.1:80", "loopback"},
		{def, "127.255.0.9:80", "loopback"},
		{def, "[::1]:80", "loopback"},
		{def, "[::ffff:127.0.0.1]:80", "loopback"}, // IPv4-mapped
		{def, "[64:ff9b::7f00:1]:80", "loopback"},  // NAT64 of 127.0.0.1
		{def, "169.254.169.254:80", "link-local"},
		{def, "169.254.170.2:80", "link-local"}, // ECS task metadata
		{def, "[fe80::1%eth0]:80", "link-local"},
		{def, "[fd00:ec2::254]:80", "link-local"}, // AWS metadata over IPv6
		{def, "100.100.100.200:80", "link-local"}, // Alibaba metadata
		{def, "0.0.0.0:80", "unspecified"},
		{def, "[::]:80", "unspecified"},
		{def, "10.1.2.3:80", ""},
		{def, "192.168.1.1:80", ""},
		{def, "[fd12::1]:80", ""},
		{def, "93.184.216.34:443", ""},
		{private, "10.1.2.3:80", "private"},
		{private, "172.31.255.255:80", "private"},
		{private, "172.32.0.1:80", ""},
		{private, "192.168.1.1:80", "private"},
		{private, "[fd12::1]:80", "private"},
		{private, "203.0.113.7:80", "203.0.113.0/24"},
		{private, "93.184.216.34:443", ""},
		{nil, "127.0.0.1:80", ""},
		{nil, "169.254.169.254:80", ""},
	} {
		ap := netip.MustParseAddrPort(tc.addr)
		err := tc.p.Check("", ap)
		var de *DeniedError
		switch {
		case tc.rule == "" && err != nil:
			t.Errorf("%s: %v, want allowed", tc.addr, err)
		case tc.rule != "" && !errors.As(err, &de):
			t.Errorf("%s: %v, want denied by %s", tc.addr, err, tc.rule)
		case tc.rule != "" && de.Rule != tc.rule:
			t.Errorf("%s: rule %q, want %q", tc.addr, de.Rule, tc.rule)
		}
	}
}

func TestAllowList(t *testing.T) {
	p := mustNew(t, Config{Deny: "loopback,link-local,private",
		Allow: "127.0.0.0/8, 10.9.0.5, *.corp.test, db.internal:5432, [::1]:8443"})
	for _, tc := range []struct {
		host, addr string
		ok         bool
	}{
		{"", "127.0.0.1:80", true},
		{"", "10.9.0.5:80", true},
		{"", "10.9.0.6:80", false},
		{"api.corp.test", "10.1.1.1:443", true},
		{"corp.test", "10.1.1.1:443", false}, // *. is subdomains only
		{"db.internal", "10.2.2.2:5432", true},
		{"db.internal", "10.2.2.2:5433", false},
		{"", "[::1]:8443", true},
		{"", "[::1]:8444", false},
		{"", "169.254.169.254:80", false},
	} {
		err := p.Check(tc.host, netip.MustParseAddrPort(tc.addr))
		if (err == nil) != tc.ok {
			t.Errorf("%s %s: %v, want allowed=%v", tc.host, tc.addr, err, tc.ok)
		}
	}
	none := mustNew(t, Config{Deny: "none"})
	if err := none.Check("", netip.MustParseAddrPort("127.0.0.1:80")); err != nil {
		t.Errorf("deny none: %v", err)
	}
	if err := none.Check("", netip.MustParseAddrPort("0.0.0.0:80")); err == nil {
		t.Error("deny none: 0.0.0.0 allowed, want unspecified refused still")
	}
}

func TestSelf(t *testing.T) {
	p := mustNew(t, Config{Allow: "127.0.0.0/8"})
	p.AddListener(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080})
	p.AddListener(&net.TCPAddr{IP: net.IPv6unspecified, Port: 9090})
	var de *DeniedError
	if err := p.Check("localhost", netip.MustParseAddrPort("127.0.0.1:8080")); !errors.As(err, &de) || de.Rule != RuleSelf {
		t.Errorf("own listener: %v, want rule self even with 127.0.0.0/8 allowed", err)
	}
	if err := p.Check("", netip.MustParseAddrPort("127.0.0.2:9090")); !errors.As(err, &de) || de.Rule != RuleSelf {
		t.Errorf("listener on [::]:9090 reached at 127.0.0.2: %v, want rule self", err)
	}
	if err := p.Check("", netip.MustParseAddrPort("127.0.0.1:8081")); err != nil {
		t.Errorf("another loopback port: %v, want allowed", err)
	}
	open := mustNew(t, Config{Allow: "127.0.0.1:8080"})
	open.AddListener(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080})
	if err := open.Check("", netip.MustParseAddrPort("127.0.0.1:8080")); err != nil {
		t.Errorf("own listener named with its port: %v, want allowed", err)
	}
}

func TestInvalidItems(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		item string
	}{
		{Config{Deny: "loopback,loopbak"}, "loopbak"},
		{Config{Deny: "10.0.0.0/33"}, "10.0.0.0/33"},
		{Config{Allow: "10.0.0.0/33"}, "10.0.0.0/33"},
		{Config{Allow: "a host"}, "a host"},
		{Config{Allow: "db.internal:0"}, "db.internal:0"},
		{Config{Allow: "db.internal:http"}, "db.internal:http"},
		{Config{Allow: "*.corp.test:80"}, "*.corp.test:80"},
	} {
		_, err := New(tc.cfg)
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%q", tc.item)) {
			t.Errorf("%+v: %v, want an error naming %q", tc.cfg, err, tc.item)
		}
	}
}

// A name resolving to a denied address is refused before any connection:
// the check is on the resolved address, not on the name.
func TestDialRefusesBeforeConnecting(t *testing.T) {
	d := &egresstest.Dialer{T: t}
	p := mustNew(t, Config{Resolver: egresstest.Resolver{
		"metadata.test": {"169.254.169.254"},
		"rebind.test":   {"127.0.0.1"},
		"mixed.test":    {"169.254.169.254", "::1"},
	}, Dial: d.Dial})
	for _, tc := range []struct{ address, rule, addr string }{
		{"metadata.test:80", "link-local", "169.254.169.254:80"},
		{"rebind.test:8080", "loopback", "127.0.0.1:8080"},
		{"[fd00:ec2::254]:80", "link-local", "[fd00:ec2::254]:80"},
	} {
		_, err := p.DialContext(context.Background(), "tcp", tc.address)
		var de *DeniedError
		if !errors.As(err, &de) || de.Rule != tc.rule || de.Addr.String() != tc.addr {
			t.Fatalf("dial %s: %v, want denied by %s at %s", tc.address, err, tc.rule, tc.addr)
		}
		host, _, _ := net.SplitHostPort(tc.address)
		if !strings.Contains(err.Error(), host) || !strings.Contains(err.Error(), tc.rule) {
			t.Errorf("error %q does not name the host and the rule", err)
		}
	}
	if got := d.Dialled(); len(got) != 0 {
		t.Fatalf("dialled %v, want nothing", got)
	}
	// A name with a denied and an allowed address: only the allowed one is
	// dialled (nothing listens there: the error is the connection's).
	open := mustNew(t, Config{Deny: "link-local", Resolver: p.resolver, Dial: d.Dial})
	_, err := open.DialContext(context.Background(), "tcp", "mixed.test:1")
	var de *DeniedError
	if errors.As(err, &de) {
		t.Fatalf("mixed.test: %v, want the connection's error", err)
	}
	if got := d.Dialled(); len(got) != 1 || got[0] != "[::1]:1" {
		t.Fatalf("dialled %v, want only [::1]:1", got)
	}
}

// A guarded transport refuses a loopback server, and follows redirects only
// to allowed addresses: a redirect to a denied one fails before its
// connection.
func TestGuardedTransport(t *testing.T) {
	var hits int
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits++
		mu.Unlock()
		switch r.URL.Path {
		case "/to-metadata":
			http.Redirect(w, r, "http://metadata.test/latest/meta-data/", http.StatusFound)
		case "/to-ip":
			http.Redirect(w, r, "http://169.254.169.254/latest/", http.StatusFound)
		default:
			io.WriteString(w, "ok")
		}
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	client := func(p *Policy) *http.Client {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		p.Guard(tr)
		t.Cleanup(tr.CloseIdleConnections)
		return &http.Client{Transport: tr, CheckRedirect: p.CheckRedirect}
	}
	d := &egresstest.Dialer{T: t}
	res := egresstest.Resolver{"metadata.test": {"169.254.169.254"}}

	denied := client(mustNew(t, Config{Resolver: res, Dial: d.Dial}))
	_, err := denied.Get(srv.URL)
	var de *DeniedError
	if !errors.As(err, &de) || de.Rule != "loopback" {
		t.Fatalf("GET %s: %v, want denied by loopback", srv.URL, err)
	}
	if hits != 0 || len(d.Dialled()) != 0 {
		t.Fatalf("server hit %d times, dialled %v: want nothing sent", hits, d.Dialled())
	}

	allowed := client(mustNew(t, Config{Allow: u.Host, Resolver: res, Dial: d.Dial}))
	resp, err := allowed.Get(srv.URL)
	if err != nil {
		t.Fatalf("GET with %s allowed: %v", u.Host, err)
	}
	resp.Body.Close()
	for _, path := range []string{"/to-metadata", "/to-ip"} {
		_, err = allowed.Get(srv.URL + path)
		if !errors.As(err, &de) || de.Rule != "link-local" {
			t.Fatalf("GET %s: %v, want the redirect denied by link-local", path, err)
		}
	}
	for _, a := range d.Dialled() {
		if a != u.Host {
			t.Fatalf("dialled %s: want only the test server %s", a, u.Host)
		}
	}
}

// BenchmarkCheck is the policy's cost per connection: one Check of an
// allowed public address against the default deny list, an allow list
// and a listener.
func BenchmarkCheck(b *testing.B) {
	p, err := New(Config{Deny: "loopback,link-local,private", Allow: "127.0.0.0/8,*.corp.test,db.internal:5432"})
	if err != nil {
		b.Fatal(err)
	}
	p.AddListener(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080})
	addr := netip.MustParseAddrPort("93.184.216.34:443")
	for b.Loop() {
		if p.Check("example.com", addr) != nil {
			b.Fatal("denied")
		}
	}
}
