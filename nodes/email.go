package nodes

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	netmail "net/mail"
	"net/textproto"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/wneessen/go-mail"
	"github.com/wneessen/go-mail/smtp"

	"github.com/rune-org/rune/expr"
	"github.com/rune-org/rune/node"
	"github.com/rune-org/rune/templates"
	"github.com/rune-org/rune/workflow"
)

// emailType sends mail over SMTP (dsl.md "email").
type emailType struct{ opts *Options }

var emailParams = []string{"from", "to", "cc", "bcc", "reply_to", "subject", "text", "html", "body", "headers", "subscriber", "category", "critical", "template"}

// htmlTag finds an HTML tag in an email body: a body (seed 003's name for
// the content) holding one is sent as HTML, any other as plain text.
var htmlTag = regexp.MustCompile(`(?i)<(!doctype\s+html[^<>]*|/?(html|head|body|p|div|span|br|hr|a|b|i|u|em|strong|small|table|thead|tbody|tr|td|th|ul|ol|li|h[1-6]|img|blockquote|pre|code|font|center|style)(\s[^<>]*)?/?)>`)

// bodyIsHTML reports whether a rendered body is sent as HTML.
func bodyIsHTML(body string) bool { return htmlTag.MatchString(body) }

func (*emailType) Check(c *workflow.NodeCheck) {
	p := node.CheckParams(c, emailParams...)
	checkAudience(p)
	hasTemplate := checkTemplate(c)
	// With a subscriber, "to" defaults to the subscriber's email.
	_, hasSubscriber := c.Node.Parameters["subscriber"]
	checkStringOrList(p, "to", !hasSubscriber)
	checkStringOrList(p, "cc", false)
	checkStringOrList(p, "bcc", false)
	checkStringOrList(p, "reply_to", false)
	for _, name := range []string{"from", "subject", "text", "html", "body"} {
		if s, ok := p.String(name, name == "subject" && !hasTemplate); ok {
			checkLiquid(p, "parameters."+name, s)
		}
	}
	_, hasText := c.Node.Parameters["text"]
	_, hasHTML := c.Node.Parameters["html"]
	_, hasBody := c.Node.Parameters["body"]
	switch {
	case hasBody && (hasText || hasHTML):
		c.Report("parameters.body", "set either body or text/html, not both: body is sent as HTML when it holds an HTML tag, else as text")
	case !hasText && !hasHTML && !hasBody && !hasTemplate:
		c.Report("parameters", "an email needs a body: set body, or text, html or both")
	}
	if h, present := c.Node.Parameters["headers"]; present {
		m, ok := h.(map[string]any)
		if !ok {
			c.Report("parameters.headers", "must be an object of header name to text, not %s", expr.TypeName(h))
		}
		for name, v := range m {
			field := "parameters.headers" + fieldPath(name)
			s, ok := v.(string)
			switch {
			case !validHeaderName(name):
				c.Report(field, "%q is not a valid header name", name)
			case reservedMailHeader(name):
				c.Report(field, "%s is set by the email node itself", name)
			case !ok:
				c.Report(field, "must be a string, not %s", expr.TypeName(v))
			default:
				checkLiquid(p, field, s)
			}
		}
	}
	if credRef(c.Node) == "" {
		c.Report("credentials.ref", "required: the SMTP server's credential")
	}
}

// reservedMailHeader: headers the node derives from its own parameters.
func reservedMailHeader(name string) bool {
	switch textproto.CanonicalMIMEHeaderKey(name) {
	case "From", "To", "Cc", "Bcc", "Reply-To", "Subject", "Message-Id", "Content-Type", "Mime-Version", "Content-Transfer-Encoding", "Date":
		return true
	}
	return false
}

func (t *emailType) Compile(n *workflow.Node, c *expr.Compiler) (node.Runner, error) {
	r := &emailRunner{opts: t.opts, refs: credRefs(n), varsRunner: varsRunner{name: "email_" + n.ID}, template: templateName(n)}
	var err error
	if r.aud, err = compileAudience(n, c); err != nil {
		return nil, err
	}
	for name, dst := range map[string]**liquidField{"from": &r.from, "subject": &r.subject, "text": &r.text, "html": &r.html, "body": &r.body} {
		if *dst, err = liquidParam(n, c, name); err != nil {
			return nil, err
		}
	}
	for name, dst := range map[string]*[]*liquidField{"to": &r.to, "cc": &r.cc, "bcc": &r.bcc, "reply_to": &r.replyTo} {
		if *dst, err = liquidList(n, c, name); err != nil {
			return nil, err
		}
	}
	headers, _ := n.Parameters["headers"].(map[string]any)
	for name, v := range headers {
		s, _ := v.(string)
		lv, err := c.Liquid(s)
		if err != nil {
			return nil, node.CompileError(n, "headers"+fieldPath(name), err)
		}
		r.headers = append(r.headers, emailHeader{name: name, v: &liquidField{name: "headers" + fieldPath(name), v: lv}})
	}
	return r, nil
}

type emailHeader struct {
	name string
	v    *liquidField
}

type emailRunner struct {
	varsRunner
	opts                      *Options
	refs                      []string // the credential, then its failover ones
	from, subject, text, html *liquidField
	body                      *liquidField // text or html, as its content says (bodyIsHTML)
	to, cc, bcc, replyTo      []*liquidField
	headers                   []emailHeader
	aud                       audience
	template                  string // a template's name (issue 36), "" for none
}

// smtpConfig is an SMTP credential (dsl.md "Credentials").
type smtpConfig struct {
	host, tlsMode, username, password, from, auth string
	port                                          int
	// unsubscribeMailto is the address of the mailto: List-Unsubscribe
	// (field "unsubscribe_mailto").
	unsubscribeMailto string
}

func parseSMTP(ref string, f map[string]string) (smtpConfig, error) {
	bad := func(format string, args ...any) error {
		return &node.Error{Code: CodeCredentials, Message: fmt.Sprintf("credential %q: ", ref) + fmt.Sprintf(format, args...)}
	}
	c := smtpConfig{host: f["host"], tlsMode: f["tls"], username: f["username"], password: f["password"], from: f["from"], auth: strings.ToLower(f["auth"]),
		unsubscribeMailto: f["unsubscribe_mailto"]}
	if c.unsubscribeMailto != "" {
		if a, err := netmail.ParseAddress(c.unsubscribeMailto); err != nil || a.Address != c.unsubscribeMailto {
			return c, bad("field \"unsubscribe_mailto\" is not an email address")
		}
	}
	if c.host == "" {
		return c, bad("field \"host\" is required")
	}
	if c.tlsMode == "" {
		c.tlsMode = "starttls"
	}
	defPort := map[string]int{"none": 25, "starttls": 587, "tls": 465}
	def, ok := defPort[c.tlsMode]
	if !ok {
		return c, bad("field \"tls\" is %q, want none, starttls or tls", c.tlsMode)
	}
	c.port = def
	if p := f["port"]; p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return c, bad("field \"port\" is %q, want a port number", p)
		}
		c.port = n
	}
	switch c.auth {
	case "", "plain", "login":
	default:
		return c, bad("field \"auth\" is %q, want plain or login", c.auth)
	}
	return c, nil
}

// addresses renders fields and parses every address in them; a list
// element or a string may hold several, comma-separated.
func addresses(env map[string]any, fields []*liquidField) ([]*netmail.Address, error) {
	var out []*netmail.Address
	for _, f := range fields {
		s, err := f.render(env)
		if err != nil {
			return nil, err
		}
		if strings.TrimSpace(s) == "" {
			continue
		}
		list, err := netmail.ParseAddressList(s)
		if err != nil {
			// Name the offending part rather than the whole list.
			for _, part := range strings.Split(s, ",") {
				if _, perr := netmail.ParseAddress(part); perr != nil && strings.TrimSpace(part) != "" {
					s = strings.TrimSpace(part)
					break
				}
			}
			return nil, invalidAddress(f.name, s)
		}
		out = append(out, list...)
	}
	return out, nil
}

func invalidAddress(field, addr string) error {
	return &node.Error{
		Code:    CodeInvalidAddress,
		Message: fmt.Sprintf("parameters.%s: %q is not a valid email address", field, addr),
		Details: map[string]any{"parameter": "parameters." + field, "address": addr},
	}
}

func (r *emailRunner) Run(ctx context.Context, in *node.Input) (node.Result, error) {
	rc, err := r.aud.resolve(ctx, r.opts, in, "email")
	if err != nil {
		return node.Result{}, err
	}
	if rc.optedOut {
		// Through the send's record: a redelivery of a run that did send
		// reports that send, not a later opt-out.
		out, err := sendOnce(ctx, r.opts, in, func(*sendRecord) (map[string]any, error) { return optedOutOutput(), nil })
		if err != nil {
			return node.Result{}, err
		}
		return node.Result{Output: out}, nil
	}
	m, err := r.message(ctx, in, rc)
	if err != nil {
		return node.Result{}, err
	}
	if len(r.refs) == 0 {
		return node.Result{}, &node.Error{Code: CodeCredentials, Message: "credentials.ref: required"}
	}
	out, err := sendOnceGated(ctx, r.opts, in, func() error { return r.aud.quietGate(rc, in) }, func(rec *sendRecord) (map[string]any, error) {
		// A try that handed the data over is never followed by another:
		// the server that took the "." goes on with the mail.
		var handed bool
		return failover(ctx, 0, r.refs, func() bool { return handed }, func(ctx context.Context, ref string, failed []any) (map[string]any, error) {
			fields, err := credentialFields(ctx, in, ref, "smtp")
			if err != nil {
				return nil, err
			}
			cfg, err := parseSMTP(ref, fields)
			if err != nil {
				return nil, err
			}
			m := *m
			if m.from == nil {
				if cfg.from == "" {
					return nil, node.InvalidParam("from", "required: neither the node nor credential %q sets a sender", ref)
				}
				a, err := netmail.ParseAddress(cfg.from)
				if err != nil {
					return nil, &node.Error{Code: CodeCredentials, Message: fmt.Sprintf("credential %q: field \"from\" is not a valid email address", ref)}
				}
				m.from = a
			}
			out, err := r.send(ctx, in, sender{ref, failed, &handed}, cfg, &m, rec)
			return rc.marked(out), err
		})
	})
	if err != nil {
		return node.Result{}, err
	}
	templateOutput(out, m.tpl)
	return node.Result{Output: out}, nil
}

// rendered is one email, rendered and parsed.
type rendered struct {
	from                 *netmail.Address
	to, cc, bcc, replyTo []*netmail.Address
	subject, text, html  string
	headers              [][2]string
	// unsubscribeURL is the one-click unsubscribe URL of the subscriber
	// and category, when the node names both and the server has a public
	// URL.
	unsubscribeURL string
	// category, for the mailto: unsubscribe's subject.
	category string
	tpl      *templates.Rendered // the template rendered, if any
}

func (r *emailRunner) message(ctx context.Context, in *node.Input, rc recipient) (*rendered, error) {
	m := &rendered{}
	var err error
	env := rc.env
	if m.to, err = addresses(env, r.to); err != nil {
		return nil, err
	}
	if len(r.to) == 0 && rc.sub != nil {
		if rc.sub.Email == "" {
			return nil, &node.Error{Code: CodeInvalidAddress, Message: fmt.Sprintf("parameters.to: subscriber %q has no email, and the node sets no to", rc.sub.ID),
				Details: map[string]any{"parameter": "parameters.to", "subscriber": rc.sub.ID}}
		}
		a, err := netmail.ParseAddress(rc.sub.Email)
		if err != nil {
			return nil, invalidAddress("to", rc.sub.Email)
		}
		m.to = []*netmail.Address{a}
	}
	if len(m.to) == 0 {
		return nil, node.InvalidParam("to", "rendered to no address")
	}
	if rc.sub != nil && r.aud.category != "" {
		m.category = r.aud.category
		if r.opts.Subscribers != nil {
			m.unsubscribeURL = r.opts.Subscribers.UnsubscribeURL(rc.sub.ID, r.aud.category)
		}
	}
	for _, l := range []struct {
		dst *[]*netmail.Address
		src []*liquidField
	}{{&m.cc, r.cc}, {&m.bcc, r.bcc}, {&m.replyTo, r.replyTo}} {
		if *l.dst, err = addresses(env, l.src); err != nil {
			return nil, err
		}
	}
	if r.from != nil {
		from, err := addresses(env, []*liquidField{r.from})
		if err != nil {
			return nil, err
		}
		switch len(from) {
		case 0:
		case 1:
			m.from = from[0]
		default:
			return nil, node.InvalidParam("from", "want one sender, got %d addresses", len(from))
		}
	}
	for _, f := range []struct {
		dst *string
		src *liquidField
	}{{&m.subject, r.subject}, {&m.text, r.text}, {&m.html, r.html}} {
		if *f.dst, err = f.src.render(env); err != nil {
			return nil, err
		}
	}
	if r.body != nil {
		body, err := r.body.render(env)
		if err != nil {
			return nil, err
		}
		if bodyIsHTML(body) {
			m.html = body
		} else {
			m.text = body
		}
	}
	if r.template != "" {
		if err := r.fromTemplate(ctx, in, env, m); err != nil {
			return nil, err
		}
	}
	if strings.ContainsAny(m.subject, "\r\n") {
		m.subject = strings.Join(strings.Fields(m.subject), " ") // a header is one line
	}
	for _, h := range r.headers {
		v, err := h.v.render(env)
		if err != nil {
			return nil, err
		}
		if strings.ContainsAny(v, "\r\n") {
			return nil, node.InvalidParam(h.v.name, "a header value must be one line")
		}
		m.headers = append(m.headers, [2]string{h.name, v})
	}
	return m, nil
}

// send delivers m. The send is recorded (rec.handedOver) as soon as the
// final "." of the data is written, before the server's reply is read: a
// worker killed while it waits for that reply leaves a record, and the
// server, which has the whole message, goes on to accept it; the
// redelivery does not send it again. A reply refusing the mail withdraws
// the record.
//
// Recipients are given one by one: a 5xx for one of them rejects that
// address only (it is listed in "rejected"), unless every recipient is
// rejected; a 4xx for any of them fails the whole send, to be retried.
// sender is the credential a try sends with, those that failed before
// it, and where the try says it handed the mail over.
type sender struct {
	ref    string
	failed []any
	handed *bool
}

func (r *emailRunner) send(ctx context.Context, in *node.Input, by sender, cfg smtpConfig, m *rendered, rec *sendRecord) (map[string]any, error) {
	msg := mail.NewMsg()
	if err := msg.FromFormat(m.from.Name, m.from.Address); err != nil {
		return nil, invalidAddress("from", m.from.Address)
	}
	type rcpt struct{ field, addr string }
	var rcpts []rcpt
	set := func(field string, list []*netmail.Address, add func(name, addr string) error) error {
		for _, a := range list {
			if err := add(a.Name, a.Address); err != nil {
				return invalidAddress(field, a.Address)
			}
			rcpts = append(rcpts, rcpt{field, a.Address})
		}
		return nil
	}
	if err := set("to", m.to, msg.AddToFormat); err != nil {
		return nil, err
	}
	if err := set("cc", m.cc, msg.AddCcFormat); err != nil {
		return nil, err
	}
	if err := set("bcc", m.bcc, msg.AddBccFormat); err != nil {
		return nil, err
	}
	if len(m.replyTo) > 0 {
		if err := msg.ReplyToFormat(m.replyTo[0].Name, m.replyTo[0].Address); err != nil {
			return nil, invalidAddress("reply_to", m.replyTo[0].Address)
		}
	}
	msg.Subject(m.subject)
	// The Message-ID derives from the idempotency key: a send repeated after
	// a crash carries the same one, so receivers can tell it is the same mail.
	msgID := messageID(in, m.from.Address)
	msg.SetMessageIDWithValue(msgID)
	msg.SetDate()
	for _, h := range m.headers {
		msg.SetGenHeader(mail.Header(h[0]), h[1])
	}
	// A node with a subscriber and a category gets the one-click link, in
	// place of a List-Unsubscribe of its own headers.
	if lu := listUnsubscribe(m, cfg); lu != "" {
		msg.SetGenHeader("List-Unsubscribe", lu)
		if m.unsubscribeURL != "" {
			// RFC 8058: a POST to the URL unsubscribes, no page to visit.
			msg.SetGenHeader("List-Unsubscribe-Post", "List-Unsubscribe=One-Click")
		}
	}
	switch {
	case m.text != "" && m.html != "":
		msg.SetBodyString(mail.TypeTextPlain, m.text)
		msg.AddAlternativeString(mail.TypeTextHTML, m.html)
	case m.html != "":
		msg.SetBodyString(mail.TypeTextHTML, m.html)
	default:
		msg.SetBodyString(mail.TypeTextPlain, m.text)
	}
	client, err := mail.NewClient(cfg.host, r.clientOptions(cfg)...)
	if err != nil {
		return nil, &node.Error{Code: CodeCredentials, Message: fmt.Sprintf("credential %q: %v", by.ref, err)}
	}
	fail := func(err error, field, addr string) (map[string]any, error) {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, r.smtpError(cfg, err, field, addr)
	}
	sc, err := client.DialToSMTPClientWithContext(ctx)
	if err != nil {
		return fail(err, "", "")
	}
	defer func() { _ = client.CloseWithSMTPClient(sc) }()
	abort := func(err error, field, addr string) (map[string]any, error) {
		_ = sc.Reset()
		return fail(err, field, addr)
	}
	if err := sc.Mail(m.from.Address); err != nil {
		if code, _ := smtpCode(err); code >= 500 {
			return abort(err, "from", m.from.Address)
		}
		return abort(err, "", "")
	}
	accepted, rejected := []any{}, []any{}
	var firstErr error
	var first rcpt
	for _, rc := range rcpts {
		err := sc.Rcpt(rc.addr)
		if err == nil {
			accepted = append(accepted, rc.addr)
			continue
		}
		if code, _ := smtpCode(err); code < 500 || code > 599 {
			return abort(err, rc.field, rc.addr) // 4xx or a lost connection: retry it all
		}
		rejected = append(rejected, rc.addr)
		if firstErr == nil {
			firstErr, first = err, rc
		}
	}
	if len(accepted) == 0 {
		return abort(firstErr, first.field, first.addr)
	}
	w, err := sc.Data()
	if err != nil {
		return abort(err, "", "")
	}
	if _, err := msg.WriteTo(w); err != nil {
		_ = w.Close()
		return abort(err, "", "")
	}
	// attempts: the attempt that sent, a send recorded by an earlier one
	// keeps its own (dsl.md "email").
	out := map[string]any{"message_id": "<" + msgID + ">", "accepted": accepted, "rejected": rejected, "attempts": in.Attempt}
	sentWith(out, by.ref, by.failed)
	rec.ready(out)
	if err := endData(sc, w, r.opts.SMTPTimeout, func() { *by.handed = true; rec.handedOver() }); err != nil {
		if werr := rec.withdraw(); werr != nil {
			return nil, werr
		}
		return abort(err, "", "")
	}
	return out, nil
}

// endData writes the final "." of a message's data and reads the server's
// reply, calling handedOver in between. Once the "." is written (to the
// kernel, which delivers it even if the process dies next) the server has
// the whole message and goes on with it whether or not the worker lives to
// read its reply. A worker killed between the write and the record, a few
// instructions, is the one window left where the mail is sent again. The
// reply is waited for up to timeout.
func endData(sc *smtp.Client, w io.WriteCloser, timeout time.Duration, handedOver func()) error {
	dc, ok := w.(*smtp.DataCloser)
	if !ok {
		// Not go-mail's writer: the reply is read by Close.
		if err := w.Close(); err != nil {
			return err
		}
		handedOver()
		return nil
	}
	if err := dc.WriteCloser.Close(); err != nil {
		return err // the "." may not have gone out: nothing was handed over
	}
	handedOver()
	// The session's deadline was set once, at dial: the record's time
	// must not come out of the wait for the reply.
	if err := sc.UpdateDeadline(timeout); err != nil {
		return err
	}
	_, _, err := sc.Text.ReadResponse(250)
	return err
}

func messageID(in *node.Input, from string) string {
	domain := "rune.invalid"
	if _, d, ok := strings.Cut(from, "@"); ok && d != "" {
		domain = d
	}
	key := in.IdempotencyKey
	if key == "" {
		key = in.ExecutionID + "." + in.NodeID + "." + strconv.Itoa(in.Attempt)
	}
	return key + "@" + domain
}

func (r *emailRunner) clientOptions(cfg smtpConfig) []mail.Option {
	tlsConf := &tls.Config{ServerName: cfg.host, MinVersion: tls.VersionTLS12}
	if r.opts.TLSConfig != nil {
		tlsConf = r.opts.TLSConfig.Clone()
		if tlsConf.ServerName == "" {
			tlsConf.ServerName = cfg.host
		}
	}
	opts := []mail.Option{mail.WithPort(cfg.port), mail.WithTLSConfig(tlsConf), mail.WithTimeout(r.opts.SMTPTimeout)}
	switch cfg.tlsMode {
	case "none":
		opts = append(opts, mail.WithTLSPolicy(mail.NoTLS))
	case "starttls":
		opts = append(opts, mail.WithTLSPolicy(mail.TLSMandatory))
	case "tls":
		opts = append(opts, mail.WithSSL())
	}
	if p := r.opts.Egress; p != nil {
		// The host comes from a credential, which any API token may write:
		// it is checked as the http node's is. go-mail's own TLS dialer is
		// replaced too, so implicit TLS is set up here.
		opts = append(opts, mail.WithDialContextFunc(func(ctx context.Context, network, addr string) (net.Conn, error) {
			conn, err := p.DialContext(ctx, network, addr)
			if err != nil || cfg.tlsMode != "tls" {
				return conn, err
			}
			tc := tls.Client(conn, tlsConf)
			if err := tc.HandshakeContext(ctx); err != nil {
				conn.Close()
				return nil, err
			}
			return tc, nil
		}))
	}
	if cfg.username != "" || cfg.password != "" {
		// Over a plain connection the user chose none: the NOENC variants
		// send the password as the server asks (go-mail refuses otherwise).
		auth := map[[2]bool]mail.SMTPAuthType{
			{false, false}: mail.SMTPAuthPlain, {false, true}: mail.SMTPAuthLogin,
			{true, false}: mail.SMTPAuthPlainNoEnc, {true, true}: mail.SMTPAuthLoginNoEnc,
		}[[2]bool{cfg.tlsMode == "none", cfg.auth == "login"}]
		opts = append(opts, mail.WithSMTPAuth(auth), mail.WithUsername(cfg.username), mail.WithPassword(cfg.password))
	}
	return opts
}

// smtpError classifies a failed send: 4xx replies and lost connections are
// worth retrying, 5xx replies are not; a refused address is named with the
// parameter it came from. Messages hold server replies and addresses,
// never the credential's password.
func (r *emailRunner) smtpError(cfg smtpConfig, err error, field, addr string) error {
	server := net.JoinHostPort(cfg.host, strconv.Itoa(cfg.port))
	if ne, ok := egressError("SMTP "+server, err); ok {
		return ne
	}
	code, reply := smtpCode(err)
	details := map[string]any{"server": server}
	msg := fmt.Sprintf("SMTP %s: %s", server, reply)
	if addr != "" {
		details["address"], details["parameter"] = addr, "parameters."+field
		msg = fmt.Sprintf("parameters.%s: %s refused by %s: %s", field, addr, server, reply)
	}
	if code == 0 {
		// No SMTP reply: the connection failed or was lost.
		return &node.Error{Code: CodeSMTPConnection, Message: msg, Details: details, Retryable: true}
	}
	details["smtp_code"] = code
	return &node.Error{Code: CodeSMTP, Message: msg, Details: details, Retryable: code >= 400 && code < 500}
}

// smtpCode finds the SMTP reply in err, if there is one.
func smtpCode(err error) (int, string) {
	var te *textproto.Error
	if errors.As(err, &te) {
		return te.Code, fmt.Sprintf("%d %s", te.Code, te.Msg)
	}
	var se *mail.SendError
	if errors.As(err, &se) {
		return se.ErrorCode(), err.Error()
	}
	return 0, err.Error()
}

// listUnsubscribe is the List-Unsubscribe header of m (RFC 2369): the
// one-click URL, then a mailto: when the credential names an address for
// it; "" when m has neither (no subscriber or category, no public URL).
func listUnsubscribe(m *rendered, cfg smtpConfig) string {
	var parts []string
	if m.unsubscribeURL != "" {
		parts = append(parts, "<"+m.unsubscribeURL+">")
	}
	if m.category != "" && cfg.unsubscribeMailto != "" {
		parts = append(parts, "<mailto:"+cfg.unsubscribeMailto+"?subject="+url.PathEscape("unsubscribe "+m.category)+">")
	}
	return strings.Join(parts, ", ")
}
