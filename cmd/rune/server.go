package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rune-org/rune/broker"
	"github.com/rune-org/rune/broker/amqp"
	"github.com/rune-org/rune/console"
	"github.com/rune-org/rune/egress"
	"github.com/rune-org/rune/embedded"
	"github.com/rune-org/rune/engine"
	"github.com/rune-org/rune/internal/dirlock"
	"github.com/rune-org/rune/internal/sqlitedb"
	"github.com/rune-org/rune/nodes"
	"github.com/rune-org/rune/secrets"
	"github.com/rune-org/rune/server"
	"github.com/rune-org/rune/store"
	"github.com/rune-org/rune/store/postgres"
	"github.com/rune-org/rune/store/sqlite"
	"github.com/rune-org/rune/subscribers"
)

// runtimeDB is the embedded default's runtime file under --data: queues,
// coordination, timers, barriers and the records of sends (rune.db is the
// store).
const runtimeDB = "runtime.db"

// storeFlags are the flags that choose the server's store: --postgres for
// the distributed master, else SQLite under --data.
type storeFlags struct {
	data, postgresURL, keyFile string
}

func (s *storeFlags) flags(fs *flag.FlagSet, env *cliEnv) {
	fs.StringVar(&s.data, "data", "./rune-data", "directory of the embedded default's files (SQLite database, secret key)")
	fs.StringVar(&s.postgresURL, "postgres", env.getenv("RUNE_POSTGRES_URL"), "PostgreSQL URL (env RUNE_POSTGRES_URL): the distributed master's store, e.g. postgres://postgres@127.0.0.1:5432/rune")
	fs.StringVar(&s.keyFile, "secret-key-file", "", "file of the credentials' encryption key(s) (RUNE_SECRET_KEY wins); default: <data>/secret.key, created on first start, for the embedded default; none with --postgres")
}

// open opens the store: PostgreSQL with --postgres, else SQLite under --data.
func (s *storeFlags) open(ctx context.Context) (store.Store, error) {
	if s.postgresURL != "" {
		st, err := postgres.Open(ctx, s.postgresURL, "")
		if err != nil {
			return nil, fmt.Errorf("open PostgreSQL store: %w", err)
		}
		return st, nil
	}
	if err := os.MkdirAll(s.data, 0o700); err != nil {
		return nil, fmt.Errorf("--data: %w", err)
	}
	st, err := sqlite.Open(ctx, filepath.Join(s.data, "rune.db"))
	if err != nil {
		return nil, fmt.Errorf("open SQLite store under %s: %w", s.data, err)
	}
	return st, nil
}

// keys loads the credentials' keyring: RUNE_SECRET_KEY, else the key file
// (created with a new key for the embedded default).
func (s *storeFlags) keys(env *cliEnv) (*secrets.Keyring, error) {
	path, create := s.keyFile, false
	if path == "" && s.postgresURL == "" {
		if err := os.MkdirAll(s.data, 0o700); err != nil {
			return nil, fmt.Errorf("--data: %w", err)
		}
		path, create = filepath.Join(s.data, "secret.key"), true
	}
	return secrets.LoadKeys(env.getenv("RUNE_SECRET_KEY"), path, create)
}

// openWithKeys loads the credentials' keyring (keys), then opens the
// store (open); the caller closes the store.
func (s *storeFlags) openWithKeys(ctx context.Context, env *cliEnv) (store.Store, *secrets.Keyring, error) {
	keys, err := s.keys(env)
	if err != nil {
		return nil, nil, err
	}
	st, err := s.open(ctx)
	if err != nil {
		return nil, nil, err
	}
	return st, keys, nil
}

func cmdServer(ctx context.Context, env *cliEnv, args []string) error {
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	addr := fs.String("addr", "127.0.0.1:8080", "address the HTTP API listens on")
	var sf storeFlags
	sf.flags(fs, env)
	var srv servers
	srv.flags(fs, env, true)
	concurrency := fs.Int("concurrency", 0, "embedded default: node executions at once (default: the worker's)")
	drain := fs.Duration("drain-timeout", 30*time.Second, "embedded default: on SIGTERM, how long the node executions in hand may run on; the rest stays queued under --data for the next start")
	lease := fs.Duration("dispatch-lease", server.DispatchLeaseDefault, "how long a claimed execution is this server's to publish before another server may (after a crash)")
	debugAddr := fs.String("debug-addr", "", "serve Go's profiler (net/http/pprof) on this address, e.g. 127.0.0.1:6061 (default: off)")
	var logs opsFlags
	logs.logFlags(fs, env)
	retention := retentionFlag(fs)
	var eg egressFlags
	eg.flags(fs, env)
	poll := fs.Duration("dispatch-poll", server.DispatchPollDefault, "the dispatcher's pause when nothing is due (triggers through this server wake it at once)")
	var web webFlags
	web.flags(fs, env)
	fs.DurationVar(&srv.eventRetention, "event-retention", engine.DefaultEventRetention, "how long a sent event is kept for wait_for_event nodes that reach their wait after it arrived (docs/dsl.md, \"wait_for_event\")")
	fs.Usage = func() {
		fmt.Fprintln(env.stderr, "Usage: rune server [--addr 127.0.0.1:8080] [--data ./rune-data]\n       rune server --postgres URL --amqp URL --redis URL [--prefix P]\n\nThe master: HTTP API, dispatcher, history and live streams (docs/api.md).\nWith no URLs, the embedded default: API, dispatcher, a worker and a scheduler in\none process on SQLite under --data (rune.db: history; runtime.db: queues, timers,\ncoordination), durable across restarts; one server per --data (rune.lock).\nWith URLs, the distributed master (several may run); start `rune worker` and `rune scheduler` processes too.\nRUNE_AMQP_URL and RUNE_REDIS_URL without a PostgreSQL URL are ignored (they are the workers').\nRUNE_API_TOKEN is accepted as a bearer token besides `rune token create` ones.")
		fs.PrintDefaults()
	}
	if _, err := parseInterspersed(fs, args); err != nil {
		return err
	}
	// RUNE_AMQP_URL and RUNE_REDIS_URL alone are the workers' settings
	// (README, "Distributed"), not a request for the distributed master.
	ignored := ""
	if set := setFlags(fs); sf.postgresURL == "" && !set["amqp"] && !set["redis"] && (srv.amqpURL != "" || srv.redisURL != "") {
		srv.amqpURL, srv.redisURL, ignored = "", "", "RUNE_AMQP_URL and RUNE_REDIS_URL are ignored without --postgres (or RUNE_POSTGRES_URL): this is the embedded default"
	}
	distributedMode := sf.postgresURL != "" || srv.amqpURL != "" || srv.redisURL != ""
	if distributedMode && (sf.postgresURL == "" || srv.amqpURL == "" || srv.redisURL == "") {
		return usagef("the distributed master needs --postgres, --amqp and --redis (or their RUNE_*_URL variables); give none for the embedded default")
	}
	tlsCfg, secureCookie, err := web.check()
	if err != nil {
		return err
	}
	log, err := logs.logger(env)
	if err != nil {
		return err
	}
	if srv.egress, err = eg.policy(); err != nil {
		return err
	}
	if ignored != "" {
		log.Info(ignored)
	}
	if !distributedMode {
		// Before anything under --data is read or written: a second server
		// on the directory would dispatch and consume the first's work.
		lock, err := dirlock.Acquire(sf.data)
		var held *dirlock.HeldError
		if errors.As(err, &held) {
			return exitErr{code: exitInvalid, err: err}
		}
		if err != nil {
			return fmt.Errorf("--data: %w", err)
		}
		defer lock.Release()
	}
	if *debugAddr != "" {
		stop, err := serveDebug(*debugAddr, log, srv.egress)
		if err != nil {
			return err
		}
		defer stop()
	}
	st, keys, err := sf.openWithKeys(ctx, env)
	if err != nil {
		return err
	}
	defer st.Close()

	var (
		b     broker.Broker
		eng   *engine.Engine
		ready []server.ReadyCheck
		dlq   console.DeadLetters
	)
	var closers []func()
	defer func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}()
	tr, stopTracing, err := tracer(ctx, env, "rune-server", log)
	if err != nil {
		return err
	}
	closers = append(closers, stopTracing) // last: after the runtime's spans ended
	var depths func(context.Context) ([]console.Depth, error)
	if distributedMode {
		srv.templates = st
		rt, err := srv.connect(ctx, log, amqp.RoleMaster)
		if err != nil {
			return err
		}
		closers = append(closers, rt.Close)
		b, eng = rt.Broker, rt.Engine
		depths = distributedDepths(rt) // issue 38: the dashboard's queues and timers
		for _, c := range readyChecks(rt) {
			ready = append(ready, server.ReadyCheck{Name: c.name, Check: c.check})
		}
	} else {
		db, err := sqlitedb.Open(ctx, filepath.Join(sf.data, runtimeDB), sqlitedb.Options{})
		if err != nil {
			return fmt.Errorf("open the runtime's database under %s: %w", sf.data, err)
		}
		closers = append(closers, func() { db.Close() })
		rt, err := embedded.New(embedded.Options{Logger: log, Concurrency: *concurrency, ConsumeEvents: true, Tracer: tr, DB: db, DrainTimeout: *drain, EventRetention: srv.eventRetention,
			Secrets: secrets.Store{Store: st, Keys: keys}, Nodes: nodes.Options{Logger: log, Egress: srv.egress,
				Subscribers: subscribers.Source{Store: st, Keys: keys, PublicURL: web.publicURL}, Templates: st}})
		if err != nil {
			return err
		}
		closers = append(closers, func() { rt.Close() })
		b, eng = rt.Broker, rt.Engine
		if rt.DeadLetters != nil {
			dlq = embeddedDLQ{rt.DeadLetters}
		}
	}
	s, err := server.New(server.Config{Store: st, Broker: b, Engine: eng, Keys: keys, APIToken: env.getenv("RUNE_API_TOKEN"), Logger: log,
		Dispatch: server.DispatchConfig{Lease: *lease, Poll: *poll}, ReadyChecks: ready, Retention: server.RetentionConfig{After: *retention}, Tracer: tr,
		SessionTTL: web.sessionTTL, MaxStreams: web.maxStreams, PublicURL: web.publicURL})
	if err != nil {
		return err
	}
	mode := "embedded"
	if distributedMode {
		dlq, mode = consoleDLQ{srv: &srv, log: log}, "distributed"
	}
	h, err := withConsole(s, st, eng, dlq, mode, secureCookie, log, depths)
	if err != nil {
		return err
	}
	return serveHTTP(ctx, log, *addr, tlsCfg, s, h, distributedMode, srv.egress)
}

// serveHTTP serves h (s's API and the console) on addr, over TLS when
// tlsCfg is set, and runs its components (dispatcher, history consumer,
// cron triggers, retention) until ctx is
// done, then shuts down gracefully. Nodes may not call the API (pol, nil
// for none, learns the listener).
func serveHTTP(ctx context.Context, log *slog.Logger, addr string, tlsCfg *tls.Config, s *server.Server, h http.Handler, distributedMode bool, pol *egress.Policy) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--addr: %w", err)
	}
	pol.AddListener(ln.Addr())
	// Streams watch their request's context, which Shutdown does not end:
	// baseCtx is cancelled to end them.
	baseCtx, endStreams := context.WithCancel(context.Background())
	defer endStreams()
	hs := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		WriteTimeout:      60 * time.Second, // streams clear theirs
		IdleTimeout:       2 * time.Minute,
		BaseContext:       func(net.Listener) context.Context { return baseCtx },
		TLSConfig:         tlsCfg,
		// Connection errors (TLS handshakes of scanners, plain HTTP to
		// the HTTPS port) go to the server's log, not to stderr raw.
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	var wg sync.WaitGroup
	runErr := make(chan error, 1)
	wg.Go(func() { runErr <- s.Run(runCtx) })
	serveErr := make(chan error, 1)
	scheme := "http"
	if tlsCfg != nil {
		// The certificate is in tlsCfg: ServeTLS takes no files.
		scheme = "https"
		wg.Go(func() { serveErr <- hs.ServeTLS(ln, "", "") })
	} else {
		wg.Go(func() { serveErr <- hs.Serve(ln) })
	}
	mode := "embedded"
	if distributedMode {
		mode = "distributed"
	}
	log.Info("server listening", "addr", ln.Addr().String(), "mode", mode, "scheme", scheme)
	log.Info("console and API at " + scheme + "://" + reachable(ln.Addr()) + "/ (API under /v1); sign in with a token from `rune token create NAME` (with this server's --data or --postgres)")
	var err2 error
	select {
	case <-ctx.Done():
	case err2 = <-runErr:
		runErr <- err2
	case err2 = <-serveErr:
		serveErr <- err2
	}
	endStreams()
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = hs.Shutdown(sctx)
	stopRun()
	wg.Wait()
	if err := <-runErr; err != nil {
		return err
	}
	if err := <-serveErr; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	log.Info("server stopped")
	return nil
}

// reachable is a listener's address as a browser on this machine reaches
// it: an unspecified IP (all interfaces) becomes the loopback address.
func reachable(a net.Addr) string {
	if t, ok := a.(*net.TCPAddr); ok && t.IP.IsUnspecified() {
		return net.JoinHostPort("127.0.0.1", strconv.Itoa(t.Port))
	}
	return a.String()
}

// setFlags are the flags given on the command line.
func setFlags(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}

// retention is --retention: a Go duration or a number of days ("30d").
type retention struct{ d time.Duration }

func (r *retention) String() string { return r.d.String() }

func (r *retention) Set(v string) error {
	if days, ok := strings.CutSuffix(v, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 0 {
			return fmt.Errorf("%q: want a number of days such as 30d, or a duration such as 720h", v)
		}
		r.d = time.Duration(n) * 24 * time.Hour
		return nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return fmt.Errorf("%q: want a number of days such as 30d, or a duration such as 720h", v)
	}
	r.d = d
	return nil
}

func retentionFlag(fs *flag.FlagSet) *time.Duration {
	r := &retention{}
	fs.Var(r, "retention", "prune the node runs and events of executions finished longer ago than this, e.g. 30d or 720h (default: keep forever)")
	return &r.d
}
