package main

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-resume/mcp-resume/internal/telemetry"
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
