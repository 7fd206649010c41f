package client_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-resume/mcp-resume/internal/telemetry"
	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/mcp/client"
	"github.com/mcp-resume/mcp-resume/metrics"
	"github.com/mcp-resume/mcp-resume/testkit/otlptest"
	"github.com/mcp-resume/mcp-resume/testkit/poll"
)

// operations collects the Operations a client tells of.
type operations struct {
	mu  sync.Mutex // guards ops
	ops []client.Operation
}

func (o *operations) add(op client.Operation) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ops = append(o.ops, op)
}

// all returns every operation told of so far.
func (o *operations) all() []client.Operation {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]client.Operation(nil), o.ops...)
}

// of returns the operations of method (and tool, when not "").
func (o *operations) of(method, tool string) []client.Operation {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []client.Operation
	for _, op := range o.ops {
		if op.Method == method && (tool == "" || op.Tool == tool) {
			out = append(out, op)
		}
	}
	return out
}

// A measuring client tells of every request it sent, once it is over, as
// the conventions' mcp.client.operation.duration has it: each connection's
// initialize (the version negotiated), a call (its tool, the transport), an
// error (its code as error.type and rpc.response.status_code; a method MCP
// does not have is _OTHER), and a call cut and resumed as one operation of
// its whole life. A client that measures without tracing sends no trace
// context: the server's span of its call is a root.
func TestClientOperations(t *testing.T) {
	tp, rec := recorded()
	s := newPipeServer(t, &mcp.Options{TracerProvider: tp})
	var got operations
	opts := fastOpts()
	opts.Transport = "stdio"
	opts.OnOperation = got.add
	c := connect(t, s.dial, opts)

	if _, err := c.CallTool(t.Context(), "echo", map[string]any{"text": "hi"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Call(t.Context(), "no/such/method", nil, nil); err == nil {
		t.Fatal("no error for an unknown method")
	}
	res, err := c.CallTool(t.Context(), "countdown", map[string]any{"seconds": 0.3, "steps": 4}, &client.CallOptions{
		Progress: func(p client.Progress) {
			if p.Progress == 2 {
				go s.cutAll()
			}
		},
	})
	if err != nil || res.IsError {
		t.Fatalf("countdown: %v %+v", err, res)
	}

	inits := got.of("initialize", "")
	if len(inits) != 2 {
		t.Fatalf("%d initialize operations, want 2 (the first connection's, the reconnect's): %+v", len(inits), got.all())
	}
	for _, op := range inits {
		if op.ProtocolVersion != "2025-06-18" || op.Transport != "pipe" || op.ErrorType != "" || op.Duration <= 0 {
			t.Errorf("initialize operation %+v", op)
		}
	}
	echo := got.of("tools/call", "echo")
	if len(echo) != 1 {
		t.Fatalf("echo operations %+v", echo)
	}
	if op := echo[0]; op.ProtocolVersion != "2025-06-18" || op.Transport != "pipe" || op.Protocol != "" || op.ErrorType != "" ||
		op.StatusCode != "" || op.Prompt != "" || op.Duration <= 0 {
		t.Errorf("echo operation %+v", op)
	}
	if other := got.of("_OTHER", ""); len(other) != 1 || other[0].ErrorType != "-32601" || other[0].StatusCode != "-32601" {
		t.Errorf("the unknown method's operations %+v: want one _OTHER with error.type -32601", other)
	}
	if cd := got.of("tools/call", "countdown"); len(cd) != 1 || cd[0].ErrorType != "" || cd[0].Duration < 300*time.Millisecond {
		t.Errorf("countdown operations %+v: want one of the call's whole life (at least its 300 ms)", cd)
	}
	var srv []sdktrace.ReadOnlySpan
	poll.Until(t, 10*time.Second, "the server's span of the echo", func() bool {
		srv = find(rec.Ended(), "tools/call echo", trace.SpanKindServer)
		return len(srv) == 1
	})
	if srv[0].Parent().IsValid() {
		t.Errorf("server span's parent %v: a client that only measures sent a trace context", srv[0].Parent())
	}
}

// The client's operations reach a real OTLP receiver (metrics.OTelClientOperations
// with the binary's OTLP set-up) and /metrics (metrics.ClientOperations), with
// the conventions' name, unit and attributes.
func TestClientOperationsExported(t *testing.T) {
	rcv := otlptest.New(t)
	t.Setenv("OTEL_METRICS_EXPORTER", "otlp")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.Endpoint())
	m, err := telemetry.SetupMetrics(t.Context(), "client-under-test", "dev")
	if err != nil || m == nil {
		t.Fatalf("metrics set-up: %v %v", m, err)
	}
	defer func() { _ = m.Shutdown(context.Background()) }()
	otel, err := metrics.OTelClientOperations(m.MeterProvider())
	if err != nil {
		t.Fatal(err)
	}
	prom := metrics.NewClientOperations()
	s := newPipeServer(t, nil)
	opts := fastOpts()
	opts.Transport = "stdio"
	opts.OnOperation = metrics.Tee(prom.Observe, otel)
	c := connect(t, s.dial, opts)
	if _, err := c.CallTool(t.Context(), "echo", map[string]any{"text": "hi"}, nil); err != nil {
		t.Fatal(err)
	}

	w := httptest.NewRecorder()
	metrics.Handler(s.core.Engine(), prom).ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	for _, want := range []string{
		`mcp_client_operation_duration_seconds_count{error_type="",gen_ai_operation_name="execute_tool",gen_ai_prompt_name="",gen_ai_tool_name="echo",mcp_method_name="tools/call",mcp_protocol_version="2025-06-18",network_protocol_name="",network_transport="pipe",rpc_response_status_code=""} 1`,
		`mcp_client_operation_duration_seconds_count{error_type="",gen_ai_operation_name="",gen_ai_prompt_name="",gen_ai_tool_name="",mcp_method_name="initialize",mcp_protocol_version="2025-06-18",network_protocol_name="",network_transport="pipe",rpc_response_status_code=""} 1`,
		`mcp_client_operation_duration_seconds_bucket{error_type="",gen_ai_operation_name="execute_tool",gen_ai_prompt_name="",gen_ai_tool_name="echo",mcp_method_name="tools/call",mcp_protocol_version="2025-06-18",network_protocol_name="",network_transport="pipe",rpc_response_status_code="",le="300"} 1`,
	} {
		if !strings.Contains(w.Body.String(), want) {
			t.Errorf("/metrics has no %s", want)
		}
	}

	if err := m.Shutdown(t.Context()); err != nil { // exports what was measured
		t.Fatal(err)
	}
	var echo, init *otlptest.Point
	for _, p := range rcv.Points() {
		if p.Metric != "mcp.client.operation.duration" {
			continue
		}
		switch p.Attrs["mcp.method.name"] {
		case "tools/call":
			echo = &p
		case "initialize":
			init = &p
		}
	}
	if echo == nil || init == nil {
		t.Fatalf("received %+v: want the echo's and the initialize's operation", rcv.Points())
	}
	want := map[string]string{"mcp.method.name": "tools/call", "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "echo",
		"mcp.protocol.version": "2025-06-18", "network.transport": "pipe"}
	if echo.Unit != "s" || echo.Count != 1 || echo.Sum <= 0 || echo.Service != "client-under-test" || len(echo.Attrs) != len(want) {
		t.Errorf("the echo's data point %+v", echo)
	}
	for k, v := range want {
		if echo.Attrs[k] != v {
			t.Errorf("the echo's %s = %q, want %q (all %v)", k, echo.Attrs[k], v, echo.Attrs)
		}
	}
}
