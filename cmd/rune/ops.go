package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/rune-org/rune/egress"
	"github.com/rune-org/rune/metrics"
)

// opsFlags are the operability flags of the long-running commands (worker,
// scheduler): logs, and the HTTP server of health checks and metrics.
type opsFlags struct {
	logFormat, logLevel, metricsAddr string
	// egress, when set, learns the metrics listener: nodes may not call it.
	egress *egress.Policy
}

func (o *opsFlags) flags(fs *flag.FlagSet, env *cliEnv) {
	o.logFlags(fs, env)
	fs.StringVar(&o.metricsAddr, "metrics-addr", env.getenv("RUNE_METRICS_ADDR"), "serve /metrics (Prometheus), /healthz and /readyz on this address, e.g. :9090 (env RUNE_METRICS_ADDR; default: off)")
}

// logFlags registers --log-format and --log-level alone (rune server, whose
// health check is on its API's port).
func (o *opsFlags) logFlags(fs *flag.FlagSet, env *cliEnv) {
	format := env.getenv("RUNE_LOG_FORMAT")
	if format == "" {
		format = "text"
	}
	level := env.getenv("RUNE_LOG_LEVEL")
	if level == "" {
		level = "info"
	}
	fs.StringVar(&o.logFormat, "log-format", format, "log format on stderr: text or json (env RUNE_LOG_FORMAT)")
	fs.StringVar(&o.logLevel, "log-level", level, "least level logged: debug, info, warn or error (env RUNE_LOG_LEVEL)")
}

// logger returns the logger the flags ask for, or a usage error naming the
// flag whose value is wrong.
func (o *opsFlags) logger(env *cliEnv) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return nil, usagef("--log-level %q: want debug, info, warn or error", o.logLevel)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch strings.ToLower(o.logFormat) {
	case "text":
		return slog.New(slog.NewTextHandler(env.stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(env.stderr, opts)), nil
	}
	return nil, usagef("--log-format %q: want text or json", o.logFormat)
}

// recorder returns a metrics Recorder when --metrics-addr is set, nil (no
// metrics, no cost) otherwise.
func (o *opsFlags) recorder(log *slog.Logger) *metrics.Recorder {
	if o.metricsAddr == "" {
		return nil
	}
	return metrics.New(metrics.Config{Logger: log})
}

// sampleEvery is how often queue depths and the timer store are sampled
// for metrics: often enough for alerts, rarely enough to cost nothing.
const sampleEvery = 5 * time.Second

// readyCheck is one dependency /readyz checks.
type readyCheck struct {
	name  string
	check func(context.Context) error
}

// serveOps serves /healthz, /readyz and /metrics on o.metricsAddr until stop
// is called. /healthz answers 200 while the process runs. /readyz answers
// 200 when every check passes within 2 s, else 503 naming the failures; it
// answers 503 as soon as ctx is done (the process is shutting down).
func (o *opsFlags) serveOps(ctx context.Context, rec *metrics.Recorder, log *slog.Logger, checks ...readyCheck) (stop func(), err error) {
	if o.metricsAddr == "" {
		return func() {}, nil
	}
	l, err := net.Listen("tcp", o.metricsAddr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr %s: %w", o.metricsAddr, err)
	}
	o.egress.AddListener(l.Addr())
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if ctx.Err() != nil {
			http.Error(w, "shutting down", http.StatusServiceUnavailable)
			return
		}
		cctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		var report strings.Builder
		ok := true
		for _, c := range checks {
			if err := c.check(cctx); err != nil {
				ok = false
				fmt.Fprintf(&report, "%s: %v\n", c.name, err)
			} else {
				fmt.Fprintf(&report, "%s: ok\n", c.name)
			}
		}
		if !ok {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		fmt.Fprint(w, report.String())
	})
	mux.Handle("GET /metrics", rec.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("metrics server stopped", "addr", o.metricsAddr, "err", err)
		}
	}()
	log.Info("metrics and health checks listening", "addr", "http://"+l.Addr().String(), "paths", "/metrics /healthz /readyz")
	return func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}, nil
}
