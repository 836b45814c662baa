package main

import (
	"crypto/tls"
	"flag"
	"net/url"
	"time"

	"github.com/rune-org/rune/server"
)

// webFlags are rune server's HTTPS, console-session and stream settings
// (docs/operations.md, "TLS").
type webFlags struct {
	tlsCert, tlsKey, publicURL string
	sessionTTL                 time.Duration
	maxStreams                 int
}

func (w *webFlags) flags(fs *flag.FlagSet, env *cliEnv) {
	fs.StringVar(&w.tlsCert, "tls-cert", "", "serve HTTPS with this PEM certificate (chain) file; with --tls-key (default: plain HTTP)")
	fs.StringVar(&w.tlsKey, "tls-key", "", "the PEM private key file of --tls-cert")
	fs.StringVar(&w.publicURL, "public-url", env.getenv("RUNE_PUBLIC_URL"), "the URL users reach the server at (env RUNE_PUBLIC_URL), e.g. https://rune.example.com behind a proxy that terminates TLS: https marks the console's cookie Secure; the base of the one-click unsubscribe links of emails (docs/notifications.md; default none: no link)")
	fs.DurationVar(&w.sessionTTL, "session-ttl", server.SessionTTLDefault, "how long a console login lasts (it ends sooner at logout or with its token)")
	fs.IntVar(&w.maxStreams, "max-streams", server.MaxStreamsDefault, "event streams one token may have open on this server at once (429 beyond)")
}

// check validates the flags and loads the certificate: a nil config
// without --tls-cert. secure says whether the console's cookie is Secure:
// the server serves TLS, or its public URL is https.
func (w *webFlags) check() (cfg *tls.Config, secure bool, err error) {
	if (w.tlsCert == "") != (w.tlsKey == "") {
		return nil, false, usagef("--tls-cert and --tls-key go together: give both or neither")
	}
	if w.sessionTTL <= 0 {
		return nil, false, usagef("--session-ttl %v: want a positive duration such as 12h", w.sessionTTL)
	}
	if w.maxStreams <= 0 {
		return nil, false, usagef("--max-streams %d: want a positive number", w.maxStreams)
	}
	if w.publicURL != "" {
		u, err := url.Parse(w.publicURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, false, usagef("--public-url %q: want an absolute http:// or https:// URL such as https://rune.example.com", w.publicURL)
		}
		secure = u.Scheme == "https"
	}
	if w.tlsCert == "" {
		return nil, secure, nil
	}
	cert, err := tls.LoadX509KeyPair(w.tlsCert, w.tlsKey)
	if err != nil {
		return nil, false, usagef("--tls-cert %s / --tls-key %s: %v", w.tlsCert, w.tlsKey, err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, true, nil
}
