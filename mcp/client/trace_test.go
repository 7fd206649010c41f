package client_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/mcp/client"
	"github.com/mcp-resume/mcp-resume/spec"
	"github.com/mcp-resume/mcp-resume/testkit/poll"
)

// recorded returns a provider and what it records: every span that ends.
func recorded() (trace.TracerProvider, *tracetest.SpanRecorder) {
	rec := tracetest.NewSpanRecorder()
	return sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)), rec
}

// find returns the ended spans named name of kind.
func find(spans []sdktrace.ReadOnlySpan, name string, kind trace.SpanKind) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.Name() == name && s.SpanKind() == kind {
			out = append(out, s)
		}
	}
	return out
}

func attrs(s sdktrace.ReadOnlySpan) map[string]string {
	m := map[string]string{}
	for _, kv := range s.Attributes() {
		m[string(kv.Key)] = kv.Value.String()
	}
	return m
}

func events(s sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, e := range s.Events() {
		out = append(out, e.Name)
	}
	return out
}

// everything a span says, for a scan for secrets.
func spanText(s sdktrace.ReadOnlySpan) string {
	var b strings.Builder
	b.WriteString(s.Name() + " " + s.Status().Description)
	for _, kv := range s.Attributes() {
		fmt.Fprintf(&b, " %s=%s", kv.Key, kv.Value.String())
	}
	for _, e := range s.Events() {
		b.WriteString(" " + e.Name)
		for _, kv := range e.Attributes {
			fmt.Fprintf(&b, " %s=%s", kv.Key, kv.Value.String())
		}
	}
	return b.String()
}

// A traced client's call is a CLIENT span below the caller's span; the
// server's span of the call is its child (the trace context went in _meta).
// Cut two steps in and resumed, the call keeps its one span (the loss and the
// resume are its events), the resume carries its context: the server's span
// of the resume is in the call's trace, linked to the client's span. No
// resume token or call key is in any span.
func TestTraceClientSpan(t *testing.T) {
	tp, rec := recorded()
	s := newPipeServer(t, &mcp.Options{TracerProvider: tp})
	opts := fastOpts()
	opts.TracerProvider = tp
	opts.Transport = "stdio"
	c := connect(t, s.dial, opts)

	ctx, caller := tp.Tracer("test").Start(t.Context(), "caller")
	var token string
	res, err := c.CallTool(ctx, "countdown", map[string]any{"seconds": 0.3, "steps": 4}, &client.CallOptions{
		Policy: func(p client.Policy) { token = p.Token },
		Progress: func(p client.Progress) {
			if p.Progress == 2 {
				go s.cutAll()
			}
		},
	})
	caller.End()
	if err != nil || res.IsError {
		t.Fatalf("call: %v %+v", err, res)
	}
	var cli, srv, resume sdktrace.ReadOnlySpan
	poll.Until(t, 10*time.Second, "the client's span, the server's and the resume's", func() bool {
		ended := rec.Ended()
		cs, ss, rs := find(ended, "tools/call countdown", trace.SpanKindClient), find(ended, "tools/call countdown", trace.SpanKindServer),
			find(ended, spec.MethodResume, trace.SpanKindServer)
		if len(cs) == 1 && len(ss) == 1 && len(rs) == 1 {
			cli, srv, resume = cs[0], ss[0], rs[0]
			return true
		}
		return false
	})
	if cli.Parent().SpanID() != caller.SpanContext().SpanID() || cli.SpanContext().TraceID() != caller.SpanContext().TraceID() {
		t.Errorf("client span's parent %v, want the caller's %v", cli.Parent(), caller.SpanContext())
	}
	if srv.Parent().SpanID() != cli.SpanContext().SpanID() || !srv.Parent().IsRemote() {
		t.Errorf("server span's parent %v, want the client's span %v", srv.Parent(), cli.SpanContext())
	}
	if resume.SpanContext().TraceID() != cli.SpanContext().TraceID() || resume.Parent().SpanID() != srv.SpanContext().SpanID() {
		t.Errorf("resume span %v below %v: want it below the server's span of the call", resume.SpanContext(), resume.Parent())
	}
	if l := resume.Links(); len(l) != 1 || l[0].SpanContext.SpanID() != cli.SpanContext().SpanID() {
		t.Errorf("resume span's links %v: want the client's span (its context came with the resume)", l)
	}
	a := attrs(cli)
	for k, want := range map[string]string{
		"mcp.method.name": "tools/call", "gen_ai.tool.name": "countdown", "gen_ai.operation.name": "execute_tool",
		"mcp.protocol.version": "2025-06-18", "network.transport": "pipe",
	} {
		if a[k] != want {
			t.Errorf("client span: %s = %q, want %q (all %v)", k, a[k], want, a)
		}
	}
	if id := a["jsonrpc.request.id"]; !strings.HasPrefix(id, "c-") || attrs(srv)["jsonrpc.request.id"] != id {
		t.Errorf("client span's jsonrpc.request.id %q, the server's %q", id, attrs(srv)["jsonrpc.request.id"])
	}
	if a["error.type"] != "" || cli.Status().Code.String() != "Unset" {
		t.Errorf("client span of a call that succeeded: %v %v", a, cli.Status())
	}
	ev := events(cli)
	for _, want := range []string{"mcp_resume.resumable", "mcp_resume.connection_lost", "mcp_resume.resume_sent"} {
		if !slices.Contains(ev, want) {
			t.Errorf("client span's events %v: no %s", ev, want)
		}
	}
	if token == "" {
		t.Fatal("no policy came")
	}
	for _, sp := range rec.Ended() {
		if strings.Contains(spanText(sp), token) {
			t.Errorf("span %s holds the resume token", sp.Name())
		}
	}
}

// Errors: a JSON-RPC error is the span's error.type (its code) and status; a
// tool's own error is tool_error; a call cancelled by its context is
// cancelled. Every traced method gets a span: requests/getStatus too, whose
// server span links the client's.
func TestTraceClientErrors(t *testing.T) {
	tp, rec := recorded()
	s := newPipeServer(t, nil)
	opts := fastOpts()
	opts.TracerProvider = tp
	c := connect(t, s.dial, opts)

	if _, err := c.Call(t.Context(), "no/such/method", nil, nil); err == nil {
		t.Fatal("no error for an unknown method")
	}
	if _, err := c.Status(t.Context(), spec.ID(`"nope"`), "a-token-that-names-nothing-0123456789"); err == nil {
		t.Fatal("getStatus of nothing: no error")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := c.CallTool(ctx, "countdown", map[string]any{"seconds": 5, "steps": 5}, nil); err == nil {
		t.Fatal("no error for a call past its context's deadline")
	}
	ended := rec.Ended()
	for name, want := range map[string]string{"no/such/method": "-32601", "requests/getStatus": "-32602", "tools/call countdown": "cancelled"} {
		ss := find(ended, name, trace.SpanKindClient)
		if len(ss) != 1 {
			t.Errorf("%d client spans %s", len(ss), name)
			continue
		}
		if got := attrs(ss[0])["error.type"]; got != want || ss[0].Status().Code.String() != "Error" {
			t.Errorf("span %s: error.type %q, status %v; want %q and an error", name, got, ss[0].Status(), want)
		}
		if strings.Contains(spanText(ss[0]), "a-token-that-names-nothing") {
			t.Errorf("span %s holds the token", name)
		}
	}
}

// Without a TracerProvider the client makes no span and sends no trace
// context: the server's span of the call is a root.
func TestTraceClientOff(t *testing.T) {
	tp, rec := recorded()
	s := newPipeServer(t, &mcp.Options{TracerProvider: tp})
	c := connect(t, s.dial, nil)
	ctx, caller := tp.Tracer("test").Start(t.Context(), "caller")
	if _, err := c.CallTool(ctx, "echo", map[string]any{"text": "hi"}, nil); err != nil {
		t.Fatal(err)
	}
	caller.End()
	var srv []sdktrace.ReadOnlySpan
	poll.Until(t, 10*time.Second, "the server's span", func() bool {
		srv = find(rec.Ended(), "tools/call echo", trace.SpanKindServer)
		return len(srv) == 1
	})
	if srv[0].Parent().IsValid() {
		t.Errorf("server span's parent %v: an untraced client sent a trace context", srv[0].Parent())
	}
	if n := len(find(rec.Ended(), "tools/call echo", trace.SpanKindClient)); n != 0 {
		t.Errorf("%d client spans from an untraced client", n)
	}
}

// Each connection's initialize is a CLIENT span whose context goes in its
// _meta: the first connection's below the span Connect's context carries,
// a reconnect's a root; the server's span of each initialize is its child.
func TestTraceClientInitialize(t *testing.T) {
	tp, rec := recorded()
	s := newPipeServer(t, &mcp.Options{TracerProvider: tp})
	opts := fastOpts()
	opts.TracerProvider = tp
	opts.Transport = "stdio"
	lost := make(chan struct{}, 1)
	opts.OnConnectionLost = func(error) { lost <- struct{}{} }
	ctx, caller := tp.Tracer("test").Start(t.Context(), "caller")
	c, err := client.Connect(ctx, s.dial, opts)
	caller.End()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	s.cutAll()
	select {
	case <-lost: // the link is gone: the next call waits for the reconnect
	case <-time.After(10 * time.Second):
		t.Fatal("the cut connection was not noticed")
	}
	if _, err := c.CallTool(t.Context(), "echo", map[string]any{"text": "hi"}, nil); err != nil {
		t.Fatal(err)
	}
	var cli, srv []sdktrace.ReadOnlySpan
	poll.Until(t, 10*time.Second, "two initialize spans of the client's and two of the server's", func() bool {
		cli, srv = find(rec.Ended(), "initialize", trace.SpanKindClient), find(rec.Ended(), "initialize", trace.SpanKindServer)
		return len(cli) == 2 && len(srv) == 2
	})
	if cli[0].Parent().SpanID() != caller.SpanContext().SpanID() {
		t.Errorf("the first initialize's parent %v, want Connect's caller %v", cli[0].Parent(), caller.SpanContext())
	}
	if cli[1].Parent().IsValid() {
		t.Errorf("the reconnect's initialize has parent %v, want a root", cli[1].Parent())
	}
	for i, sp := range cli {
		a := attrs(sp)
		for k, want := range map[string]string{"mcp.method.name": "initialize", "mcp.protocol.version": "2025-06-18", "network.transport": "pipe"} {
			if a[k] != want {
				t.Errorf("initialize span %d: %s = %q, want %q (all %v)", i, k, a[k], want, a)
			}
		}
		if !strings.HasPrefix(a["jsonrpc.request.id"], "c-") || a["error.type"] != "" || sp.Status().Code.String() != "Unset" {
			t.Errorf("initialize span %d: attributes %v, status %v", i, a, sp.Status())
		}
		var child sdktrace.ReadOnlySpan
		for _, s := range srv {
			if s.Parent().SpanID() == sp.SpanContext().SpanID() {
				child = s
			}
		}
		if child == nil || !child.Parent().IsRemote() || child.SpanContext().TraceID() != sp.SpanContext().TraceID() {
			t.Errorf("initialize span %d: no server span of it below it (the server's: %v, %v)", i, srv[0].Parent(), srv[1].Parent())
		}
	}
}
