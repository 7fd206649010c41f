package metrics_test

import (
	"context"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/metrics"
	"github.com/mcp-resume/mcp-resume/resume/memstore"
)

// Operations is mcp_server_operation_duration_seconds on /metrics, by the
// conventions' attributes (their Prometheus names), in the conventions'
// buckets.
func TestOperationsPrometheus(t *testing.T) {
	e := mustNew(t, memstore.New())
	defer e.Close()
	ops := metrics.NewOperations()
	ops.Observe(mcp.Operation{Method: "tools/call", Tool: "echo", ProtocolVersion: "2025-06-18", Transport: "tcp", Duration: 30 * time.Millisecond})
	ops.Observe(mcp.Operation{Method: "tools/call", Tool: "echo", ProtocolVersion: "2025-06-18", Transport: "tcp", Duration: 3 * time.Second})
	ops.Observe(mcp.Operation{Method: "tools/call", Tool: "countdown", ErrorType: "tool_error", Transport: "pipe", Duration: time.Millisecond})
	m := scrape(t, metrics.Handler(e, ops))
	echo := `{error_type="",gen_ai_tool_name="echo",mcp_method_name="tools/call",mcp_protocol_version="2025-06-18",network_transport="tcp"}`
	for k, want := range map[string]float64{
		"mcp_server_operation_duration_seconds_count" + echo: 2,
		"mcp_server_operation_duration_seconds_sum" + echo:   3.03,
		`mcp_server_operation_duration_seconds_bucket{error_type="",gen_ai_tool_name="echo",mcp_method_name="tools/call",mcp_protocol_version="2025-06-18",network_transport="tcp",le="0.05"}`: 1,
		`mcp_server_operation_duration_seconds_count{error_type="tool_error",gen_ai_tool_name="countdown",mcp_method_name="tools/call",mcp_protocol_version="",network_transport="pipe"}`:      1,
	} {
		if got, ok := m[k]; !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", k, got, ok, want)
		}
	}
}

// OTelOperations records mcp.server.operation.duration in seconds, with the
// conventions' attributes (those with a value) and buckets.
func TestOperationsOTel(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	record, err := metrics.OTelOperations(mp)
	if err != nil {
		t.Fatal(err)
	}
	record(mcp.Operation{Method: "tools/call", Tool: "echo", Transport: "tcp", ProtocolVersion: "2026-07-28", Duration: 25 * time.Millisecond})
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	if len(rm.ScopeMetrics) != 1 || len(rm.ScopeMetrics[0].Metrics) != 1 {
		t.Fatalf("collected %+v", rm)
	}
	got := rm.ScopeMetrics[0].Metrics[0]
	h, ok := got.Data.(metricdata.Histogram[float64])
	if got.Name != "mcp.server.operation.duration" || got.Unit != "s" || !ok || len(h.DataPoints) != 1 {
		t.Fatalf("metric %+v", got)
	}
	dp := h.DataPoints[0]
	if dp.Count != 1 || dp.Sum != 0.025 || len(dp.Bounds) != len(metrics.OperationBuckets) || dp.Attributes.Len() != 4 {
		t.Errorf("data point %+v", dp)
	}
	if v, _ := dp.Attributes.Value("gen_ai.tool.name"); v.AsString() != "echo" {
		t.Errorf("attributes %v", dp.Attributes.ToSlice())
	}
	if _, has := dp.Attributes.Value("error.type"); has {
		t.Errorf("an empty error.type is recorded: %v", dp.Attributes.ToSlice())
	}
}
