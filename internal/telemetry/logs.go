package telemetry

import (
	"context"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploggrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	"go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"
)

// The environment variables SetupLogs reads itself, beside those of tracing
// (Setup): the log exporters read the rest (OTEL_EXPORTER_OTLP_HEADERS,
// ..._TIMEOUT, ..._COMPRESSION, TLS), the SDK OTEL_BLRP_*.
const (
	EnvLogsEndpoint = "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT"
	EnvLogsProtocol = "OTEL_EXPORTER_OTLP_LOGS_PROTOCOL"
	envLogsHeaders  = "OTEL_EXPORTER_OTLP_LOGS_HEADERS"
)

// Logs is the export of log records SetupLogs configured. Its methods are
// safe for concurrent use.
type Logs struct {
	lp       *sdklog.LoggerProvider
	protocol string
}

// SetupLogs configures the export of log records over OTLP (the audit
// trail's, --audit-otlp) to the collector tracing is configured for: the
// same environment (Setup), so that one endpoint takes both. The endpoint is
// OTEL_EXPORTER_OTLP_LOGS_ENDPOINT, else OTEL_EXPORTER_OTLP_ENDPOINT (HTTP
// appends /v1/logs), else OTEL_EXPORTER_OTLP_TRACES_ENDPOINT with /v1/traces
// made /v1/logs; the protocol OTEL_EXPORTER_OTLP_LOGS_PROTOCOL, else
// OTEL_EXPORTER_OTLP_PROTOCOL, else OTEL_EXPORTER_OTLP_TRACES_PROTOCOL
// (http/protobuf by default, or grpc); the headers the logs' or the general
// ones, else the traces'. Unlike Setup, it is asked for: nothing configured
// (no endpoint, and not OTEL_TRACES_EXPORTER=otlp), or OTEL_SDK_DISABLED=true,
// is an error.
func SetupLogs(ctx context.Context, service, version string) (*Logs, error) {
	if sdkDisabled() {
		return nil, fmt.Errorf("%s=true: no OTLP export", EnvDisabled)
	}
	logsURL, generalURL, tracesURL := os.Getenv(EnvLogsEndpoint), os.Getenv(EnvEndpoint), os.Getenv(EnvTracesEndpoint)
	if logsURL == "" && generalURL == "" && tracesURL == "" &&
		!strings.EqualFold(strings.TrimSpace(os.Getenv(EnvExporter)), "otlp") {
		return nil, fmt.Errorf("no OTLP endpoint configured (%s, or %s)", EnvEndpoint, EnvLogsEndpoint)
	}
	protocol := otlpProtocol(EnvLogsProtocol, EnvProtocol, EnvTracesProtocol)
	// The traces' endpoint and headers, when nothing more general or of the
	// logs' own is set: the collector tracing goes to.
	fromTraces := logsURL == "" && generalURL == "" && tracesURL != ""
	var headers map[string]string
	if signal(envLogsHeaders, envHeaders) == "" {
		if h := os.Getenv(envTracesHeaders); h != "" {
			headers = parseHeaders(h)
		}
	}
	var exporter sdklog.Exporter
	var err error
	switch protocol {
	case "http/protobuf":
		var opts []otlploghttp.Option
		if fromTraces {
			u := tracesURL
			if strings.HasSuffix(u, "/v1/traces") {
				u = strings.TrimSuffix(u, "/v1/traces") + "/v1/logs"
			}
			opts = append(opts, otlploghttp.WithEndpointURL(u))
		}
		if headers != nil {
			opts = append(opts, otlploghttp.WithHeaders(headers))
		}
		exporter, err = otlploghttp.New(ctx, opts...)
	case "grpc":
		var opts []otlploggrpc.Option
		if fromTraces {
			opts = append(opts, otlploggrpc.WithEndpointURL(tracesURL))
		}
		if headers != nil {
			opts = append(opts, otlploggrpc.WithHeaders(headers))
		}
		exporter, err = otlploggrpc.New(ctx, opts...)
	default:
		return nil, fmt.Errorf("%s=%s: want http/protobuf or grpc", EnvProtocol, protocol)
	}
	if err != nil {
		return nil, fmt.Errorf("the OTLP log exporter (%s): %w", protocol, err)
	}
	res, err := newResource(ctx, service, version)
	if err != nil {
		_ = exporter.Shutdown(ctx)
		return nil, fmt.Errorf("the logs resource: %w", err)
	}
	// The batch processor's schedule and queue (OTEL_BLRP_*) are the SDK's
	// own reading of the environment.
	lp := sdklog.NewLoggerProvider(sdklog.WithProcessor(sdklog.NewBatchProcessor(exporter)), sdklog.WithResource(res))
	return &Logs{lp: lp, protocol: protocol}, nil
}

// LoggerProvider returns the provider to emit records with.
func (l *Logs) LoggerProvider() log.LoggerProvider { return l.lp }

// Protocol is the OTLP protocol records are exported with.
func (l *Logs) Protocol() string { return l.protocol }

// Shutdown exports the records emitted and not exported yet, then stops the
// exporter, within ctx.
func (l *Logs) Shutdown(ctx context.Context) error { return l.lp.Shutdown(ctx) }
