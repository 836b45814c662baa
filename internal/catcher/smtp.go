// Package catcher holds local stand-ins for the services notification nodes
// talk to: an SMTP server that keeps every mail it accepts, and an SMS
// provider (Twilio-compatible form API and a JSON webhook) that keeps every
// message. Tests use them, and so does examples/catcher for trying the
// welcome series on one machine. They listen on loopback only.
package catcher

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	netmail "net/mail"
	"sync"
	"sync/atomic"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// Mail is one message the SMTP server accepted.
type Mail struct {
	From string
	To   []string // envelope recipients: to, cc and bcc
	Data []byte
	// Header is Data's header, parsed.
	Header netmail.Header
	// User is the authenticated user ("" without AUTH); TLS says whether the
	// session was encrypted (STARTTLS or implicit TLS).
	User string
	TLS  bool
	// Received is when the server had the whole mail.
	Received time.Time
}

// SMTPConfig configures an SMTP server. The zero value is a plain server on
// a free loopback port that accepts everything.
type SMTPConfig struct {
	// Addr to listen on. Default "127.0.0.1:0".
	Addr string
	// TLS is "none" (default), "starttls" (advertised, then required before
	// MAIL) or "tls" (implicit TLS). The last two need TLSConfig.
	TLS       string
	TLSConfig *tls.Config
	// Users, when set, requires AUTH (PLAIN or LOGIN) with one of them
	// (user → password).
	Users map[string]string
	// Reply, when set, is asked at each stage ("MAIL", "RCPT", "DATA") with
	// the argument (sender, recipient, or "") and may refuse it with an
	// *smtp.SMTPError (a 4xx or 5xx reply).
	Reply func(stage, arg string) error
	// OnMail, when set, is called with each accepted mail after it is kept.
	OnMail func(Mail)
}

// RefuseData is an SMTPConfig.Reply that refuses the data of the first n
// mails (of every mail when n is 0) with code, once the server has read
// it, as a content filter or a full mailbox does.
func RefuseData(code int, n int32) func(stage, arg string) error {
	var refusals atomic.Int32
	return func(stage, _ string) error {
		if stage == "DATA" && (n == 0 || refusals.Add(1) <= n) {
			return &smtp.SMTPError{Code: code, Message: "refused by the catcher"}
		}
		return nil
	}
}

// RefuseMail is an SMTPConfig.Reply that refuses every sender with code,
// as a relay that is down for maintenance (554) or over its quota does: a
// failing primary of a failover list.
func RefuseMail(code int) func(stage, arg string) error {
	return func(stage, _ string) error {
		if stage == "MAIL" {
			return &smtp.SMTPError{Code: code, Message: "service unavailable (the catcher)"}
		}
		return nil
	}
}

// SMTP is a running SMTP server.
type SMTP struct {
	cfg SMTPConfig
	srv *smtp.Server
	ln  net.Listener

	mu      sync.Mutex
	mails   []Mail
	refused []Mail
}

// StartSMTP starts a server; Close stops it.
func StartSMTP(cfg SMTPConfig) (*SMTP, error) {
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	if cfg.TLS == "" {
		cfg.TLS = "none"
	}
	if cfg.TLS != "none" && cfg.TLSConfig == nil {
		return nil, fmt.Errorf("catcher: TLS %q needs a TLSConfig", cfg.TLS)
	}
	s := &SMTP{cfg: cfg}
	s.srv = smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) {
		_, encrypted := c.TLSConnectionState()
		return &session{s: s, tls: encrypted || cfg.TLS == "tls", conn: c}, nil
	}))
	s.srv.Domain = "localhost"
	s.srv.ErrorLog = log.New(io.Discard, "", 0) // refused TLS handshakes are expected in tests
	s.srv.AllowInsecureAuth = cfg.TLS == "none"
	s.srv.MaxMessageBytes = 10 << 20
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, err
	}
	switch cfg.TLS {
	case "starttls":
		s.srv.TLSConfig = cfg.TLSConfig
	case "tls":
		ln = tls.NewListener(ln, cfg.TLSConfig)
	}
	s.ln = ln
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// Addr is the address the server listens on.
func (s *SMTP) Addr() string { return s.ln.Addr().String() }

// Port is the port the server listens on.
func (s *SMTP) Port() int { return s.ln.Addr().(*net.TCPAddr).Port }

// Mails returns the mails accepted so far.
func (s *SMTP) Mails() []Mail {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Mail(nil), s.mails...)
}

// Inboxes returns, per envelope recipient, the mails their mailbox holds:
// the accepted mails, in order, with a mail whose Message-ID the mailbox
// already holds left out, as mailbox providers do with a message sent again
// (Gmail's duplicate suppression, Sieve's "duplicate" test of RFC 7352). A
// mail without a Message-ID is always kept. Rune derives an email's
// Message-ID from its idempotency key, so a mail sent again in the window
// docs/dsl.md documents ("Sending exactly once") is one mail here.
func (s *SMTP) Inboxes() map[string][]Mail {
	s.mu.Lock()
	defer s.mu.Unlock()
	type held struct{ rcpt, id string }
	seen := map[held]bool{}
	out := map[string][]Mail{}
	for _, m := range s.mails {
		id := m.Header.Get("Message-Id")
		for _, rcpt := range m.To {
			if id != "" {
				if seen[held{rcpt, id}] {
					continue
				}
				seen[held{rcpt, id}] = true
			}
			out[rcpt] = append(out[rcpt], m)
		}
	}
	return out
}

// Refused returns the mails whose whole data was read and then refused (by
// Reply at "DATA").
func (s *SMTP) Refused() []Mail {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Mail(nil), s.refused...)
}

// Close stops the server.
func (s *SMTP) Close() error { return s.srv.Close() }

type session struct {
	s    *SMTP
	conn *smtp.Conn
	tls  bool
	user string
	from string
	to   []string
}

func (ss *session) encrypted() bool {
	if _, ok := ss.conn.TLSConnectionState(); ok {
		return true
	}
	return ss.tls
}

func (ss *session) AuthMechanisms() []string {
	if ss.s.cfg.Users == nil {
		return nil
	}
	return []string{sasl.Plain, sasl.Login}
}

func (ss *session) Auth(mech string) (sasl.Server, error) {
	check := func(user, pass string) error {
		if want, ok := ss.s.cfg.Users[user]; !ok || want != pass {
			return &smtp.SMTPError{Code: 535, EnhancedCode: smtp.EnhancedCode{5, 7, 8}, Message: "authentication failed"}
		}
		ss.user = user
		return nil
	}
	switch mech {
	case sasl.Plain:
		return sasl.NewPlainServer(func(_, user, pass string) error { return check(user, pass) }), nil
	case sasl.Login:
		return &loginServer{check: check}, nil
	}
	return nil, smtp.ErrAuthUnknownMechanism
}

func (ss *session) reply(stage, arg string) error {
	if ss.s.cfg.Reply == nil {
		return nil
	}
	return ss.s.cfg.Reply(stage, arg)
}

func (ss *session) Mail(from string, _ *smtp.MailOptions) error {
	if ss.s.cfg.Users != nil && ss.user == "" {
		return smtp.ErrAuthRequired
	}
	if ss.s.cfg.TLS == "starttls" && !ss.encrypted() {
		return &smtp.SMTPError{Code: 530, EnhancedCode: smtp.EnhancedCode{5, 7, 0}, Message: "STARTTLS first"}
	}
	if err := ss.reply("MAIL", from); err != nil {
		return err
	}
	ss.from = from
	return nil
}

func (ss *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	if err := ss.reply("RCPT", to); err != nil {
		return err
	}
	ss.to = append(ss.to, to)
	return nil
}

func (ss *session) Data(r io.Reader) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	m := Mail{From: ss.from, To: ss.to, Data: data, User: ss.user, TLS: ss.encrypted(), Received: time.Now()}
	if msg, err := netmail.ReadMessage(bytes.NewReader(data)); err == nil {
		m.Header = msg.Header
	}
	if err := ss.reply("DATA", ""); err != nil {
		ss.s.mu.Lock()
		ss.s.refused = append(ss.s.refused, m)
		ss.s.mu.Unlock()
		return err
	}
	ss.s.mu.Lock()
	ss.s.mails = append(ss.s.mails, m)
	ss.s.mu.Unlock()
	if ss.s.cfg.OnMail != nil {
		ss.s.cfg.OnMail(m)
	}
	return nil
}

func (ss *session) Reset()        { ss.from, ss.to = "", nil }
func (ss *session) Logout() error { return nil }

// loginServer is the server side of AUTH LOGIN (go-sasl has the client only).
type loginServer struct {
	check func(user, pass string) error
	user  string
	step  int
}

func (l *loginServer) Next(resp []byte) ([]byte, bool, error) {
	switch l.step {
	case 0:
		l.step++
		if len(resp) > 0 { // initial response: the user name
			l.user = string(resp)
			l.step++
			return []byte("Password:"), false, nil
		}
		return []byte("Username:"), false, nil
	case 1:
		l.user = string(resp)
		l.step++
		return []byte("Password:"), false, nil
	case 2:
		l.step++
		return nil, true, l.check(l.user, string(resp))
	}
	return nil, true, errors.New("catcher: unexpected AUTH LOGIN step")
}
