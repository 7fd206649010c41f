package metrics_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/mcp-resume/mcp-resume/mcp/client"
	"github.com/mcp-resume/mcp-resume/metrics"
	"github.com/mcp-resume/mcp-resume/resume/memstore"
)

// ClientOperations is mcp_client_operation_duration_seconds on /metrics, by
// the conventions' attributes (their Prometheus names; gen_ai_operation_name
// from the method), in the conventions' buckets.
func TestClientOperationsPrometheus(t *testing.T) {
	e := mustNew(t, memstore.New())
	defer e.Close()
	ops := metrics.NewClientOperations()
	ops.Observe(client.Operation{Method: "tools/call", Tool: "echo", ProtocolVersion: "2025-11-25", Transport: "tcp", Protocol: "http", Duration: 30 * time.Millisecond})
	ops.Observe(client.Operation{Method: "tools/call", Tool: "echo", ProtocolVersion: "2025-11-25", Transport: "tcp", Protocol: "http", Duration: 3 * time.Second})
	ops.Observe(client.Operation{Method: "prompts/get", Prompt: "greet", ErrorType: "-32602", StatusCode: "-32602", Transport: "pipe", Duration: time.Millisecond})
	m := scrape(t, metrics.Handler(e, ops))
	echo := `{error_type="",gen_ai_operation_name="execute_tool",gen_ai_prompt_name="",gen_ai_tool_name="echo",mcp_method_name="tools/call",mcp_protocol_version="2025-11-25",network_protocol_name="http",network_transport="tcp",rpc_response_status_code=""}`
	for k, want := range map[string]float64{
		"mcp_client_operation_duration_seconds_count" + echo: 2,
		"mcp_client_operation_duration_seconds_sum" + echo:   3.03,
		`mcp_client_operation_duration_seconds_bucket{error_type="",gen_ai_operation_name="execute_tool",gen_ai_prompt_name="",gen_ai_tool_name="echo",mcp_method_name="tools/call",mcp_protocol_version="2025-11-25",network_protocol_name="http",network_transport="tcp",rpc_response_status_code="",le="0.05"}`: 1,
		`mcp_client_operation_duration_seconds_count{error_type="-32602",gen_ai_operation_name="",gen_ai_prompt_name="greet",gen_ai_tool_name="",mcp_method_name="prompts/get",mcp_protocol_version="",network_protocol_name="",network_transport="pipe",rpc_response_status_code="-32602"}`:                       1,
	} {
		if got, ok := m[k]; !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", k, got, ok, want)
		}
	}
}

// OTelClientOperations records mcp.client.operation.duration in seconds,
// with the conventions' attributes (those with a value) and buckets.
func TestClientOperationsOTel(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	record, err := metrics.OTelClientOperations(mp)
	if err != nil {
		t.Fatal(err)
	}
	record(client.Operation{Method: "tools/call", Tool: "echo", ErrorType: "tool_error", Transport: "tcp", Protocol: "websocket",
		ProtocolVersion: "2026-07-28", Duration: 25 * time.Millisecond})
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	if len(rm.ScopeMetrics) != 1 || len(rm.ScopeMetrics[0].Metrics) != 1 {
		t.Fatalf("collected %+v", rm)
	}
	got := rm.ScopeMetrics[0].Metrics[0]
	h, ok := got.Data.(metricdata.Histogram[float64])
	if got.Name != "mcp.client.operation.duration" || got.Unit != "s" || !ok || len(h.DataPoints) != 1 {
		t.Fatalf("metric %+v", got)
	}
	dp := h.DataPoints[0]
	if dp.Count != 1 || dp.Sum != 0.025 || len(dp.Bounds) != len(metrics.OperationBuckets) || dp.Attributes.Len() != 7 {
		t.Errorf("data point %+v", dp)
	}
	for k, want := range map[string]string{"mcp.method.name": "tools/call", "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "echo",
		"error.type": "tool_error", "mcp.protocol.version": "2026-07-28", "network.transport": "tcp", "network.protocol.name": "websocket"} {
		if v, _ := dp.Attributes.Value(attribute.Key(k)); v.AsString() != want {
			t.Errorf("%s = %q, want %q (all %v)", k, v.AsString(), want, dp.Attributes.ToSlice())
		}
	}
	if _, has := dp.Attributes.Value("rpc.response.status_code"); has {
		t.Errorf("an empty rpc.response.status_code is recorded: %v", dp.Attributes.ToSlice())
	}
}

// Tee tells each of its functions, nil ones left out, of either kind of
// operation; nil when none is left.
func TestTee(t *testing.T) {
	var a, b []string
	f := metrics.Tee(func(op client.Operation) { a = append(a, op.Method) }, nil, func(op client.Operation) { b = append(b, op.Method) })
	f(client.Operation{Method: "initialize"})
	if len(a) != 1 || len(b) != 1 {
		t.Errorf("told %v and %v, want each once", a, b)
	}
	var none func(client.Operation)
	if metrics.Tee(none, nil) != nil {
		t.Error("a Tee of nothing is not nil")
	}
}
