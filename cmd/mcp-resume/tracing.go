package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-resume/mcp-resume/internal/telemetry"
	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/mcp/client"
	"github.com/mcp-resume/mcp-resume/metrics"
)

// tracingFlush bounds how long a command waits, as it exits, for the spans
// not exported yet to reach the collector.
const tracingFlush = 5 * time.Second

// startTracing sets tracing up from the standard OpenTelemetry environment
// (internal/telemetry; docs/observability.md) for a command, and returns its
// provider, nil when tracing is off, and what ends it: the spans that ended
// and are not exported yet are sent then. warn gets a configuration tracing
// cannot use (the command then runs untraced) and the exporter's errors.
func startTracing(warn func(error)) (trace.TracerProvider, func()) {
	tr, err := telemetry.Setup(context.Background(), "mcp-resume", version, warn)
	if err != nil {
		warn(err)
		return nil, func() {}
	}
	if tr == nil {
		return nil, func() {}
	}
	return tr.TracerProvider(), func() {
		ctx, cancel := context.WithTimeout(context.Background(), tracingFlush)
		defer cancel()
		if err := tr.Shutdown(ctx); err != nil {
			warn(err)
		}
	}
}

// traceClient sets a client command's tracing and metrics up from the
// environment (startTracing, startMetrics): opts, the options of its client
// of tg, get the provider, the transport's name and, with
// OTEL_METRICS_EXPORTER=otlp, what records mcp.client.operation.duration;
// the returned context carries the parent of the command's spans when the
// environment names one (TRACEPARENT and TRACESTATE, as OpenTelemetry's
// environment carriers have it; a script that traces puts the command's
// spans in its trace). The returned function ends both, exporting the spans
// that ended and what was measured: the command calls it after its client
// closed.
func traceClient(ctx context.Context, tg *target, opts *client.Options, stderr io.Writer) (context.Context, func()) {
	tp, stopTracing := startTracing(func(err error) { fmt.Fprintf(stderr, "tracing: %v\n", err) })
	otlp, stopMetrics := startMetrics(func(err error) { fmt.Fprintf(stderr, "metrics: %v\n", err) })
	stop := func() {
		stopMetrics()
		stopTracing()
	}
	if tp == nil && otlp.client == nil {
		return ctx, stop
	}
	opts.Transport = tg.ep.Kind().Transport()
	opts.OnOperation = otlp.client
	if tp == nil {
		return ctx, stop
	}
	opts.TracerProvider = tp
	if parent := os.Getenv("TRACEPARENT"); parent != "" {
		carrier := propagation.MapCarrier{"traceparent": parent, "tracestate": os.Getenv("TRACESTATE")}
		ctx = propagation.TraceContext{}.Extract(ctx, carrier)
	}
	return ctx, stop
}

// otlpOps record the operation histograms in the OTLP export of metrics:
// mcp.server.operation.duration of the requests a server received, and
// mcp.client.operation.duration of those a client sent. Nil when the export
// is off.
type otlpOps struct {
	server func(mcp.Operation)
	client func(client.Operation)
}

// startMetrics sets the OTLP export of metrics up from the environment
// (telemetry.SetupMetrics: OTEL_METRICS_EXPORTER=otlp), and returns what
// records the operation histograms in it, nil when the export is off, and
// what ends it: what was measured since the last export is sent then. warn
// gets a configuration it cannot use and the exporter's errors.
func startMetrics(warn func(error)) (otlpOps, func()) {
	m, err := telemetry.SetupMetrics(context.Background(), "mcp-resume", version)
	if err != nil {
		warn(err)
		return otlpOps{}, func() {}
	}
	if m == nil {
		return otlpOps{}, func() {}
	}
	stop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), tracingFlush)
		defer cancel()
		if err := m.Shutdown(ctx); err != nil {
			warn(err)
		}
	}
	server, err := metrics.OTelOperations(m.MeterProvider())
	if err != nil {
		warn(err)
		stop()
		return otlpOps{}, func() {}
	}
	cli, err := metrics.OTelClientOperations(m.MeterProvider())
	if err != nil {
		warn(err)
		stop()
		return otlpOps{}, func() {}
	}
	return otlpOps{server: server, client: cli}, stop
}

// opMetrics are the operation histograms of serve and gateway: of the
// requests received (mcp.server.operation.duration) and, for the gateway,
// of those it sends its upstream (mcp.client.operation.duration); on
// /metrics when it is served, and over OTLP when the environment asks for
// it.
type opMetrics struct {
	collectors []prometheus.Collector // for /metrics
	server     func(mcp.Operation)    // mcp.Options.OnOperation
	client     func(client.Operation) // gateway.Options.OnOperation; nil for serve
	stop       func()                 // exports what was measured since the last export
}

// startOpMetrics sets the operation histograms up: for /metrics when served,
// of the gateway's upstream requests too when gw. warn gets the OTLP
// export's troubles.
func startOpMetrics(served, gw bool, warn func(error)) opMetrics {
	otlp, stop := startMetrics(warn)
	m := opMetrics{stop: stop}
	var promServer func(mcp.Operation)
	var promClient func(client.Operation)
	if served {
		ops := metrics.NewOperations()
		m.collectors, promServer = append(m.collectors, ops), ops.Observe
		if gw {
			cops := metrics.NewClientOperations()
			m.collectors, promClient = append(m.collectors, cops), cops.Observe
		}
	}
	m.server = metrics.Tee(promServer, otlp.server)
	if gw {
		m.client = metrics.Tee(promClient, otlp.client)
	}
	return m
}
