package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/metric"

	"github.com/mcp-resume/mcp-resume/mcp/client"
)

// ClientOperations is the semantic conventions' histogram
// mcp.client.operation.duration in the Prometheus exposition format:
// mcp_client_operation_duration_seconds, in OperationBuckets, labelled
// mcp_method_name, gen_ai_operation_name, gen_ai_tool_name,
// gen_ai_prompt_name, error_type, rpc_response_status_code,
// mcp_protocol_version, network_transport and network_protocol_name (the
// names an OpenTelemetry Prometheus exporter gives them). Observe is a
// client.Options.OnOperation (and a gateway.Options.OnOperation); register
// the ClientOperations with Handler. Safe for concurrent use.
type ClientOperations struct {
	hist *prometheus.HistogramVec
}

var _ prometheus.Collector = (*ClientOperations)(nil)

// NewClientOperations returns a ClientOperations.
func NewClientOperations() *ClientOperations {
	return &ClientOperations{hist: prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "mcp_client_operation_duration_seconds",
		Help:    "Duration of the MCP requests sent to a server (mcp.client.operation.duration): to the answer, or for a call resumed across connections to its end.",
		Buckets: OperationBuckets,
	}, []string{"mcp_method_name", "gen_ai_operation_name", "gen_ai_tool_name", "gen_ai_prompt_name", "error_type",
		"rpc_response_status_code", "mcp_protocol_version", "network_transport", "network_protocol_name"})}
}

// Observe adds op to the histogram.
func (o *ClientOperations) Observe(op client.Operation) {
	o.hist.WithLabelValues(op.Method, client.OperationName(op.Method), op.Tool, op.Prompt, op.ErrorType,
		op.StatusCode, op.ProtocolVersion, op.Transport, op.Protocol).Observe(op.Duration.Seconds())
}

// Describe and Collect make the ClientOperations a prometheus.Collector.
func (o *ClientOperations) Describe(ch chan<- *prometheus.Desc) { o.hist.Describe(ch) }
func (o *ClientOperations) Collect(ch chan<- prometheus.Metric) { o.hist.Collect(ch) }

// OTelClientOperations returns a client.Options.OnOperation (and a
// gateway.Options.OnOperation) that records each operation in the histogram
// mcp.client.operation.duration (unit s, the conventions' buckets and
// attributes; an attribute with no value is left out) of a meter of mp, for
// an OpenTelemetry exporter.
func OTelClientOperations(mp metric.MeterProvider) (func(client.Operation), error) {
	record, err := otelDurations(mp, "github.com/mcp-resume/mcp-resume/mcp/client", "mcp.client.operation.duration",
		"Duration of the MCP requests sent to a server.")
	if err != nil {
		return nil, err
	}
	return func(op client.Operation) {
		record(op.Duration, []attr{
			{"mcp.method.name", op.Method}, {"gen_ai.operation.name", client.OperationName(op.Method)},
			{"gen_ai.tool.name", op.Tool}, {"gen_ai.prompt.name", op.Prompt}, {"error.type", op.ErrorType},
			{"rpc.response.status_code", op.StatusCode}, {"mcp.protocol.version", op.ProtocolVersion},
			{"network.transport", op.Transport}, {"network.protocol.name", op.Protocol},
		})
	}, nil
}
