// Package console is the web console of `rune server` (issue 16): a list of
// executions, a live graph of each run, inspection and control, workflows
// and dead letters. Pages are server-rendered html/template with a little
// JavaScript for the live parts; every asset is embedded, so the console
// works offline and no request leaves the machine.
//
// The console is a client of the server, like the CLI: it reads through the
// store and performs every write (cancel, re-run, trigger) through the
// server's own API handler as the session's token, so the API's rules
// (validation, limits, halting a run) exist once. It lives apart from
// package server so the API stays free of HTML.
package console

import (
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/rune-org/rune/store"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed assets
var assetFS embed.FS

// TokenChecker opens, resolves and ends console sessions, authenticating
// exactly as the API does (server.Server implements it). The cookie holds
// only a session id; the checker keeps the session, bound to its token.
type TokenChecker interface {
	// Login checks token as the API does and opens a session acting as it;
	// it returns the session's id, the cookie's value. Its error may be
	// shown to the user.
	Login(ctx context.Context, token string) (session string, err error)
	// Session resolves a session id to what its token may see and do, and
	// returns ctx carrying the session: requests to Config.API made with
	// it act as the session's token (the console's proxy). An error when
	// the session expired or ended (logout, its token revoked or expired).
	Session(ctx context.Context, session string) (context.Context, Access, error)
	// Logout ends a session: its id no longer resolves.
	Logout(ctx context.Context, session string) error
}

// Access is what a session's token may see and do (its role and workflow
// scope, docs/api.md "Roles"). The console shows only what the token may
// see, hides the buttons of what it may not do, and the API refuses it
// anyway (the console refuses the dead-letter actions it serves itself).
type Access struct {
	// Sees reports whether the token may see workflow id; nil: every workflow.
	Sees func(workflowID string) bool
	// Scoped is set when the token sees only some workflows: the
	// dead-letter queue (of every workflow) is then not shown.
	Scoped bool
	// Operate: trigger, cancel, re-run. Edit: store workflow versions.
	// Replay: replay dead letters. Purge: discard them.
	Operate, Edit, Replay, Purge bool
	// Credentials: list and write credentials. Admin: manage tokens
	// (issue 38's pages; both false for a scoped token).
	Credentials, Admin bool
}

// sees reports whether a may see workflow id.
func (a Access) sees(workflowID string) bool { return a.Sees == nil || a.Sees(workflowID) }

// DeadLetter is one message of the dead-letter queue as the console shows it.
type DeadLetter struct {
	ID, ExecutionID, Topic, Reason string
	At                             time.Time
	Body                           []byte
}

// DeadLetters is the dead-letter queue of the server's broker (RabbitMQ's,
// or the embedded default's in its runtime file).
type DeadLetters interface {
	// List returns up to limit dead letters, oldest first, and how many
	// the queue holds. It takes nothing away.
	List(ctx context.Context, limit int) ([]DeadLetter, int, error)
	// Replay publishes the dead letters ids again where they came from and
	// removes them from the queue; it returns the ids replayed.
	Replay(ctx context.Context, ids []string) ([]string, error)
	// Purge discards every dead letter; it returns how many there were.
	Purge(ctx context.Context) (int, error)
}

// Config configures a Console. API, Store and Tokens are required.
type Config struct {
	// API is the server's HTTP API (server.Server.Handler); the console's
	// writes and live streams go through it as the session's token. Required.
	API http.Handler
	// Store is read for the pages. Required.
	Store store.Store
	// Tokens checks the token a user logs in with and keeps the sessions.
	// Required.
	Tokens TokenChecker
	// SecureCookie marks the session cookie Secure on every answer, for a
	// server behind a proxy that terminates TLS (rune server --public-url
	// https://…). Defaults to false: Secure when the request came over TLS.
	SecureCookie bool
	// LoginFailures is how many failed logins one client address may make
	// within LoginWindow; further attempts get 429 until the window has
	// room again. Defaults to LoginFailuresDefault.
	LoginFailures int
	// LoginWindow is the window of LoginFailures. Defaults to
	// LoginWindowDefault.
	LoginWindow time.Duration
	// Validate checks a workflow definition as `rune validate` does (nil
	// or a workflow.Problems error). Defaults to nil: the workflow page then
	// offers no check of an edited definition.
	Validate func(def []byte) error
	// DeadLetters is the broker's dead-letter queue. Defaults to nil (a
	// runtime without one): the page says so.
	DeadLetters DeadLetters
	// Mode names the server's mode in the page header ("embedded",
	// "distributed"). Defaults to "".
	Mode string
	// Logger receives the console's logs. Defaults to slog.Default().
	Logger *slog.Logger
	// Now returns the current time. Defaults to time.Now.
	Now func() time.Time
	// Depths reads the distributed server's queue and timer depths for the
	// dashboard (issue 38, depths.go). Defaults to nil: a server without
	// them (the embedded default) shows none.
	Depths func(ctx context.Context) ([]Depth, error)
}

// Defaults of Config.
const (
	LoginFailuresDefault = 5
	LoginWindowDefault   = time.Minute
)

// Console serves the web console.
type Console struct {
	cfg  Config
	log  *slog.Logger
	tmpl *template.Template
	mux  *http.ServeMux
	// failures are the failed logins of each client address.
	failures throttle
}

// cookieName holds the user's session id (never the API token):
// HttpOnly, SameSite=Strict, Secure over TLS.
const cookieName = "rune_session"

// csrfHeader carries, on every console write, a value only a page of this
// console can know (derived from the session id the page cannot read).
const csrfHeader = "X-Rune-CSRF"

// New builds a console from cfg.
func New(cfg Config) (*Console, error) {
	switch {
	case cfg.API == nil:
		return nil, errors.New("console: Config.API is required")
	case cfg.Store == nil:
		return nil, errors.New("console: Config.Store is required")
	case cfg.Tokens == nil:
		return nil, errors.New("console: Config.Tokens is required")
	}
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.LoginFailures = cmp.Or(cfg.LoginFailures, LoginFailuresDefault)
	cfg.LoginWindow = cmp.Or(cfg.LoginWindow, LoginWindowDefault)
	if cfg.LoginFailures < 0 || cfg.LoginWindow < 0 {
		return nil, errors.New("console: Config.LoginFailures and Config.LoginWindow must be positive")
	}
	t, err := template.New("").Funcs(funcs).ParseFS(templateFS, "templates/*.html")
	if err != nil {
		return nil, err
	}
	c := &Console{cfg: cfg, log: cfg.Logger, tmpl: t, mux: http.NewServeMux(),
		failures: throttle{max: cfg.LoginFailures, window: cfg.LoginWindow}}
	assets, _ := fs.Sub(assetFS, "assets")
	c.mux.Handle("GET /assets/", http.StripPrefix("/assets/", http.FileServerFS(assets)))
	c.mux.HandleFunc("GET /login", c.loginPage)
	c.mux.HandleFunc("POST /login", c.login)
	c.mux.HandleFunc("POST /logout", c.session(c.logout))
	c.mux.HandleFunc("GET /{$}", c.session(c.executionsPage))
	c.mux.HandleFunc("GET /executions", c.session(c.executionsPage))
	c.mux.HandleFunc("GET /executions/{id}", c.session(c.executionPage))
	c.mux.HandleFunc("GET /workflows", c.session(c.workflowsPage))
	c.mux.HandleFunc("GET /workflows/{id}", c.session(c.workflowPage))
	c.mux.HandleFunc("POST /workflows/{id}/check", c.session(c.checkWorkflow))
	c.mux.HandleFunc("GET /dashboard", c.session(c.dashboardPage))
	c.mux.HandleFunc("GET /dlq", c.session(c.dlqPage))
	c.mux.HandleFunc("POST /dlq", c.session(c.dlqAction))
	c.mux.HandleFunc("GET /ui/rows", c.session(c.executionRows))
	c.mux.HandleFunc("GET /ui/executions/{id}/state", c.session(c.executionState))
	c.mux.HandleFunc("GET /ui/executions/{id}/nodes/{node}", c.session(c.nodePanel))
	c.mux.HandleFunc("/ui/api/", c.session(c.proxy))
	c.editorRoutes()                                               // the visual editor (editor.go)
	c.manageRoutes()                                               // issue 38: hooks, schedules, credentials, tokens, bulk actions (manage.go)
	c.mux.HandleFunc("GET /approvals", c.session(c.approvalsPage)) // issue 34
	c.mux.HandleFunc("GET /templates", c.session(c.templatesPage)) // issue 36
	return c, nil
}

// Handler returns the console's pages, assets and data endpoints.
func (c *Console) Handler() http.Handler { return secureHeaders(c.mux) }

// prefixes are the paths the console owns next to the API.
var prefixes = []string{"GET /{$}", "/login", "/logout", "/executions", "/executions/", "/workflows", "/workflows/", "/dashboard", "/dlq", "/assets/", "/ui/",
	"/editor", "/editor/", // the visual editor
	// Issue 38's management pages (manage.go).
	"/hooks", "/schedules", "/credentials", "/tokens",
	"/approvals", // issue 34
	"/templates", // issue 36: message templates (msgtemplates.go)
}

// Mount serves the console at / next to api: the console's paths go to
// the console, every other path (/v1/..., /healthz, ...) to api.
func Mount(api http.Handler, c *Console) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", api)
	h := c.Handler()
	for _, p := range prefixes {
		mux.Handle(p, h)
	}
	return mux
}

// secureHeaders forbids what the console never needs: scripts, styles,
// images or connections from anywhere but this server, and framing.
func secureHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("Referrer-Policy", "same-origin")
		h.ServeHTTP(w, r)
	})
}

// sessionKey is the request context key of the session id;
// accessKey, of its Access.
type (
	sessionKey struct{}
	accessKey  struct{}
)

// session runs h for a request with a valid session cookie; a page
// request without one goes to the login form, a data request gets 401.
// A write must carry the CSRF value and, when the browser sends one, an
// Origin of this server.
func (c *Console) session(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ck, err := r.Cookie(cookieName)
		var acc Access
		ctx := r.Context()
		if err == nil && ck.Value != "" {
			ctx, acc, err = c.cfg.Tokens.Session(ctx, ck.Value)
		} else {
			err = errors.New("not logged in")
		}
		if err != nil {
			if r.Method == http.MethodGet && !strings.HasPrefix(r.URL.Path, "/ui/") {
				http.Redirect(w, r, "/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			http.Error(w, "log in again: "+err.Error(), http.StatusUnauthorized)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			if !sameOrigin(r) {
				http.Error(w, "cross-origin request refused", http.StatusForbidden)
				return
			}
			got := r.Header.Get(csrfHeader)
			if got == "" {
				got = r.PostFormValue("csrf")
			}
			want := csrfToken(ck.Value)
			if subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
				http.Error(w, "missing or wrong CSRF token: reload the page", http.StatusForbidden)
				return
			}
		}
		ctx = context.WithValue(context.WithValue(ctx, sessionKey{}, ck.Value), accessKey{}, acc)
		h(w, r.WithContext(ctx))
	}
}

// sameOrigin reports whether a request's Origin (when the browser sent
// one) is this server.
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	return err == nil && u.Host == r.Host
}

// csrfToken is the value a page sends with its writes: a hash of the
// session id, which a page from another site can neither read nor compute.
func csrfToken(session string) string {
	h := sha256.Sum256([]byte("rune-console-csrf\x00" + session))
	return hex.EncodeToString(h[:16])
}

func sessionOf(r *http.Request) string {
	s, _ := r.Context().Value(sessionKey{}).(string)
	return s
}

// accessOf is the session's Access (none outside a session).
func accessOf(r *http.Request) Access {
	a, _ := r.Context().Value(accessKey{}).(Access)
	return a
}

func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	c.render(w, r, "login", map[string]any{"Title": "Log in", "Next": safeNext(r.URL.Query().Get("next"))})
}

// login checks the token and opens a session; the cookie holds its id.
// Failed logins are throttled per client address (Config.LoginFailures).
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		http.Error(w, "cross-origin request refused", http.StatusForbidden)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
	next := safeNext(r.PostFormValue("next"))
	addr := clientAddr(r)
	if wait := c.failures.wait(addr, c.cfg.Now()); wait > 0 {
		secs := int(math.Ceil(wait.Seconds()))
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		w.WriteHeader(http.StatusTooManyRequests)
		c.render(w, r, "login", map[string]any{"Title": "Log in", "Next": next, "Error": fmt.Sprintf("Too many failed logins from your address: try again in %d s.", secs)})
		return
	}
	token := strings.TrimSpace(r.PostFormValue("token"))
	session, err := c.cfg.Tokens.Login(r.Context(), token)
	if token == "" || err != nil {
		c.failures.fail(addr, c.cfg.Now())
		w.WriteHeader(http.StatusUnauthorized)
		c.render(w, r, "login", map[string]any{"Title": "Log in", "Next": next, "Error": "That token is not valid (create one with `rune token create NAME`)."})
		return
	}
	c.setCookie(w, r, session)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// logout ends the session where it is kept (the cookie's old value no
// longer works) and clears the cookie.
func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	if err := c.cfg.Tokens.Logout(r.Context(), sessionOf(r)); err != nil {
		c.log.Error("console: logout", "err", err)
		http.Error(w, "the session could not be ended: try again", http.StatusInternalServerError)
		return
	}
	c.setCookie(w, r, "")
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

// setCookie sets the session cookie to session, or clears it ("").
func (c *Console) setCookie(w http.ResponseWriter, r *http.Request, session string) {
	ck := &http.Cookie{Name: cookieName, Value: session, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil || c.cfg.SecureCookie}
	if session == "" {
		ck.MaxAge = -1
	}
	http.SetCookie(w, ck)
}

// safeNext keeps a post-login redirect on this server: a path of this
// origin, else "/".
func safeNext(next string) string {
	// Browsers drop tabs and line breaks from a URL and read '\' as '/':
	// "/\t/evil.example" and "/\\evil.example" leave the origin as
	// "//evil.example" does.
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") ||
		strings.ContainsRune(next, '\\') || strings.ContainsFunc(next, unicode.IsControl) {
		return "/"
	}
	if u, err := url.Parse(next); err != nil || u.Scheme != "" || u.Host != "" || u.User != nil {
		return "/"
	}
	return next
}

// proxy forwards /ui/api/<path> to the API's /v1/<path> acting as the
// session's token (its context carries the session; no token is sent):
// the console's writes and live streams.
func (c *Console) proxy(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, "/ui/api/")
	if !strings.HasPrefix(rest, "v1/") {
		http.NotFound(w, r)
		return
	}
	r2 := r.Clone(r.Context())
	r2.URL.Path = "/" + rest
	r2.URL.RawPath = ""
	r2.RequestURI = r2.URL.RequestURI()
	r2.Header.Del("Cookie")
	r2.Header.Del(csrfHeader)
	r2.Header.Del("Authorization")
	c.cfg.API.ServeHTTP(w, r2)
}
