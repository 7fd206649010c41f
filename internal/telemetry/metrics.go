package telemetry

import (
	"context"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// The environment variables SetupMetrics reads itself; the exporters read the
// rest of OTEL_EXPORTER_OTLP_* (OTEL_EXPORTER_OTLP_METRICS_ENDPOINT or
// OTEL_EXPORTER_OTLP_ENDPOINT, headers, timeout, ...), the SDK
// OTEL_METRIC_EXPORT_INTERVAL and OTEL_METRIC_EXPORT_TIMEOUT.
const (
	EnvMetricsExporter = "OTEL_METRICS_EXPORTER"
	EnvMetricsProtocol = "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL"
)

// Metrics is the metrics export SetupMetrics configured. Its methods are safe
// for concurrent use; a nil *Metrics is none.
type Metrics struct {
	mp       *sdkmetric.MeterProvider
	protocol string
}

// SetupMetrics configures the export of metrics over OTLP from the
// environment, for the service named service (OTEL_SERVICE_NAME overrides
// it) at version. It is on only with OTEL_METRICS_EXPORTER=otlp (and not
// OTEL_SDK_DISABLED=true): the binary serves its metrics on /metrics in any
// case. Off, it returns nil and nil: no provider, no exporter, no goroutine.
// The protocol is OTEL_EXPORTER_OTLP_METRICS_PROTOCOL, else
// OTEL_EXPORTER_OTLP_PROTOCOL: http/protobuf (the default) or grpc.
func SetupMetrics(ctx context.Context, service, version string) (*Metrics, error) {
	if sdkDisabled() {
		return nil, nil
	}
	switch exp := strings.ToLower(strings.TrimSpace(os.Getenv(EnvMetricsExporter))); exp {
	case "", "none":
		return nil, nil
	case "otlp":
	default:
		return nil, fmt.Errorf("%s=%s: only otlp (or none) is built in", EnvMetricsExporter, exp)
	}
	protocol := otlpProtocol(EnvMetricsProtocol, EnvProtocol)
	var exporter sdkmetric.Exporter
	var err error
	switch protocol {
	case "http/protobuf":
		exporter, err = otlpmetrichttp.New(ctx)
	case "grpc":
		exporter, err = otlpmetricgrpc.New(ctx)
	default:
		return nil, fmt.Errorf("%s=%s: want http/protobuf or grpc", EnvProtocol, protocol)
	}
	if err != nil {
		return nil, fmt.Errorf("the OTLP metric exporter (%s): %w", protocol, err)
	}
	res, err := newResource(ctx, service, version)
	if err != nil {
		_ = exporter.Shutdown(ctx)
		return nil, fmt.Errorf("the metrics resource: %w", err)
	}
	// The interval (OTEL_METRIC_EXPORT_INTERVAL) is the SDK's own reading of
	// the environment.
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exporter)), sdkmetric.WithResource(res))
	return &Metrics{mp: mp, protocol: protocol}, nil
}

// MeterProvider returns the provider to measure with; nil when metrics are
// not exported.
func (m *Metrics) MeterProvider() metric.MeterProvider {
	if m == nil {
		return nil
	}
	return m.mp
}

// Protocol is the OTLP protocol metrics are exported with; "" when off.
func (m *Metrics) Protocol() string {
	if m == nil {
		return ""
	}
	return m.protocol
}

// Shutdown exports what was measured since the last export, then stops the
// exporter, within ctx. Nothing for a nil Metrics.
func (m *Metrics) Shutdown(ctx context.Context) error {
	if m == nil {
		return nil
	}
	return m.mp.Shutdown(ctx)
}
