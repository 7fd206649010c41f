package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/mcp-resume/mcp-resume/mcp/client"
	"github.com/mcp-resume/mcp-resume/mcp/e2etest"
	"github.com/mcp-resume/mcp-resume/testkit/otlptest"
	"github.com/mcp-resume/mcp-resume/transport"
	httptransport "github.com/mcp-resume/mcp-resume/transport/http"
	"github.com/mcp-resume/mcp-resume/transport/ws"
)

// The client's span, as a tracing client puts it in a call's _meta.
const (
	clientTraceID = "0af7651916cd43dd8448eb211c80319c"
	clientSpanID  = "b7ad6b7169203331"
)

// The first done-when, on the binary: `serve` exporting to a real
// OTLP receiver over HTTP, a call with a traceparent in _meta, dropped after
// two progress steps and resumed from a new session, gives a SERVER span
// `tools/call countdown` below the client's span, with the conventions'
// attributes, and a requests/resume span in the same trace; neither the resume
// token, nor a call key, nor the API key is in anything exported.
func TestTraceResumedCall(t *testing.T) {
	rcv := otlptest.New(t)
	const apiKey = "k-0123456789abcdef0123456789abcdef"
	t.Setenv(envServerKeys, "alice:"+apiKey)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.Endpoint())
	t.Setenv("OTEL_SERVICE_NAME", "mcp-resume-under-test")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "20")
	srv := spawnNet(t, "serve --http 127.0.0.1:0", 1)[0]
	dial := func() transport.Conn {
		conn, err := ws.Dial(t.Context(), srv.WS, &ws.DialOptions{Header: http.Header{"Authorization": {"Bearer " + apiKey}}})
		if err != nil {
			t.Fatal(err)
		}
		return conn
	}

	a := e2etest.NewClient(t, dial())
	a.Initialize(`{"resumableRequests":{}}`)
	a.Send(`{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"countdown","arguments":{"seconds":1,"steps":10},"_meta":{"progressToken":"p","traceparent":"00-%s-%s-01"}}}`, clientTraceID, clientSpanID)
	pol := e2etest.PolicyOf(t, a.Next())
	a.Until(func(m e2etest.Msg) bool { return e2etest.Progress(m) == 2 })
	a.Close()

	b := e2etest.NewClient(t, dial())
	b.Initialize(`{"resumableRequests":{}}`)
	b.Resume(`11`, pol.ResumeToken)
	if resp, _ := b.Response(`11`); e2etest.Text(resp) != "countdown done: 10 of 10 steps" {
		t.Fatalf("result %s", resp.Raw)
	}
	const callKey = "a-call-key-of-the-client-0123456789"
	b.Send(`{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},"_meta":{"io.mcp-resume/key":%q}}}`, callKey)
	b.Response(`12`)

	spans := rcv.Wait(t, 20*time.Second, "the call's span and the resume's", func(s []otlptest.Span) bool {
		_, call := otlptest.Find(s, "tools/call countdown")
		_, res := otlptest.Find(s, "requests/resume")
		_, echo := otlptest.Find(s, "tools/call echo")
		return call && res && echo
	})
	call, _ := otlptest.Find(spans, "tools/call countdown")
	if call.Kind != "Server" || call.TraceID != clientTraceID || call.ParentSpanID != clientSpanID || call.Service != "mcp-resume-under-test" {
		t.Errorf("call span %+v: want a SERVER span of service mcp-resume-under-test below the client's %s/%s", call, clientTraceID, clientSpanID)
	}
	for k, want := range map[string]string{
		"mcp.method.name": "tools/call", "gen_ai.tool.name": "countdown", "gen_ai.operation.name": "execute_tool",
		"jsonrpc.request.id": "11", "mcp.protocol.version": "2025-06-18", "network.transport": "tcp", "network.protocol.name": "websocket",
		"client.address": "127.0.0.1",
	} {
		if call.Attrs[k] != want {
			t.Errorf("call span: %s = %q, want %q (all: %v)", k, call.Attrs[k], want, call.Attrs)
		}
	}
	if call.Attrs["mcp.session.id"] == "" || call.Attrs["error.type"] != "" || call.StatusCode != "Unset" {
		t.Errorf("call span: attributes %v, status %s", call.Attrs, call.StatusCode)
	}
	var events []string
	for _, e := range call.Events {
		events = append(events, e.Name)
	}
	if !slices.Contains(events, "mcp_resume.detached") || !slices.Contains(events, "mcp_resume.attached") {
		t.Errorf("call span events %v: want the detach and the attach", events)
	}
	res, _ := otlptest.Find(spans, "requests/resume")
	if res.Kind != "Server" || res.TraceID != clientTraceID || res.ParentSpanID != call.SpanID {
		t.Errorf("resume span %+v: want a SERVER span below the call's %s", res, call.SpanID)
	}

	if err := srv.Stop(syscall.SIGTERM); err != nil { // every span ended is exported by now
		t.Fatalf("serve after SIGTERM: %v", err)
	}
	raw := rcv.Raw()
	if !bytes.Contains(raw, []byte(`"tools/call countdown"`)) {
		t.Fatal("the exported spans are not in the receiver's raw record: the scan below would prove nothing")
	}
	for name, secret := range map[string]string{"resume token": pol.ResumeToken, "call key": callKey, "API key": apiKey} {
		if bytes.Contains(raw, []byte(secret)) {
			t.Errorf("the %s is in what was exported", name)
		}
	}
}

// Through `gateway` in front of `serve --stdio` (both exporting to the one
// receiver): the gateway's SERVER span of the call is a child of the client's
// span, the gateway's CLIENT span of the upstream call a child of it, and the
// upstream's SERVER span of the call a child of that: one trace.
func TestTraceThroughGateway(t *testing.T) {
	rcv := otlptest.New(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.Endpoint())
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "20")
	// The child exports its spans when given the exporter's variables.
	c := e2etest.NewClient(t, spawn(t, "gateway --stdio --env OTEL_EXPORTER_OTLP_ENDPOINT --env OTEL_BSP_SCHEDULE_DELAY -- "+os.Args[0]))
	c.Initialize(`{}`)
	c.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"countdown","arguments":{"seconds":0.1,"steps":2},"_meta":{"progressToken":"p","traceparent":"00-%s-%s-01"}}}`, clientTraceID, clientSpanID)
	if resp, _ := c.Response(`1`); e2etest.Text(resp) != "countdown done: 2 of 2 steps" {
		t.Fatalf("result %s", resp.Raw)
	}
	var gw, out, up otlptest.Span
	rcv.Wait(t, 20*time.Second, "the gateway's spans of the call and the upstream's below them", func(spans []otlptest.Span) bool {
		gw, out, up = otlptest.Span{}, otlptest.Span{}, otlptest.Span{}
		for _, s := range spans {
			if s.Name == "tools/call countdown" && s.ParentSpanID == clientSpanID {
				gw = s
			}
		}
		for _, s := range spans {
			if s.Name == "tools/call countdown" && gw.SpanID != "" && s.ParentSpanID == gw.SpanID {
				out = s
			}
		}
		for _, s := range spans {
			if s.Name == "tools/call countdown" && out.SpanID != "" && s.ParentSpanID == out.SpanID {
				up = s
			}
		}
		return up.SpanID != ""
	})
	if gw.Kind != "Server" || out.Kind != "Client" || up.Kind != "Server" {
		t.Errorf("kinds: gateway %s > gateway %s > upstream %s, want Server > Client > Server", gw.Kind, out.Kind, up.Kind)
	}
	for _, s := range []otlptest.Span{gw, out, up} {
		if s.TraceID != clientTraceID {
			t.Errorf("span %s (%s) in trace %s, want the client's", s.Name, s.Kind, s.TraceID)
		}
	}
	for k, want := range map[string]string{
		"mcp.method.name": "tools/call", "gen_ai.tool.name": "countdown", "network.transport": "pipe",
		"mcp.protocol.version": "2026-07-28", // serve speaks it: the gateway calls it in that era
	} {
		if out.Attrs[k] != want {
			t.Errorf("the gateway's CLIENT span: %s = %q, want %q (all %v)", k, out.Attrs[k], want, out.Attrs)
		}
	}
	if out.Attrs["jsonrpc.request.id"] == "" || out.Attrs["jsonrpc.request.id"] != up.Attrs["jsonrpc.request.id"] {
		t.Errorf("the CLIENT span's jsonrpc.request.id %q, the upstream's %q: want the upstream request's id in both",
			out.Attrs["jsonrpc.request.id"], up.Attrs["jsonrpc.request.id"])
	}
}

// `mcp-resume call`, a real process, with the OpenTelemetry environment: its
// call is a CLIENT span (below the span TRACEPARENT names), exported as the
// command exits, and the server's SERVER span of the call is its child: one
// trace across the two processes. The initialize of its connection and the
// tools/list it sends first to check the arguments are CLIENT spans of the
// same trace.
func TestTraceCallCommand(t *testing.T) {
	rcv := otlptest.New(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.Endpoint())
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "20")
	srv := spawnNet(t, "serve --http 127.0.0.1:0", 1)[0]
	cmd := self("call --url " + srv.URL + " countdown seconds=0.2 steps=2")
	cmd.Env = append(cmd.Env, "OTEL_SERVICE_NAME=the-caller", "TRACEPARENT=00-"+clientTraceID+"-"+clientSpanID+"-01")
	out, err := cmd.Output()
	if err != nil || string(out) != "countdown done: 2 of 2 steps\n" {
		t.Fatalf("call: %v, stdout %q", err, out)
	}
	// Exported before the command exited: its client spans are there now.
	spans := rcv.Spans()
	var cli otlptest.Span
	for _, s := range spans {
		if s.Name == "tools/call countdown" && s.Kind == "Client" {
			cli = s
		}
	}
	if cli.SpanID == "" || cli.Service != "the-caller" || cli.TraceID != clientTraceID || cli.ParentSpanID != clientSpanID {
		t.Fatalf("the command's CLIENT span %+v: want one of service the-caller below TRACEPARENT's span (received %v)", cli, otlptest.Names(spans))
	}
	for k, want := range map[string]string{
		"mcp.method.name": "tools/call", "gen_ai.tool.name": "countdown", "network.transport": "tcp", "network.protocol.name": "http",
	} {
		if cli.Attrs[k] != want {
			t.Errorf("CLIENT span: %s = %q, want %q (all %v)", k, cli.Attrs[k], want, cli.Attrs)
		}
	}
	for _, name := range []string{"initialize", "tools/list"} {
		if !slices.ContainsFunc(spans, func(s otlptest.Span) bool {
			return s.Name == name && s.Kind == "Client" && s.TraceID == clientTraceID && s.ParentSpanID == clientSpanID && s.Service == "the-caller"
		}) {
			t.Errorf("no CLIENT span %s of the command below TRACEPARENT's span: %v", name, otlptest.Names(spans))
		}
	}
	spans = rcv.Wait(t, 20*time.Second, "the server's span of the call", func(spans []otlptest.Span) bool {
		for _, s := range spans {
			if s.Name == "tools/call countdown" && s.Kind == "Server" {
				return true
			}
		}
		return false
	})
	for _, s := range spans {
		if s.Name == "tools/call countdown" && s.Kind == "Server" {
			if s.TraceID != clientTraceID || s.ParentSpanID != cli.SpanID || s.Service != "mcp-resume" {
				t.Errorf("server span %+v: want mcp-resume's, below the command's CLIENT span %s", s, cli.SpanID)
			}
		}
	}
}

// The done-when for a restart: a restartable call of the Go client
// (tracing, its CLIENT span recorded here) to `serve --data-dir` (exporting
// to the receiver), the server killed (SIGKILL) mid-call and started again on
// the same data: the new process runs the call again, and its span of the
// rerun, the client's resume and its CLIENT span are one trace. The rerun's
// parent is the first run's span (lost with the killed process: its context
// came back from the store), its link the client's span.
func TestTraceRerunAfterRestart(t *testing.T) {
	rcv := otlptest.New(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.Endpoint())
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "20")
	addr := freeAddr(t)
	args := "--data-dir " + t.TempDir() + " --restartable countdown"
	kill := spawnHTTP(t, addr, args)

	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	dial := func(context.Context) (transport.Conn, error) {
		return httptransport.Dial("http://"+addr+"/mcp", &httptransport.ClientOptions{Client: &http.Client{Transport: tr}, FailOnStreamLoss: true}), nil
	}
	c, err := client.Connect(t.Context(), dial, &client.Options{MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
		TracerProvider: tp, Transport: "http"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	first := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		n := 0
		res, err := c.CallTool(t.Context(), "countdown", map[string]any{"seconds": 1, "steps": 4}, &client.CallOptions{
			Progress: func(client.Progress) {
				if n++; n == 1 {
					close(first)
				}
			},
		})
		if err == nil && (len(res.Content) != 1 || res.IsError) {
			err = fmt.Errorf("result %+v", res)
		}
		done <- err
	}()
	select {
	case <-first:
	case err := <-done:
		t.Fatalf("the call ended before any progress: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("no progress")
	}
	kill()
	spawnHTTP(t, addr, args)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the call across the restart: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no result after the restart")
	}

	var cli sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == "tools/call countdown" {
			cli = s
		}
	}
	if cli == nil {
		t.Fatal("no CLIENT span of the call")
	}
	traceID := cli.SpanContext().TraceID().String()
	var rerun, resume otlptest.Span
	rcv.Wait(t, 20*time.Second, "the rerun's span and the resume's", func(spans []otlptest.Span) bool {
		for _, s := range spans {
			switch {
			case s.Name == "tools/call countdown" && s.Attrs["mcp_resume.rerun"] == "true":
				rerun = s
			case s.Name == "requests/resume" && s.TraceID == traceID:
				resume = s
			}
		}
		return rerun.SpanID != "" && resume.SpanID != ""
	})
	if rerun.TraceID != traceID || rerun.Kind != "Server" {
		t.Errorf("the rerun's span %+v: want a SERVER span in the client's trace %s", rerun, traceID)
	}
	if rerun.ParentSpanID == "" || rerun.ParentSpanID == cli.SpanContext().SpanID().String() || resume.ParentSpanID != rerun.ParentSpanID {
		t.Errorf("the rerun's parent %q, the resume's %q: want both the first run's span (the stored trace context)", rerun.ParentSpanID, resume.ParentSpanID)
	}
	if len(rerun.Links) != 1 || rerun.Links[0].SpanID != cli.SpanContext().SpanID().String() {
		t.Errorf("the rerun's links %+v, want the client's span %s", rerun.Links, cli.SpanContext().SpanID())
	}
	if len(resume.Links) != 1 || resume.Links[0].SpanID != cli.SpanContext().SpanID().String() {
		t.Errorf("the resume's links %+v, want the client's span (its context came with the resume)", resume.Links)
	}
	var events []string
	for _, e := range rerun.Events {
		events = append(events, e.Name)
	}
	if !slices.Contains(events, "mcp_resume.rerun") {
		t.Errorf("the rerun's events %v", events)
	}
}

// mcp.server.operation.duration: `serve --http` has it on /metrics
// (mcp_server_operation_duration_seconds, whatever the environment says),
// and exports it over OTLP with OTEL_METRICS_EXPORTER=otlp.
func TestOperationMetrics(t *testing.T) {
	rcv := otlptest.New(t)
	t.Setenv("OTEL_METRICS_EXPORTER", "otlp")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.Endpoint())
	t.Setenv("OTEL_METRIC_EXPORT_INTERVAL", "100")
	srv := spawnNet(t, "serve --http 127.0.0.1:0", 1)[0]
	c := e2etest.NewClient(t, httptransport.Dial(srv.URL, nil))
	c.Initialize(`{}`)
	c.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`)
	c.Response(`1`)

	scrapeUntil(t, "127.0.0.1", strings.TrimSuffix(srv.URL, "/mcp")+"/metrics",
		`mcp_server_operation_duration_seconds_count{error_type="",gen_ai_tool_name="echo",mcp_method_name="tools/call",mcp_protocol_version="2025-06-18",network_transport="tcp"} 1`)
	points := rcv.WaitPoints(t, 20*time.Second, "the echo's operation over OTLP", func(ps []otlptest.Point) bool {
		for _, p := range ps {
			if p.Metric == "mcp.server.operation.duration" && p.Attrs["gen_ai.tool.name"] == "echo" {
				return true
			}
		}
		return false
	})
	for _, p := range points {
		if p.Metric != "mcp.server.operation.duration" || p.Attrs["gen_ai.tool.name"] != "echo" {
			continue
		}
		if p.Unit != "s" || p.Count != 1 || p.Sum <= 0 || p.Service != "mcp-resume" || p.Attrs["mcp.method.name"] != "tools/call" ||
			p.Attrs["network.transport"] != "tcp" || p.Attrs["mcp.protocol.version"] != "2025-06-18" {
			t.Errorf("data point %+v", p)
		}
		break
	}
}

// `gateway --http` in front of `serve --stdio` (this binary twice), with the
// OpenTelemetry environment: the gateway's own requests to its upstream
// (initialize, tools/list) are CLIENT spans, roots, whose upstream SERVER
// spans are their children; every request it sends its upstream is an
// operation of mcp.client.operation.duration, on its /metrics beside
// mcp.server.operation.duration (mcp_client_operation_duration_seconds) and
// over OTLP.
func TestGatewayClientOperations(t *testing.T) {
	rcv := otlptest.New(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.Endpoint())
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "20")
	t.Setenv("OTEL_METRICS_EXPORTER", "otlp")
	t.Setenv("OTEL_METRIC_EXPORT_INTERVAL", "100")
	ls := spawnNet(t, "gateway --http 127.0.0.1:0 --env OTEL_EXPORTER_OTLP_ENDPOINT --env OTEL_BSP_SCHEDULE_DELAY --env OTEL_METRICS_EXPORTER --env OTEL_METRIC_EXPORT_INTERVAL -- "+os.Args[0], 2)
	if ls[0].URL == "" {
		ls[0], ls[1] = ls[1], ls[0]
	}
	c := e2etest.NewClient(t, httptransport.Dial(ls[0].URL, nil))
	c.Initialize(`{}`)
	c.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`)
	if resp, _ := c.Response(`1`); e2etest.Text(resp) != "hi" {
		t.Fatalf("result %s", resp.Raw)
	}

	m := scrapeUntil(t, "127.0.0.1", strings.TrimSuffix(ls[0].URL, "/mcp")+"/metrics",
		`mcp_server_operation_duration_seconds_count{error_type="",gen_ai_tool_name="echo"`)
	for _, want := range []string{
		`mcp_client_operation_duration_seconds_count{error_type="",gen_ai_operation_name="execute_tool",gen_ai_prompt_name="",gen_ai_tool_name="echo",mcp_method_name="tools/call",mcp_protocol_version="2026-07-28",network_protocol_name="",network_transport="pipe",rpc_response_status_code=""} 1`,
		`mcp_client_operation_duration_seconds_count{error_type="",gen_ai_operation_name="",gen_ai_prompt_name="",gen_ai_tool_name="",mcp_method_name="initialize",mcp_protocol_version="2025-11-25",network_protocol_name="",network_transport="pipe",rpc_response_status_code=""} 1`,
		`mcp_server_operation_duration_seconds_count{error_type="",gen_ai_tool_name="echo",mcp_method_name="tools/call",mcp_protocol_version="2025-06-18",network_transport="tcp"} 1`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics has no %s:\n%s", want, m)
		}
	}
	points := rcv.WaitPoints(t, 20*time.Second, "the gateway's operation of the echo over OTLP", func(ps []otlptest.Point) bool {
		return slices.ContainsFunc(ps, func(p otlptest.Point) bool {
			return p.Metric == "mcp.client.operation.duration" && p.Attrs["gen_ai.tool.name"] == "echo"
		})
	})
	for _, p := range points {
		if p.Metric == "mcp.client.operation.duration" && p.Attrs["gen_ai.tool.name"] == "echo" {
			if p.Unit != "s" || p.Count != 1 || p.Service != "mcp-resume" || p.Attrs["mcp.method.name"] != "tools/call" ||
				p.Attrs["network.transport"] != "pipe" || p.Attrs["gen_ai.operation.name"] != "execute_tool" {
				t.Errorf("data point %+v", p)
			}
			break
		}
	}
	rcv.Wait(t, 20*time.Second, "the gateway's initialize and tools/list, each with the upstream's span below it", func(spans []otlptest.Span) bool {
		for _, name := range []string{"initialize", "tools/list"} {
			if !slices.ContainsFunc(spans, func(cli otlptest.Span) bool {
				return cli.Name == name && cli.Kind == "Client" && cli.ParentSpanID == "" && slices.ContainsFunc(spans, func(up otlptest.Span) bool {
					return up.Name == name && up.Kind == "Server" && up.ParentSpanID == cli.SpanID && up.TraceID == cli.TraceID
				})
			}) {
				return false
			}
		}
		return true
	})
}

// A client command (`call`) with OTEL_METRICS_EXPORTER=otlp (and tracing
// off) exports, as it exits, an operation of mcp.client.operation.duration
// for each request it sent: its connection's initialize, the tools/list that
// checks the arguments, the call.
func TestCallCommandOperations(t *testing.T) {
	rcv := otlptest.New(t)
	srv := spawnNet(t, "serve --http 127.0.0.1:0", 1)[0]
	cmd := self("call --url " + srv.URL + " echo text=hi")
	cmd.Env = append(cmd.Env, "OTEL_SERVICE_NAME=the-caller", "OTEL_METRICS_EXPORTER=otlp", "OTEL_TRACES_EXPORTER=none",
		"OTEL_EXPORTER_OTLP_ENDPOINT="+rcv.Endpoint())
	out, err := cmd.Output()
	if err != nil || string(out) != "hi\n" {
		t.Fatalf("call: %v, stdout %q", err, out)
	}
	got := map[string]otlptest.Point{}
	for _, p := range rcv.Points() { // exported before the command exited
		if p.Metric == "mcp.client.operation.duration" && p.Service == "the-caller" {
			got[p.Attrs["mcp.method.name"]] = p
		}
	}
	if spans := rcv.Spans(); len(spans) != 0 {
		t.Errorf("spans with tracing off: %v", otlptest.Names(spans))
	}
	for _, method := range []string{"initialize", "tools/list", "tools/call"} {
		p, ok := got[method]
		if !ok {
			t.Errorf("no operation of %s (received %v)", method, rcv.Points())
			continue
		}
		if p.Unit != "s" || p.Count != 1 || p.Attrs["network.transport"] != "tcp" || p.Attrs["network.protocol.name"] != "http" ||
			p.Attrs["mcp.protocol.version"] != "2025-06-18" || p.Attrs["error.type"] != "" {
			t.Errorf("the operation of %s: %+v", method, p)
		}
	}
	if got["tools/call"].Attrs["gen_ai.tool.name"] != "echo" {
		t.Errorf("the call's operation %+v", got["tools/call"])
	}
}
