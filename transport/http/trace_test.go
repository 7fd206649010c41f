package http_test

import (
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/testkit/poll"
)

// A request whose params carry no trace context has the traceparent and
// tracestate headers of its POST as its span's parent; one in params._meta
// comes first.
func TestTraceHeaders(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	s := newServer(t, &mcp.Options{TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))}, nil)
	c := s.raw(t)
	c.initialize(`{}`)
	const header = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	c.post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"a"}}}`,
		"traceparent: "+header, "tracestate: v=1")
	c.post(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"b"},"_meta":{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01"}}}`,
		"traceparent: "+header)
	// A span ends right after its answer is written: the client may read it first.
	var ended []sdktrace.ReadOnlySpan
	poll.Until(t, 10*time.Second, "both calls' spans", func() bool { ended = rec.Ended(); return len(ended) >= 3 })
	parents := map[string]string{}
	for _, sp := range ended {
		if sp.Name() != "tools/call echo" {
			continue
		}
		for _, kv := range sp.Attributes() {
			if kv.Key == "jsonrpc.request.id" {
				parents[kv.Value.AsString()] = sp.Parent().SpanID().String() + " " + sp.SpanContext().TraceState().String()
			}
		}
		if sp.Parent().TraceID().String() != "0af7651916cd43dd8448eb211c80319c" {
			t.Errorf("span %v: parent %v, want the client's trace", sp.Name(), sp.Parent())
		}
	}
	if parents["1"] != "b7ad6b7169203331 v=1" || parents["2"] != "00f067aa0ba902b7 " {
		t.Errorf("parents (span id, tracestate) by request id: %q; want the header's for 1, _meta's for 2", parents)
	}
}
