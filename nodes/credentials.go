package nodes

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/rune-org/rune/egress"
	"github.com/rune-org/rune/node"
)

// AllowedHostsField is the credential field that lists the hosts a
// credential may be sent to: comma-separated host names, "*.example.com"
// for any subdomain of example.com. Empty or absent means any host.
const AllowedHostsField = "allowed_hosts"

// maxRedirects is how many redirects a request follows, as net/http does.
const maxRedirects = 10

// allowedHost refuses to send credential ref to u's host when the credential
// lists hosts and u's is not one of them.
func allowedHost(ref, list string, u *url.URL) error {
	if strings.TrimSpace(list) == "" {
		return nil
	}
	host := strings.ToLower(u.Hostname())
	for _, h := range strings.Split(list, ",") {
		h = strings.ToLower(strings.TrimSpace(h))
		if h == host {
			return nil
		}
		if parent, ok := strings.CutPrefix(h, "*."); ok && strings.HasSuffix(host, "."+parent) {
			return nil
		}
	}
	return &node.Error{Code: CodeCredentials, Message: fmt.Sprintf("credential %q may not be sent to host %q (its %s do not list it)", ref, host, AllowedHostsField)}
}

// alwaysCredential are headers that carry credentials whoever set them.
var alwaysCredential = []string{"Authorization", "Proxy-Authorization", "Cookie"}

// redirectClient is client whose redirects drop Referer when they change
// origin (net/http sends the previous URL, query included, to the next
// host) and are checked by the egress policy p, then by client's own
// CheckRedirect.
func redirectClient(client *http.Client, p *egress.Policy) *http.Client {
	c := *client
	next := client.CheckRedirect
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if !sameOrigin(via[len(via)-1].URL, req.URL) {
			req.Header.Del("Referer")
		}
		if err := p.CheckRedirect(req, via); err != nil {
			return err
		}
		if next != nil {
			return next(req, via)
		}
		return nil
	}
	return &c
}

// credentialClient is client following redirects without the credential
// headers when a redirect leaves the first request's origin (another host
// or port) or goes from https to plain http. net/http drops only
// Authorization and Cookie, and keeps them for subdomains; an API key in
// another header went to whatever host a redirect named (issue 12).
func credentialClient(client *http.Client, headers []string) *http.Client {
	c := *client
	next := client.CheckRedirect
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if len(via) >= maxRedirects {
			return errors.New("stopped after 10 redirects")
		}
		first := via[0].URL
		if !sameOrigin(first, req.URL) || (first.Scheme == "https" && req.URL.Scheme != "https") {
			for _, h := range headers {
				req.Header.Del(h)
			}
		}
		if next != nil {
			return next(req, via)
		}
		return nil
	}
	return &c
}

func sameOrigin(a, b *url.URL) bool {
	return strings.EqualFold(a.Hostname(), b.Hostname()) && port(a) == port(b)
}

func port(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if u.Scheme == "https" {
		return "443"
	}
	return "80"
}
