package telemetry

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// The environment variables Setup reads itself. The exporters read the rest of
// OTEL_EXPORTER_OTLP_* (endpoint, headers, timeout, compression, TLS), the
// SDK OTEL_TRACES_SAMPLER(_ARG) and OTEL_BSP_*, the resource
// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES.
const (
	EnvDisabled       = "OTEL_SDK_DISABLED"
	EnvExporter       = "OTEL_TRACES_EXPORTER"
	EnvEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	EnvProtocol       = "OTEL_EXPORTER_OTLP_PROTOCOL"
	EnvTracesProtocol = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
)

// Tracing is the tracing Setup configured. Its methods are safe for
// concurrent use; a nil *Tracing is tracing off.
type Tracing struct {
	tp       *sdktrace.TracerProvider
	protocol string
	exporter string // "mcp-resume" (exporter.go), "otlptracehttp" or "otlptracegrpc"
}

// Setup configures tracing from the environment, for the service named
// service (OTEL_SERVICE_NAME overrides it) at version. Tracing is on when
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT is set, or
// OTEL_TRACES_EXPORTER is otlp; it is off with OTEL_SDK_DISABLED=true or
// OTEL_TRACES_EXPORTER=none, and when nothing is set. Off, Setup returns nil
// and nil: no provider, no exporter, no goroutine.
//
// onError, when not nil, receives the SDK's errors (an export that failed),
// which otherwise go to the standard logger.
//
// An exporter or protocol this build does not have (OTEL_TRACES_EXPORTER
// other than otlp and none, OTEL_EXPORTER_OTLP_PROTOCOL http/json) is an
// error; tracing is then off.
func Setup(ctx context.Context, service, version string, onError func(error)) (*Tracing, error) {
	if sdkDisabled() {
		return nil, nil
	}
	exp := strings.ToLower(strings.TrimSpace(os.Getenv(EnvExporter)))
	switch exp {
	case "none":
		return nil, nil
	case "", "otlp":
	default:
		return nil, fmt.Errorf("%s=%s: only otlp (or none) is built in", EnvExporter, exp)
	}
	if exp == "" && os.Getenv(EnvEndpoint) == "" && os.Getenv(EnvTracesEndpoint) == "" {
		return nil, nil // nothing configured
	}
	protocol := otlpProtocol(EnvTracesProtocol, EnvProtocol)
	var exporter sdktrace.SpanExporter
	var name string
	var err error
	switch protocol {
	case "http/protobuf":
		if cfg, ok := httpConfigFromEnv(); ok {
			exporter, name = newHTTPExporter(cfg), "mcp-resume" // the binary's own (exporter.go)
		} else {
			exporter, err = otlptracehttp.New(ctx)
			name = "otlptracehttp"
		}
	case "grpc":
		exporter, err = otlptracegrpc.New(ctx)
		name = "otlptracegrpc"
	default:
		return nil, fmt.Errorf("%s=%s: want http/protobuf or grpc", EnvProtocol, protocol)
	}
	if err != nil {
		return nil, fmt.Errorf("the OTLP trace exporter (%s): %w", protocol, err)
	}
	res, err := newResource(ctx, service, version)
	if err != nil {
		_ = exporter.Shutdown(ctx)
		return nil, fmt.Errorf("the trace resource: %w", err)
	}
	if onError != nil {
		otel.SetErrorHandler(otel.ErrorHandlerFunc(onError))
	}
	// The sampler (OTEL_TRACES_SAMPLER) and the batch processor's schedule
	// (OTEL_BSP_SCHEDULE_DELAY) are the SDK's own reading of the environment.
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res))
	return &Tracing{tp: tp, protocol: protocol, exporter: name}, nil
}

// TracerProvider returns the provider to trace with; nil when tracing is off.
func (t *Tracing) TracerProvider() trace.TracerProvider {
	if t == nil {
		return nil
	}
	return t.tp
}

// Protocol is the OTLP protocol spans are exported with: http/protobuf or
// grpc; "" when tracing is off.
func (t *Tracing) Protocol() string {
	if t == nil {
		return ""
	}
	return t.protocol
}

// Shutdown exports the spans that ended and are not exported yet, then stops
// the exporter, within ctx. Spans still open are not exported. Nothing for a
// nil Tracing.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.tp.Shutdown(ctx)
}

// sdkDisabled reports whether OTEL_SDK_DISABLED=true turns all telemetry off.
func sdkDisabled() bool {
	return strings.EqualFold(strings.TrimSpace(os.Getenv(EnvDisabled)), "true")
}

// otlpProtocol is the OTLP protocol of a signal: the first of the variables
// vars that is set (the signal's own first, then the more general ones), else
// http/protobuf, the specification's default.
func otlpProtocol(vars ...string) string {
	return cmp.Or(signal(vars...), "http/protobuf")
}

// newResource is the resource of the binary's telemetry (traces, metrics,
// log records): the service's name and version first, which what the
// environment says (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES) overrides.
// A partial resource (an attribute the environment spells wrong) is no error.
func newResource(ctx context.Context, service, version string) (*resource.Resource, error) {
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", service), attribute.String("service.version", version)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv())
	if errors.Is(err, resource.ErrPartialResource) {
		err = nil
	}
	return res, err
}
