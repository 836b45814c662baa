package main

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"

	"github.com/rune-org/rune/tracing"
)

// tracer returns a Tracer exporting spans over OTLP/HTTP when the standard
// variables configure an endpoint (OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT; the exporter reads the others —
// headers, timeout, TLS — itself), and nil (no tracing, no cost) when they
// do not. OTEL_SDK_DISABLED=true turns it off; OTEL_TRACES_SAMPLER
// traceidratio (or parentbased_traceidratio) with OTEL_TRACES_SAMPLER_ARG
// keeps that share of executions. OTEL_TRACES_EXPORTER=none traces with no
// exporter: every span is made and dropped (what tracing costs before the
// export, for `rune bench`). stop flushes what is buffered.
func tracer(ctx context.Context, env *cliEnv, service string, log *slog.Logger) (*tracing.Tracer, func(), error) {
	noExporter := env.getenv("OTEL_TRACES_EXPORTER") == "none"
	if env.getenv("OTEL_SDK_DISABLED") == "true" ||
		(!noExporter && env.getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && env.getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "") {
		return nil, func() {}, nil
	}
	name := env.getenv("OTEL_SERVICE_NAME")
	if name == "" {
		name = service
	}
	opts := []sdktrace.TracerProviderOption{
		sdktrace.WithResource(resource.NewSchemaless(semconv.ServiceName(name))),
	}
	if !noExporter {
		exp, err := otlptracehttp.New(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("OTLP trace exporter (OTEL_EXPORTER_OTLP_*): %w", err)
		}
		opts = append(opts, sdktrace.WithBatcher(exp))
	}
	switch sampler := env.getenv("OTEL_TRACES_SAMPLER"); sampler {
	case "traceidratio", "parentbased_traceidratio":
		// Every span of an execution has its trace id, so deciding by the
		// trace id alone keeps or drops whole executions, the same way in
		// every process.
		arg := env.getenv("OTEL_TRACES_SAMPLER_ARG")
		ratio, err := strconv.ParseFloat(arg, 64)
		if err != nil || ratio < 0 || ratio > 1 {
			return nil, nil, usagef("OTEL_TRACES_SAMPLER_ARG %q: want a ratio from 0 to 1 for %s", arg, sampler)
		}
		opts = append(opts, sdktrace.WithSampler(sdktrace.TraceIDRatioBased(ratio)))
	}
	tp := sdktrace.NewTracerProvider(opts...)
	if noExporter {
		log.Info("tracing with no exporter (OTEL_TRACES_EXPORTER=none): spans are made and dropped", "service", name)
	} else {
		log.Info("exporting traces over OTLP", "service", name)
	}
	return tracing.New(tp), func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := tp.Shutdown(sctx); err != nil {
			log.Warn("could not flush traces", "err", err)
		}
	}, nil
}
