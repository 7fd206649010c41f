// Package mcptrace is what the project's MCP clients (mcp/client, the
// gateway's upstream side) share to trace the requests they send: a CLIENT
// span named and attributed as the OpenTelemetry semantic conventions for MCP
// say ("tools/call countdown"; mcp.method.name, gen_ai.tool.name,
// jsonrpc.request.id, ...), and its W3C trace context for the request's
// params._meta (SEP-414), where the server takes its span's parent from.
//
// A request's params are read for its method's target only (the tool or
// prompt name): never a resume token, a call key, a task id or an argument.
package mcptrace

import (
	"context"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Instrumentation names the tracer of a client's spans.
const Instrumentation = "github.com/mcp-resume/mcp-resume/mcp/client"

// The attributes (the semantic conventions' names, and ours under
// mcp_resume.).
const (
	Method          = attribute.Key("mcp.method.name")
	ProtocolVersion = attribute.Key("mcp.protocol.version")
	RequestID       = attribute.Key("jsonrpc.request.id")
	ToolName        = attribute.Key("gen_ai.tool.name")
	PromptName      = attribute.Key("gen_ai.prompt.name")
	Operation       = attribute.Key("gen_ai.operation.name")
	NetTransport    = attribute.Key("network.transport")
	NetProtocol     = attribute.Key("network.protocol.name")
	ErrorType       = attribute.Key("error.type")
	StatusCode      = attribute.Key("rpc.response.status_code")
	Reason          = attribute.Key("mcp_resume.error.reason")
	Ack             = attribute.Key("mcp_resume.ack")
)

// The events on a client's span of a call.
const (
	// EventResumable: the server made the call resumable (its policy came).
	EventResumable = "mcp_resume.resumable"
	// EventConnectionLost: the connection the call was on was lost; the call
	// waits to be resumed (or sent again).
	EventConnectionLost = "mcp_resume.connection_lost"
	// EventResumeSent: a requests/resume of the call went out on a new
	// connection (mcp_resume.ack: the last message the client holds).
	EventResumeSent = "mcp_resume.resume_sent"
	// EventResent: the call went out again on a new connection, with its key
	// (the server joins it to the call it runs) or as an idempotent call.
	EventResent = "mcp_resume.resent"
)

// The transports a client may name, as mcp.Transport* does for a server.
const (
	TransportStdio     = "stdio"
	TransportHTTP      = "http"
	TransportWebSocket = "websocket"
)

// Name returns a span's name: the method, and its target when it has one
// ("tools/call countdown").
func Name(method, target string) string {
	if target == "" {
		return method
	}
	return method + " " + target
}

// Attributes returns a CLIENT span's attributes for a request of method on
// target with id (a JSON-RPC id as sent: a string id with its quotes), in
// protocol version (may be empty) over transport (one of the Transport
// constants, or empty when it is not known).
func Attributes(method, target, id, version, transport string) []attribute.KeyValue {
	attrs := make([]attribute.KeyValue, 0, 8)
	attrs = append(attrs, Method.String(method))
	if id != "" {
		attrs = append(attrs, RequestID.String(IDText(id)))
	}
	switch method {
	case "tools/call":
		if target != "" {
			attrs = append(attrs, ToolName.String(target))
		}
		attrs = append(attrs, Operation.String("execute_tool"))
	case "prompts/get":
		if target != "" {
			attrs = append(attrs, PromptName.String(target))
		}
	}
	if version != "" {
		attrs = append(attrs, ProtocolVersion.String(version))
	}
	switch transport {
	case TransportStdio:
		attrs = append(attrs, NetTransport.String("pipe"))
	case TransportHTTP, TransportWebSocket:
		attrs = append(attrs, NetTransport.String("tcp"), NetProtocol.String(transport))
	}
	return attrs
}

// Targeted reports whether a method's span names a target from its params'
// "name" (tools/call, prompts/get).
func Targeted(method string) bool { return method == "tools/call" || method == "prompts/get" }

// IDText is a JSON-RPC id as jsonrpc.request.id has it: a string id's text,
// a number's digits.
func IDText(id string) string {
	if len(id) > 1 && id[0] == '"' {
		if s, err := strconv.Unquote(id); err == nil {
			return s
		}
	}
	return id
}

// Start starts a CLIENT span below the span ctx carries (none: a root).
func Start(ctx context.Context, tr trace.Tracer, name string, attrs []attribute.KeyValue) trace.Span {
	_, sp := tr.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	return sp
}

var w3c propagation.TraceContext

// Context returns the W3C traceparent and tracestate of span sp, for a
// request's _meta; "" for a span that is not recording a valid context.
func Context(sp trace.Span) (traceparent, tracestate string) {
	if sp == nil || !sp.SpanContext().IsValid() {
		return "", ""
	}
	c := propagation.MapCarrier{}
	w3c.Inject(trace.ContextWithSpan(context.Background(), sp), c)
	return c["traceparent"], c["tracestate"]
}

// Failed records a JSON-RPC error answer on a client's span: its code as
// rpc.response.status_code and error.type, its data.reason, the error status.
func Failed(sp trace.Span, code int, msg, reason string) {
	s := strconv.Itoa(code)
	sp.SetAttributes(StatusCode.String(s), ErrorType.String(s))
	if reason != "" {
		sp.SetAttributes(Reason.String(reason))
	}
	sp.SetStatus(codes.Error, msg)
}

// Ended records on a client's span a call that ended without an answer:
// errorType names why (connection_lost, cancelled, ...).
func Ended(sp trace.Span, errorType, msg string) {
	sp.SetAttributes(ErrorType.String(errorType))
	sp.SetStatus(codes.Error, msg)
}

// ToolError records a tool's own error (a result with isError).
func ToolError(sp trace.Span) {
	sp.SetAttributes(ErrorType.String("tool_error"))
	sp.SetStatus(codes.Error, "the tool's result is an error")
}
