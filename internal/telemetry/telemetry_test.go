package telemetry

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"

	"github.com/mcp-resume/mcp-resume/testkit/otlptest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// clearEnv unsets every variable Setup and the SDK read, for the test.
func clearEnv(t *testing.T) {
	for _, k := range []string{EnvDisabled, EnvExporter, EnvEndpoint, EnvTracesEndpoint, EnvProtocol, EnvTracesProtocol,
		"OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES", "OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG", "OTEL_BSP_SCHEDULE_DELAY",
		EnvMetricsExporter, EnvMetricsProtocol, "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "OTEL_METRIC_EXPORT_INTERVAL"} {
		t.Setenv(k, "")
	}
}

// emit makes one span on tr's provider and returns its trace id.
func emit(t *testing.T, tr *Tracing, name string) trace.SpanContext {
	t.Helper()
	_, span := tr.TracerProvider().Tracer("test").Start(context.Background(), name)
	span.End()
	return span.SpanContext()
}

func shutdown(t *testing.T, tr *Tracing) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tr.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}

// Nothing configured, or tracing turned off: no provider, no exporter.
func TestOff(t *testing.T) {
	for name, env := range map[string]map[string]string{
		"nothing":                 {},
		"disabled":                {EnvDisabled: "true", EnvEndpoint: "http://127.0.0.1:1"},
		"disabled, any case":      {EnvDisabled: " TRUE ", EnvExporter: "otlp"},
		"exporter none":           {EnvExporter: "none", EnvTracesEndpoint: "http://127.0.0.1:1/v1/traces"},
		"only a protocol":         {EnvProtocol: "grpc"},
		"only a service name":     {"OTEL_SERVICE_NAME": "x"},
		"disabled false, nothing": {EnvDisabled: "false"},
	} {
		t.Run(name, func(t *testing.T) {
			clearEnv(t)
			for k, v := range env {
				t.Setenv(k, v)
			}
			tr, err := Setup(context.Background(), "mcp-resume", "v", nil)
			if err != nil || tr != nil {
				t.Fatalf("Setup = %v, %v; want tracing off without an error", tr, err)
			}
			if tr.TracerProvider() != nil || tr.Protocol() != "" || tr.Shutdown(context.Background()) != nil {
				t.Error("a nil Tracing is not tracing off")
			}
		})
	}
}

func TestUnsupported(t *testing.T) {
	for name, env := range map[string]map[string]string{
		"zipkin":          {EnvExporter: "zipkin"},
		"http/json":       {EnvEndpoint: "http://127.0.0.1:1", EnvProtocol: "http/json"},
		"traces protocol": {EnvEndpoint: "http://127.0.0.1:1", EnvProtocol: "grpc", EnvTracesProtocol: "thrift"},
	} {
		t.Run(name, func(t *testing.T) {
			clearEnv(t)
			for k, v := range env {
				t.Setenv(k, v)
			}
			if tr, err := Setup(context.Background(), "mcp-resume", "v", nil); err == nil || tr != nil {
				t.Fatalf("Setup = %v, %v; want an error and tracing off", tr, err)
			}
		})
	}
}

// OTLP over HTTP by default, to OTEL_EXPORTER_OTLP_ENDPOINT's /v1/traces, with
// the resource from the environment over the defaults; Shutdown exports what a
// schedule of an hour (OTEL_BSP_SCHEDULE_DELAY, read by the SDK) still holds.
func TestHTTPShutdownFlushes(t *testing.T) {
	clearEnv(t)
	rcv := otlptest.New(t)
	t.Setenv(EnvEndpoint, rcv.Endpoint())
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment.name=test")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "3600000")
	tr, err := Setup(context.Background(), "mcp-resume", "v1.2.3", nil)
	if err != nil || tr == nil {
		t.Fatalf("Setup = %v, %v", tr, err)
	}
	if tr.Protocol() != "http/protobuf" {
		t.Errorf("protocol %q, want http/protobuf", tr.Protocol())
	}
	sc := emit(t, tr, "one")
	if n := len(rcv.Spans()); n != 0 {
		t.Fatalf("%d spans exported before the schedule or Shutdown", n)
	}
	shutdown(t, tr)
	spans := rcv.Spans()
	if len(spans) != 1 {
		t.Fatalf("received %v, want the one span", otlptest.Names(spans))
	}
	s := spans[0]
	if s.Name != "one" || s.TraceID != sc.TraceID().String() || s.Service != "mcp-resume" ||
		s.Resource["service.version"] != "v1.2.3" || s.Resource["deployment.environment.name"] != "test" {
		t.Errorf("span %+v", s)
	}
}

// OTEL_SERVICE_NAME names the service; OTEL_BSP_SCHEDULE_DELAY exports without
// a Shutdown; OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is used as it is.
func TestTracesEndpointAndSchedule(t *testing.T) {
	clearEnv(t)
	rcv := otlptest.New(t)
	t.Setenv(EnvEndpoint, "http://127.0.0.1:1") // the traces' own endpoint wins
	t.Setenv(EnvTracesEndpoint, rcv.Endpoint()+"/v1/traces")
	t.Setenv("OTEL_SERVICE_NAME", "edge-7")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "10")
	tr, err := Setup(context.Background(), "mcp-resume", "v", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer shutdown(t, tr)
	emit(t, tr, "scheduled")
	spans := rcv.Wait(t, 10*time.Second, "the span, on the batch schedule", func(s []otlptest.Span) bool { return len(s) == 1 })
	if spans[0].Service != "edge-7" {
		t.Errorf("service %q, want OTEL_SERVICE_NAME's", spans[0].Service)
	}
}

// OTEL_EXPORTER_OTLP_PROTOCOL=grpc exports over gRPC.
func TestGRPC(t *testing.T) {
	clearEnv(t)
	rcv := otlptest.NewGRPC(t)
	t.Setenv(EnvEndpoint, rcv.Endpoint())
	t.Setenv(EnvProtocol, "grpc")
	tr, err := Setup(context.Background(), "mcp-resume", "v", nil)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Protocol() != "grpc" {
		t.Errorf("protocol %q", tr.Protocol())
	}
	emit(t, tr, "over grpc")
	shutdown(t, tr)
	if spans := rcv.Spans(); len(spans) != 1 || spans[0].Name != "over grpc" {
		t.Fatalf("received %v", otlptest.Names(spans))
	}
}

// OTEL_TRACES_SAMPLER, as the SDK reads it: always_off records nothing.
func TestSampler(t *testing.T) {
	clearEnv(t)
	rcv := otlptest.New(t)
	t.Setenv(EnvEndpoint, rcv.Endpoint())
	t.Setenv("OTEL_TRACES_SAMPLER", "always_off")
	tr, err := Setup(context.Background(), "mcp-resume", "v", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, span := tr.TracerProvider().Tracer("test").Start(context.Background(), "dropped")
	if span.IsRecording() {
		t.Error("always_off: the span records")
	}
	span.End()
	shutdown(t, tr)
	if spans := rcv.Spans(); len(spans) != 0 {
		t.Fatalf("always_off exported %v", otlptest.Names(spans))
	}
}

// Metrics are exported only with OTEL_METRICS_EXPORTER=otlp: an endpoint
// alone (which turns tracing on) does not, nor OTEL_SDK_DISABLED.
func TestMetricsOff(t *testing.T) {
	for name, env := range map[string]map[string]string{
		"nothing":       {},
		"endpoint only": {EnvEndpoint: "http://127.0.0.1:1"},
		"none":          {EnvMetricsExporter: "none", EnvEndpoint: "http://127.0.0.1:1"},
		"disabled":      {EnvMetricsExporter: "otlp", EnvDisabled: "true"},
	} {
		t.Run(name, func(t *testing.T) {
			clearEnv(t)
			for k, v := range env {
				t.Setenv(k, v)
			}
			m, err := SetupMetrics(context.Background(), "mcp-resume", "v")
			if err != nil || m != nil || m.MeterProvider() != nil || m.Shutdown(context.Background()) != nil {
				t.Fatalf("SetupMetrics = %v, %v; want off", m, err)
			}
		})
	}
	clearEnv(t)
	t.Setenv(EnvMetricsExporter, "prometheus")
	if m, err := SetupMetrics(context.Background(), "mcp-resume", "v"); err == nil || m != nil {
		t.Fatalf("OTEL_METRICS_EXPORTER=prometheus: %v, %v; want an error", m, err)
	}
}

// OTEL_METRICS_EXPORTER=otlp exports over HTTP to the endpoint's /v1/metrics,
// with the resource; Shutdown exports what was measured since the last
// export.
func TestMetricsHTTP(t *testing.T) {
	clearEnv(t)
	rcv := otlptest.New(t)
	t.Setenv(EnvMetricsExporter, "otlp")
	t.Setenv(EnvEndpoint, rcv.Endpoint())
	t.Setenv("OTEL_METRIC_EXPORT_INTERVAL", "3600000")
	m, err := SetupMetrics(context.Background(), "mcp-resume", "v9")
	if err != nil || m == nil || m.Protocol() != "http/protobuf" {
		t.Fatalf("SetupMetrics = %v, %v", m, err)
	}
	h, err := m.MeterProvider().Meter("test").Float64Histogram("test.duration", metric.WithUnit("s"))
	if err != nil {
		t.Fatal(err)
	}
	h.Record(context.Background(), 0.5)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	p := rcv.Points()
	if len(p) != 1 || p[0].Metric != "test.duration" || p[0].Count != 1 || p[0].Sum != 0.5 || p[0].Service != "mcp-resume" {
		t.Fatalf("received %+v", p)
	}
}
