package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"

	"github.com/rune-org/rune/egress"
)

// serveDebug serves Go's profiler on addr until stop is called. Operators
// reach it when a worker is slow or large: `go tool pprof
// http://ADDR/debug/pprof/profile`.
// Nodes may not call it (pol, nil for none, learns the listener).
func serveDebug(addr string, log *slog.Logger, pol *egress.Policy) (stop func(), err error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--debug-addr %s: %w", addr, err)
	}
	pol.AddListener(l.Addr())
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux}
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("debug server stopped", "addr", addr, "error", err)
		}
	}()
	log.Info("profiler listening", "addr", "http://"+l.Addr().String()+"/debug/pprof/")
	return func() { _ = srv.Close() }, nil
}
