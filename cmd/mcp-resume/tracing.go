package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-resume/mcp-resume/internal/mcptrace"
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

// traceClient sets a client command's tracing up from the environment
// (startTracing): opts, the options of its client of tg, get the provider and
// the transport's name, and the returned context carries the parent of the
// command's spans when the environment names one (TRACEPARENT and TRACESTATE,
// as OpenTelemetry's environment carriers have it; a script that traces puts
// the command's spans in its trace). The returned function ends tracing,
// exporting the spans that ended: the command calls it after its client
// closed.
func traceClient(ctx context.Context, tg *target, opts *client.Options, stderr io.Writer) (context.Context, func()) {
	tp, stop := startTracing(func(err error) { fmt.Fprintf(stderr, "tracing: %v\n", err) })
	if tp == nil {
		return ctx, stop
	}
	opts.TracerProvider = tp
	opts.Transport = tg.transport()
	if parent := os.Getenv("TRACEPARENT"); parent != "" {
		carrier := propagation.MapCarrier{"traceparent": parent, "tracestate": os.Getenv("TRACESTATE")}
		ctx = propagation.TraceContext{}.Extract(ctx, carrier)
	}
	return ctx, stop
}

// transport names tg's transport, for the spans' network.transport.
func (t *target) transport() string {
	switch {
	case t.stdio != "":
		return mcptrace.TransportStdio
	case t.ws != "":
		return mcptrace.TransportWebSocket
	}
	return mcptrace.TransportHTTP
}

// startMetrics sets the OTLP export of metrics up from the environment
// (telemetry.SetupMetrics: OTEL_METRICS_EXPORTER=otlp), and returns what
// records mcp.server.operation.duration in it, nil when the export is off,
// and what ends it: what was measured since the last export is sent then.
// warn gets a configuration it cannot use and the exporter's errors.
func startMetrics(warn func(error)) (func(mcp.Operation), func()) {
	m, err := telemetry.SetupMetrics(context.Background(), "mcp-resume", version)
	if err != nil {
		warn(err)
		return nil, func() {}
	}
	if m == nil {
		return nil, func() {}
	}
	stop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), tracingFlush)
		defer cancel()
		if err := m.Shutdown(ctx); err != nil {
			warn(err)
		}
	}
	record, err := metrics.OTelOperations(m.MeterProvider())
	if err != nil {
		warn(err)
		stop()
		return nil, func() {}
	}
	return record, stop
}
