package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/mcp-resume/mcp-resume/gateway"
	"github.com/mcp-resume/mcp-resume/internal/telemetry"
	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/mcp/e2etest"
	"github.com/mcp-resume/mcp-resume/metrics"
	"github.com/mcp-resume/mcp-resume/servers/demo"
	"github.com/mcp-resume/mcp-resume/testkit/otlptest"
	"github.com/mcp-resume/mcp-resume/testkit/poll"
)

// The client's trace, as a tracing client puts it in each request's _meta:
// one span of its own per request.
const clientTrace = "0af7651916cd43dd8448eb211c80319c"

var clientSpans = map[string]string{
	"read": "b7ad6b7169203331", "prompt": "b7ad6b7169203332", "sub": "b7ad6b7169203333", "call": "b7ad6b7169203334", "result": "b7ad6b7169203335",
}

// taskIDs records the taskId of every request the gateway sends its
// upstream over HTTP (the upstream task's id: a secret, for a scan).
type taskIDs struct {
	mu  sync.Mutex // guards ids
	ids map[string]bool
}

var taskIDPattern = regexp.MustCompile(`"taskId":"([^"]+)"`)

func (r *taskIDs) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		_ = req.Body.Close()
		if err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(b))
		r.mu.Lock()
		for _, m := range taskIDPattern.FindAllSubmatch(b, -1) {
			r.ids[string(m[1])] = true
		}
		r.mu.Unlock()
	}
	return http.DefaultTransport.RoundTrip(req)
}

func (r *taskIDs) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for id := range r.ids {
		out = append(out, id)
	}
	return out
}

// tracedUpstream is an upstream over Streamable HTTP with the demo tools
// (countdown only as a task of its own), a resource one may subscribe to
// and a prompt, tracing with tp.
func tracedUpstream(t *testing.T, tp *telemetry.Tracing) *httptest.Server {
	t.Helper()
	s := server.NewMCPServer("up", "1", server.WithToolCapabilities(true), server.WithResourceCapabilities(true, true), server.WithPromptCapabilities(true))
	demo.Add(s)
	s.AddResource(mcpgo.NewResource("test://doc", "doc"), func(context.Context, mcpgo.ReadResourceRequest) ([]mcpgo.ResourceContents, error) {
		return []mcpgo.ResourceContents{mcpgo.TextResourceContents{URI: "test://doc", Text: "the doc"}}, nil
	})
	s.AddPrompt(mcpgo.NewPrompt("greet", mcpgo.WithArgument("name")), func(_ context.Context, req mcpgo.GetPromptRequest) (*mcpgo.GetPromptResult, error) {
		return mcpgo.NewGetPromptResult("greeting", []mcpgo.PromptMessage{mcpgo.NewPromptMessage(mcpgo.RoleUser, mcpgo.NewTextContent("hello "+req.Params.Arguments["name"]))}), nil
	})
	up, err := mcp.New(s, &mcp.Options{TracerProvider: tp.TracerProvider(), Tools: map[string]mcp.Policy{"countdown": {Mode: mcp.Always, Task: mcp.TaskRequired}}})
	if err != nil {
		t.Fatal(err)
	}
	return serveHTTP(t, up)
}

// childOf returns the span named name of kind below parent, and whether
// there is one.
func childOf(spans []otlptest.Span, parent, name, kind string) (otlptest.Span, bool) {
	for _, s := range spans {
		if s.ParentSpanID == parent && s.Name == name && s.Kind == kind {
			return s, true
		}
	}
	return otlptest.Span{}, false
}

// The gateway's requests to its upstream other than tools/call, both
// exporting to a real OTLP receiver: each is a CLIENT span with the
// conventions' attributes, whose trace context goes to the upstream (the
// upstream's SERVER span of it is its child). The requests a client's
// request makes (resources/read, prompts/get, resources/subscribe, the
// tasks/get that follow the upstream's task of a tools/call) are children of
// the gateway's SERVER span of it; the gateway's own (initialize,
// server/discover, the lists it mirrors) are roots. Each is an operation of
// mcp.client.operation.duration, over OTLP and on /metrics. No task id is in
// any span.
func TestTraceUpstreamRequests(t *testing.T) {
	rcv := otlptest.New(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.Endpoint())
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "20")
	t.Setenv("OTEL_METRICS_EXPORTER", "otlp")
	tp, err := telemetry.Setup(t.Context(), "traced", "dev", func(err error) { t.Errorf("export: %v", err) })
	if err != nil || tp == nil {
		t.Fatalf("tracing set-up: %v %v", tp, err)
	}
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	mt, err := telemetry.SetupMetrics(t.Context(), "traced", "dev")
	if err != nil || mt == nil {
		t.Fatalf("metrics set-up: %v %v", mt, err)
	}
	t.Cleanup(func() { _ = mt.Shutdown(context.Background()) })
	otel, err := metrics.OTelClientOperations(mt.MeterProvider())
	if err != nil {
		t.Fatal(err)
	}
	prom := metrics.NewClientOperations()
	ids := &taskIDs{ids: map[string]bool{}}

	hs := tracedUpstream(t, tp)
	r := newRigWith(t, gateway.Options{URL: hs.URL, Client: &http.Client{Transport: ids}, TracerProvider: tp.TracerProvider(),
		OnOperation: metrics.Tee(prom.Observe, otel)},
		&mcp.Options{TracerProvider: tp.TracerProvider(), DefaultPolicy: mcp.Policy{Mode: mcp.Always, Task: mcp.AsTask}})
	c := e2etest.NewClient(t, r.dialWS(t))
	c.Initialize(`{}`)
	tp0 := func(name string) string { return `"traceparent":"00-` + clientTrace + "-" + clientSpans[name] + `-01"` }
	c.Send(`{"jsonrpc":"2.0","id":"read","method":"resources/read","params":{"uri":"test://doc","_meta":{%s}}}`, tp0("read"))
	if m, _ := c.Response(`"read"`); !strings.Contains(string(m.Result), "the doc") {
		t.Fatalf("resources/read: %s", m.Raw)
	}
	c.Send(`{"jsonrpc":"2.0","id":"prompt","method":"prompts/get","params":{"name":"greet","arguments":{"name":"Ada"},"_meta":{%s}}}`, tp0("prompt"))
	if m, _ := c.Response(`"prompt"`); !strings.Contains(string(m.Result), "hello Ada") {
		t.Fatalf("prompts/get: %s", m.Raw)
	}
	c.Send(`{"jsonrpc":"2.0","id":"sub","method":"resources/subscribe","params":{"uri":"test://doc","_meta":{%s}}}`, tp0("sub"))
	if m, _ := c.Response(`"sub"`); m.Error != nil {
		t.Fatalf("resources/subscribe: %s", m.Raw)
	}
	c.Send(`{"jsonrpc":"2.0","id":"call","method":"tools/call","params":{"name":"countdown","arguments":{"seconds":0.2,"steps":2},"task":{},"_meta":{%s}}}`, tp0("call"))
	created, _ := c.Response(`"call"`)
	var ct struct {
		Task struct{ TaskID string } `json:"task"`
	}
	if err := json.Unmarshal(created.Result, &ct); err != nil || ct.Task.TaskID == "" {
		t.Fatalf("the gateway's task: %s", created.Raw)
	}
	c.Send(`{"jsonrpc":"2.0","id":"result","method":"tasks/result","params":{"taskId":%q,"_meta":{%s}}}`, ct.Task.TaskID, tp0("result"))
	if m, _ := c.Response(`"result"`); e2etest.Text(m) != "countdown done: 2 of 2 steps" {
		t.Fatalf("the task's result: %s", m.Raw)
	}

	type chain struct{ server, client, upstream otlptest.Span }
	want := map[string]string{"read": "resources/read", "prompt": "prompts/get greet", "sub": "resources/subscribe"}
	var got map[string]chain
	var call chain
	var polls []otlptest.Span
	spans := rcv.Wait(t, 20*time.Second, "each request's spans: the gateway's SERVER span, its CLIENT span, the upstream's SERVER span", func(spans []otlptest.Span) bool {
		got = map[string]chain{}
		for key, name := range want {
			var ch chain
			var ok bool
			if ch.server, ok = childOf(spans, clientSpans[key], name, "Server"); !ok {
				return false
			}
			if ch.client, ok = childOf(spans, ch.server.SpanID, name, "Client"); !ok {
				return false
			}
			if ch.upstream, ok = childOf(spans, ch.client.SpanID, name, "Server"); !ok {
				return false
			}
			got[key] = ch
		}
		var ok bool
		if call.server, ok = childOf(spans, clientSpans["call"], "tools/call countdown", "Server"); !ok {
			return false
		}
		if call.client, ok = childOf(spans, call.server.SpanID, "tools/call countdown", "Client"); !ok {
			return false
		}
		polls = nil
		for _, s := range spans {
			if s.ParentSpanID == call.server.SpanID && s.Kind == "Client" && strings.HasPrefix(s.Name, "tasks/") {
				polls = append(polls, s)
			}
		}
		return len(polls) > 0 && slices.ContainsFunc(spans, func(s otlptest.Span) bool {
			return s.Name == polls[0].Name && s.Kind == "Server" && s.TraceID == clientTrace
		})
	})
	// prompts/get goes in the 2026-07-28 era to an upstream that speaks it
	// (its questions may be its answer); the rest in the session's.
	era := map[string]string{"read": "2025-11-25", "prompt": "2026-07-28", "sub": "2025-11-25"}
	for key, ch := range got {
		for k, want := range map[string]string{"network.transport": "tcp", "network.protocol.name": "http", "mcp.protocol.version": era[key]} {
			if ch.client.Attrs[k] != want {
				t.Errorf("%s: the CLIENT span's %s = %q, want %q (all %v)", key, k, ch.client.Attrs[k], want, ch.client.Attrs)
			}
		}
		if id := ch.client.Attrs["jsonrpc.request.id"]; id == "" || id != ch.upstream.Attrs["jsonrpc.request.id"] {
			t.Errorf("%s: the CLIENT span's jsonrpc.request.id %q, the upstream's %q", key, id, ch.upstream.Attrs["jsonrpc.request.id"])
		}
		if ch.client.Attrs["error.type"] != "" || ch.client.StatusCode != "Unset" {
			t.Errorf("%s: the CLIENT span of a request answered: %v %s", key, ch.client.Attrs, ch.client.StatusCode)
		}
	}
	if a := got["read"].client.Attrs; a["mcp.method.name"] != "resources/read" || a["mcp.resource.uri"] != "test://doc" {
		t.Errorf("resources/read's CLIENT span: %v", a)
	}
	if a := got["prompt"].client.Attrs; a["mcp.method.name"] != "prompts/get" || a["gen_ai.prompt.name"] != "greet" {
		t.Errorf("prompts/get's CLIENT span: %v", a)
	}
	allowed := []string{"mcp.method.name", "jsonrpc.request.id", "mcp.protocol.version", "network.transport", "network.protocol.name"}
	for _, s := range polls {
		for k := range s.Attrs {
			if !slices.Contains(allowed, k) {
				t.Errorf("the CLIENT span %s has %s=%q: a task's request has only the attributes of every request", s.Name, k, s.Attrs[k])
			}
		}
		if s.Attrs["mcp.protocol.version"] != "2026-07-28" {
			t.Errorf("the CLIENT span %s: %v, want it in the 2026-07-28 era", s.Name, s.Attrs)
		}
	}
	for _, name := range []string{"initialize", "server/discover", "tools/list", "resources/list", "prompts/list"} {
		var root otlptest.Span
		for _, s := range spans {
			if s.Name == name && s.Kind == "Client" && s.ParentSpanID == "" {
				root = s
			}
		}
		if root.SpanID == "" {
			t.Errorf("no CLIENT span %s of the gateway's own as a root (received %v)", name, otlptest.Names(spans))
			continue
		}
		if name == "initialize" {
			if _, ok := childOf(spans, root.SpanID, "initialize", "Server"); !ok || root.Attrs["mcp.protocol.version"] != "2025-11-25" {
				t.Errorf("the gateway's initialize %v: want the version negotiated and the upstream's SERVER span below it", root.Attrs)
			}
		}
	}
	raw := rcv.Raw()
	secrets := append(ids.all(), ct.Task.TaskID)
	if len(secrets) < 2 {
		t.Fatalf("task ids %v: want the gateway's and the upstream's", secrets)
	}
	for _, id := range secrets {
		if bytes.Contains(raw, []byte(id)) {
			t.Errorf("the task id %s is in what was exported", id)
		}
	}

	w := httptest.NewRecorder()
	metrics.Handler(r.core.Engine(), prom).ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	for _, want := range []string{
		`mcp_client_operation_duration_seconds_count{error_type="",gen_ai_operation_name="",gen_ai_prompt_name="greet",gen_ai_tool_name="",mcp_method_name="prompts/get",mcp_protocol_version="2026-07-28",network_protocol_name="http",network_transport="tcp",rpc_response_status_code=""} 1`,
		`mcp_client_operation_duration_seconds_count{error_type="",gen_ai_operation_name="",gen_ai_prompt_name="",gen_ai_tool_name="",mcp_method_name="resources/read",mcp_protocol_version="2025-11-25",network_protocol_name="http",network_transport="tcp",rpc_response_status_code=""} 1`,
		`mcp_client_operation_duration_seconds_count{error_type="",gen_ai_operation_name="execute_tool",gen_ai_prompt_name="",gen_ai_tool_name="countdown",mcp_method_name="tools/call",mcp_protocol_version="2026-07-28",network_protocol_name="http",network_transport="tcp",rpc_response_status_code=""} 1`,
		`mcp_client_operation_duration_seconds_count{error_type="",gen_ai_operation_name="",gen_ai_prompt_name="",gen_ai_tool_name="",mcp_method_name="initialize",mcp_protocol_version="2025-11-25",network_protocol_name="http",network_transport="tcp",rpc_response_status_code=""} 1`,
	} {
		if !strings.Contains(w.Body.String(), want) {
			t.Errorf("/metrics has no %s", want)
		}
	}
	if !strings.Contains(w.Body.String(), `mcp_method_name="tasks/get"`) && !strings.Contains(w.Body.String(), `mcp_method_name="tasks/result"`) {
		t.Error("/metrics has no operation of the upstream task's requests")
	}

	if err := mt.Shutdown(t.Context()); err != nil { // exports what was measured
		t.Fatal(err)
	}
	methods := map[string]otlptest.Point{}
	for _, p := range rcv.Points() {
		if p.Metric == "mcp.client.operation.duration" {
			methods[p.Attrs["mcp.method.name"]] = p
		}
	}
	for _, m := range []string{"initialize", "server/discover", "tools/list", "resources/read", "prompts/get", "resources/subscribe", "tools/call", polls[0].Attrs["mcp.method.name"]} {
		p, ok := methods[m]
		if !ok {
			t.Errorf("no data point of %s over OTLP (received %v)", m, methods)
			continue
		}
		if p.Unit != "s" || p.Count == 0 || p.Service != "traced" || p.Attrs["network.transport"] != "tcp" || p.Attrs["network.protocol.name"] != "http" {
			t.Errorf("the data point of %s: %+v", m, p)
		}
		for _, v := range p.Attrs {
			for _, id := range secrets {
				if strings.Contains(v, id) {
					t.Errorf("the data point of %s holds the task id %s", m, id)
				}
			}
		}
	}
	if p := methods["tools/call"]; p.Attrs["gen_ai.tool.name"] != "countdown" || p.Attrs["gen_ai.operation.name"] != "execute_tool" {
		t.Errorf("the tools/call data point %+v", p)
	}
}

// Without a TracerProvider of the gateway's, a request made for a client's
// request passes on the trace context of the core's SERVER span of it: the
// upstream's span of a resources/read is that span's child. Without tracing
// anywhere, nothing is sent for it (the upstream's span is a root).
func TestTraceUpstreamPassedOn(t *testing.T) {
	for _, traced := range []bool{true, false} {
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
		s := server.NewMCPServer("up", "1", server.WithToolCapabilities(false), server.WithResourceCapabilities(false, true))
		s.AddResource(mcpgo.NewResource("test://doc", "doc"), func(context.Context, mcpgo.ReadResourceRequest) ([]mcpgo.ResourceContents, error) {
			return []mcpgo.ResourceContents{mcpgo.TextResourceContents{URI: "test://doc", Text: "the doc"}}, nil
		})
		core, err := mcp.New(s, &mcp.Options{TracerProvider: tp})
		if err != nil {
			t.Fatal(err)
		}
		hs := serveHTTP(t, core)
		var coreOpts mcp.Options
		if traced {
			coreOpts.TracerProvider = tp
		}
		r := newRigWith(t, gateway.Options{URL: hs.URL}, &coreOpts)
		c := e2etest.NewClient(t, r.dialWS(t))
		c.Initialize(`{}`)
		c.Send(`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"test://doc"}}`)
		if m, _ := c.Response(`1`); !strings.Contains(string(m.Result), "the doc") {
			t.Fatalf("resources/read: %s", m.Raw)
		}
		want := 1 // the upstream's
		if traced {
			want = 2 // and the gateway's core's
		}
		var gw, up sdktrace.ReadOnlySpan
		poll.Until(t, 10*time.Second, "the spans of the read", func() bool {
			n := 0
			for _, sp := range rec.Ended() {
				if sp.Name() != "resources/read" {
					continue
				}
				n++
				if sp.Parent().IsValid() || !traced {
					up = sp
				} else {
					gw = sp
				}
			}
			return n == want
		})
		switch {
		case !traced && up.Parent().IsValid():
			t.Errorf("untraced: the upstream's span of the read has parent %v, want a root", up.Parent())
		case traced && (gw == nil || up == nil || up.Parent().SpanID() != gw.SpanContext().SpanID() || !up.Parent().IsRemote()):
			t.Errorf("the upstream's span of the read: want it below the core's span of it")
		}
	}
}
