// Package egress decides which network addresses a workflow may make the
// process connect to: the http node, SMS providers and SMTP servers
// (docs/operations.md "Egress").
//
// The check is made on the resolved address at dial time, for every
// connection (so on every redirect hop that opens one), never on a name
// resolved earlier: a name that resolves to a public address when looked at
// and to 127.0.0.1 when connected to (DNS rebinding) is refused at the
// connection. A nil *Policy allows everything: library constructors default
// to it, and the process (cmd/rune) chooses the policy.
package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Settings of the processes that run other people's workflows.
const (
	EnvDeny  = "RUNE_EGRESS_DENY"
	EnvAllow = "RUNE_EGRESS_ALLOW"
	// DefaultDeny is the deny list of rune server and rune worker.
	DefaultDeny = "loopback,link-local"
)

// Rule names that are not classes of the deny list: a denying policy
// always refuses them, unless an allow entry opens them.
const (
	RuleUnspecified = "unspecified"
	RuleSelf        = "self"
)

// classes are the named address classes of the deny list. The cloud
// metadata addresses count as link-local whatever range they are in
// (fd00:ec2::254 is in the ULA range, Alibaba's 100.100.100.200 in CGNAT).
var classes = map[string][]netip.Prefix{
	"loopback": prefixes("127.0.0.0/8", "::1/128"),
	"link-local": prefixes("169.254.0.0/16", "fe80::/10",
		"fd00:ec2::254/128", "100.100.100.200/32"),
	"private": prefixes("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7"),
}

// unspecified addresses reach the host itself on Linux: 0.0.0.0 connects
// to a listener on any local address.
var unspecified = prefixes("0.0.0.0/8", "::/128")

// nat64 is the well-known NAT64 prefix: its last 32 bits are an IPv4
// address, which is checked as well.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

func prefixes(s ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(s))
	for i, p := range s {
		out[i] = netip.MustParsePrefix(p)
	}
	return out
}

// Resolver looks up a host name's addresses; *net.Resolver is one. network
// is "ip", "ip4" or "ip6".
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// DialFunc connects to address, an IP and a port, on network.
type DialFunc func(ctx context.Context, network, address string) (net.Conn, error)

// Config configures a Policy. Zero fields take their defaults.
type Config struct {
	// Deny is the comma-separated deny list: the classes loopback,
	// link-local and private, CIDRs, or "none". Empty: DefaultDeny.
	Deny string
	// Allow is the comma-separated allow list: CIDRs, IPs, host names
	// ("*.example.com" for any subdomain) or host:port. An address it
	// names passes whatever the deny list says. Empty: none.
	Allow string
	// Resolver resolves host names. Nil: net.DefaultResolver. Tests map
	// names of their own to addresses with it.
	Resolver Resolver
	// Dial connects to an address the policy allowed. Nil: a net.Dialer
	// as net/http's default transport has (30 s timeout and keep-alive).
	Dial DialFunc
}

// Policy is an egress policy. Its methods are safe for concurrent use; a
// nil *Policy allows every address.
type Policy struct {
	deny       []denyRule
	allowNets  []netip.Prefix
	allowNames []string // lower case; "*.x" for subdomains of x
	allowPorts []hostPort
	resolver   Resolver
	dial       DialFunc

	mu    sync.RWMutex
	self  []netip.AddrPort // the process's listeners
	local []netip.Addr     // the host's addresses, for a listener on 0.0.0.0 or ::

	proxies sync.Map // "host:port" of proxies the environment names → struct{}
}

type denyRule struct {
	name   string
	prefix netip.Prefix
}

type hostPort struct {
	host string // lower case name, or an IP's canonical text
	port uint16
}

// New returns the policy cfg describes. An invalid item is an error naming
// it; callers say which setting it came from.
func New(cfg Config) (*Policy, error) {
	p := &Policy{resolver: cfg.Resolver, dial: cfg.Dial}
	if p.resolver == nil {
		p.resolver = net.DefaultResolver
	}
	if p.dial == nil {
		d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
		p.dial = d.DialContext
	}
	for _, pre := range unspecified {
		p.deny = append(p.deny, denyRule{RuleUnspecified, pre})
	}
	deny := cfg.Deny
	if strings.TrimSpace(deny) == "" {
		deny = DefaultDeny
	}
	for _, item := range splitList(deny) {
		if item == "none" {
			continue
		}
		if c, ok := classes[item]; ok {
			for _, pre := range c {
				p.deny = append(p.deny, denyRule{item, pre})
			}
			continue
		}
		pre, err := netip.ParsePrefix(item)
		if err != nil {
			return nil, fmt.Errorf("item %q: want loopback, link-local, private, none or a CIDR such as 10.0.0.0/8", item)
		}
		p.deny = append(p.deny, denyRule{pre.Masked().String(), pre.Masked()})
	}
	for _, item := range splitList(cfg.Allow) {
		if err := p.addAllow(item); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func splitList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.ToLower(strings.TrimSpace(item)); item != "" {
			out = append(out, item)
		}
	}
	return out
}

func (p *Policy) addAllow(item string) error {
	bad := fmt.Errorf("item %q: want a CIDR (127.0.0.0/8), an IP, a host name (api.example.com, *.example.com) or host:port", item)
	if strings.Contains(item, "/") {
		pre, err := netip.ParsePrefix(item)
		if err != nil {
			return bad
		}
		p.allowNets = append(p.allowNets, pre.Masked())
		return nil
	}
	if a, err := netip.ParseAddr(item); err == nil {
		a = normalize(a)
		p.allowNets = append(p.allowNets, netip.PrefixFrom(a, a.BitLen()))
		return nil
	}
	if host, port, err := net.SplitHostPort(item); err == nil {
		n, err := strconv.ParseUint(port, 10, 16)
		if err != nil || n == 0 {
			return bad
		}
		if a, err := netip.ParseAddr(host); err == nil {
			host = normalize(a).String()
		} else if !validName(host) || strings.HasPrefix(host, "*.") {
			return bad
		}
		p.allowPorts = append(p.allowPorts, hostPort{host, uint16(n)})
		return nil
	}
	if !validName(item) {
		return bad
	}
	p.allowNames = append(p.allowNames, item)
	return nil
}

// validName accepts host names of letters, digits, '-' and '.', with an
// optional leading "*.".
func validName(s string) bool {
	s = strings.TrimPrefix(s, "*.")
	if s == "" || len(s) > 253 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '.') {
			return false
		}
	}
	return true
}

// normalize is a without an IPv6 zone, and IPv4-mapped addresses as IPv4.
func normalize(a netip.Addr) netip.Addr { return a.Unmap().WithZone("") }

// AddListener records a listener of this process (its API, metrics or
// profiler): connecting to it is refused unless an allow entry names its
// address and port (rule "self"). A listener on 0.0.0.0 or :: is every
// address of the host at its port.
func (p *Policy) AddListener(addr net.Addr) {
	if p == nil {
		return
	}
	ap, err := netip.ParseAddrPort(addr.String())
	if err != nil {
		return
	}
	ap = netip.AddrPortFrom(normalize(ap.Addr()), ap.Port())
	p.mu.Lock()
	defer p.mu.Unlock()
	p.self = append(p.self, ap)
	if ap.Addr().IsUnspecified() && p.local == nil {
		if addrs, err := net.InterfaceAddrs(); err == nil {
			for _, a := range addrs {
				if n, ok := a.(*net.IPNet); ok {
					if ip, ok := netip.AddrFromSlice(n.IP); ok {
						p.local = append(p.local, normalize(ip))
					}
				}
			}
		}
	}
}

// DeniedError is a connection the policy refused. Its text names the host,
// the address and the rule, never a URL (which may hold a token).
type DeniedError struct {
	Host string         // the host name or IP the workflow gave
	Addr netip.AddrPort // the address it resolved to
	Rule string         // loopback, link-local, private, unspecified, self, or the CIDR
}

func (e *DeniedError) Error() string {
	what := e.Addr.String()
	if e.Host != "" && e.Host != e.Addr.Addr().String() {
		what = fmt.Sprintf("%s (%s)", e.Host, e.Addr)
	}
	return fmt.Sprintf("egress to %s denied by rule %q (%s opens it)", what, e.Rule, EnvAllow)
}

// Check returns nil when the process may connect to addr on behalf of
// host (the name or IP the workflow gave), else a *DeniedError. A nil
// policy allows everything.
func (p *Policy) Check(host string, addr netip.AddrPort) error {
	if p == nil {
		return nil
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	a := normalize(addr.Addr())
	addr = netip.AddrPortFrom(a, addr.Port())
	if p.isSelf(addr) {
		if p.allowsPort(host, addr) {
			return nil
		}
		return &DeniedError{Host: host, Addr: addr, Rule: RuleSelf}
	}
	if p.allows(host, addr) {
		return nil
	}
	if rule := p.denied(a); rule != "" {
		return &DeniedError{Host: host, Addr: addr, Rule: rule}
	}
	if a.Is6() && nat64.Contains(a) {
		b := a.As16()
		v4 := netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
		if p.allows(host, netip.AddrPortFrom(v4, addr.Port())) {
			return nil
		}
		if rule := p.denied(v4); rule != "" {
			return &DeniedError{Host: host, Addr: addr, Rule: rule}
		}
	}
	return nil
}

func (p *Policy) denied(a netip.Addr) string {
	for _, r := range p.deny {
		if r.prefix.Contains(a) {
			return r.name
		}
	}
	return ""
}

func (p *Policy) allows(host string, addr netip.AddrPort) bool {
	for _, n := range p.allowNets {
		if n.Contains(addr.Addr()) {
			return true
		}
	}
	for _, name := range p.allowNames {
		if name == host {
			return true
		}
		if parent, ok := strings.CutPrefix(name, "*."); ok && strings.HasSuffix(host, "."+parent) {
			return true
		}
	}
	return p.allowsPort(host, addr)
}

// allowsPort is whether a host:port entry names host or addr's IP, and
// addr's port.
func (p *Policy) allowsPort(host string, addr netip.AddrPort) bool {
	for _, hp := range p.allowPorts {
		if hp.port == addr.Port() && (hp.host == host || hp.host == addr.Addr().String()) {
			return true
		}
	}
	return false
}

func (p *Policy) isSelf(addr netip.AddrPort) bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	for _, s := range p.self {
		if s.Port() != addr.Port() {
			continue
		}
		if s.Addr() == addr.Addr() {
			return true
		}
		if s.Addr().IsUnspecified() {
			a := addr.Addr()
			if a.IsLoopback() || a.IsUnspecified() {
				return true
			}
			for _, l := range p.local {
				if l == a {
					return true
				}
			}
		}
	}
	return false
}

// DialContext resolves address's host, checks every address it resolves
// to, and connects to the first allowed one that answers. When none is
// allowed it returns the first *DeniedError, before any connection is
// attempted. A nil policy dials as a net.Dialer does.
func (p *Policy) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	if p == nil {
		var d net.Dialer
		return d.DialContext(ctx, network, address)
	}
	if _, proxy := p.proxies.Load(address); proxy {
		// The operator's proxy (HTTP_PROXY etc.): its target was checked
		// by Guard's Proxy function.
		return p.dial(ctx, network, address)
	}
	host, portText, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("egress: invalid port in %q", address)
	}
	addrs, err := p.lookup(ctx, network, host)
	if err != nil {
		return nil, err
	}
	var denied, dialErr error
	for _, a := range addrs {
		ap := netip.AddrPortFrom(normalize(a), uint16(port))
		if err := p.Check(host, ap); err != nil {
			if denied == nil {
				denied = err
			}
			continue
		}
		conn, err := p.dial(ctx, network, ap.String())
		if err == nil {
			return conn, nil
		}
		dialErr = err
		if ctx.Err() != nil {
			break
		}
	}
	if dialErr != nil {
		return nil, dialErr
	}
	return nil, denied
}

func (p *Policy) lookup(ctx context.Context, network, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a}, nil
	}
	ipNet := "ip"
	switch network {
	case "tcp4", "udp4":
		ipNet = "ip4"
	case "tcp6", "udp6":
		ipNet = "ip6"
	}
	addrs, err := p.resolver.LookupNetIP(ctx, ipNet, host)
	if err != nil {
		return nil, err
	}
	if len(addrs) == 0 {
		return nil, &net.DNSError{Err: "no addresses", Name: host, IsNotFound: true}
	}
	return addrs, nil
}

// checkURL checks u's host and port before a request is sent through a
// proxy (which connects in our place), or when a redirect names an IP: a
// name is resolved here, since the proxy's own lookup is out of reach.
func (p *Policy) checkURL(ctx context.Context, u *url.URL, resolve bool) error {
	host := u.Hostname()
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return nil // the transport refuses it
	}
	a, err := netip.ParseAddr(host)
	var addrs []netip.Addr
	switch {
	case err == nil:
		addrs = []netip.Addr{a}
	case resolve:
		if addrs, err = p.lookup(ctx, "tcp", host); err != nil {
			return err
		}
	default:
		return nil // checked when dialled
	}
	for _, a := range addrs {
		if err := p.Check(host, netip.AddrPortFrom(a, uint16(n))); err != nil {
			return err
		}
	}
	return nil
}

// maxRedirects is how many redirects a guarded client follows, as net/http
// does by default.
const maxRedirects = 10

// CheckRedirect is an http.Client CheckRedirect that stops after 10
// redirects, as net/http's default, and refuses a redirect to a denied IP
// before the request is made (a name is checked when its connection is
// dialled).
func (p *Policy) CheckRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= maxRedirects {
		return errors.New("stopped after 10 redirects")
	}
	if p == nil {
		return nil
	}
	return p.checkURL(req.Context(), req.URL, false)
}

// Guard makes t connect through the policy: its DialContext checks every
// address, and a request sent through a proxy of t's Proxy function has its
// target resolved and checked first (the proxy itself, the operator's
// choice, may be on any address). A nil policy leaves t as it is.
func (p *Policy) Guard(t *http.Transport) {
	if p == nil {
		return
	}
	t.DialContext = p.DialContext
	t.DialTLSContext = nil // TLS over DialContext's connection
	proxy := t.Proxy
	if proxy == nil {
		return
	}
	t.Proxy = func(req *http.Request) (*url.URL, error) {
		u, err := proxy(req)
		if err != nil || u == nil {
			return u, err
		}
		if err := p.checkURL(req.Context(), req.URL, true); err != nil {
			return nil, err
		}
		port := u.Port()
		if port == "" {
			port = map[string]string{"https": "443", "socks5": "1080", "socks5h": "1080"}[u.Scheme]
			if port == "" {
				port = "80"
			}
		}
		p.proxies.Store(net.JoinHostPort(u.Hostname(), port), struct{}{})
		return u, nil
	}
}
