package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/mcp-resume/mcp-resume/mcp"
)

// OperationBuckets are the bucket boundaries, in seconds, the OpenTelemetry
// semantic conventions for MCP recommend for mcp.server.operation.duration.
var OperationBuckets = []float64{0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300}

// Operations is the semantic conventions' histogram mcp.server.operation.duration
// in the Prometheus exposition format: mcp_server_operation_duration_seconds,
// labelled mcp_method_name, gen_ai_tool_name, error_type,
// mcp_protocol_version and network_transport (the names an OpenTelemetry
// Prometheus exporter gives them). Observe is an mcp.Options.OnOperation;
// register the Operations with Handler. Safe for concurrent use.
type Operations struct {
	hist *prometheus.HistogramVec
}

var _ prometheus.Collector = (*Operations)(nil)

// NewOperations returns an Operations.
func NewOperations() *Operations {
	return &Operations{hist: prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "mcp_server_operation_duration_seconds",
		Help:    "Duration of the MCP requests the server received (mcp.server.operation.duration): to the response, or for a resumable request or a task to the delivery of its result.",
		Buckets: OperationBuckets,
	}, []string{"mcp_method_name", "gen_ai_tool_name", "error_type", "mcp_protocol_version", "network_transport"})}
}

// Observe adds op to the histogram.
func (o *Operations) Observe(op mcp.Operation) {
	o.hist.WithLabelValues(op.Method, op.Tool, op.ErrorType, op.ProtocolVersion, op.Transport).Observe(op.Duration.Seconds())
}

// Describe and Collect make the Operations a prometheus.Collector.
func (o *Operations) Describe(ch chan<- *prometheus.Desc) { o.hist.Describe(ch) }
func (o *Operations) Collect(ch chan<- prometheus.Metric) { o.hist.Collect(ch) }

// OTelOperations returns an mcp.Options.OnOperation that records each
// operation in the histogram mcp.server.operation.duration (unit s, the
// conventions' buckets and attributes; an attribute with no value is left
// out) of a meter of mp, for an OpenTelemetry exporter.
func OTelOperations(mp metric.MeterProvider) (func(mcp.Operation), error) {
	record, err := otelDurations(mp, "github.com/mcp-resume/mcp-resume/mcp", "mcp.server.operation.duration",
		"Duration of the MCP requests the server received.")
	if err != nil {
		return nil, err
	}
	return func(op mcp.Operation) {
		record(op.Duration, []attr{
			{"mcp.method.name", op.Method}, {"gen_ai.tool.name", op.Tool}, {"error.type", op.ErrorType},
			{"mcp.protocol.version", op.ProtocolVersion}, {"network.transport", op.Transport},
		})
	}, nil
}

// attr is an attribute of an operation, by its name in the conventions.
type attr struct{ k, v string }

// otelDurations returns a function that records a duration in the histogram
// name (unit s, OperationBuckets, described as description) of the meter of
// mp named meter, with those of its attributes that have a value: the
// conventions leave an attribute with no value out.
func otelDurations(mp metric.MeterProvider, meter, name, description string) (func(d time.Duration, attrs []attr), error) {
	h, err := mp.Meter(meter).Float64Histogram(name,
		metric.WithUnit("s"),
		metric.WithDescription(description),
		metric.WithExplicitBucketBoundaries(OperationBuckets...))
	if err != nil {
		return nil, err
	}
	return func(d time.Duration, attrs []attr) {
		kvs := make([]attribute.KeyValue, 0, len(attrs))
		for _, a := range attrs {
			if a.v != "" {
				kvs = append(kvs, attribute.String(a.k, a.v))
			}
		}
		h.Record(context.Background(), d.Seconds(), metric.WithAttributes(kvs...))
	}, nil
}

// Tee returns an OnOperation (mcp.Options', of mcp.Operation; or
// client.Options' and gateway.Options', of client.Operation) that tells each
// of fs (nil ones left out) of an operation; nil when none is left.
func Tee[T any](fs ...func(T)) func(T) {
	var live []func(T)
	for _, f := range fs {
		if f != nil {
			live = append(live, f)
		}
	}
	switch len(live) {
	case 0:
		return nil
	case 1:
		return live[0]
	}
	return func(op T) {
		for _, f := range live {
			f(op)
		}
	}
}
