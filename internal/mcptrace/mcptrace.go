// Package mcptrace is what the project's MCP clients (mcp/client, the
// gateway's upstream side) share to trace the requests they send: a CLIENT
// span named and attributed as the OpenTelemetry semantic conventions for MCP
// say ("tools/call countdown"; mcp.method.name, gen_ai.tool.name,
// jsonrpc.request.id, ...), and its W3C trace context for the request's
// params._meta (SEP-414), where the server takes its span's parent from; and
// how such a request ended (Outcome), for its span and for the conventions'
// metric mcp.client.operation.duration.
//
// A request's params are read for its method's target only (the tool or
// prompt name, a resource's URI): never a resume token, a call key, a task id
// or an argument.
package mcptrace

import (
	"context"
	"slices"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-resume/mcp-resume/spec"
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
	ResourceURI     = attribute.Key("mcp.resource.uri")
	Operation       = attribute.Key("gen_ai.operation.name")
	NetTransport    = attribute.Key("network.transport")
	NetProtocol     = attribute.Key("network.protocol.name")
	ErrorType       = attribute.Key("error.type")
	StatusCode      = attribute.Key("rpc.response.status_code")
	Reason          = attribute.Key("mcp_resume.error.reason")
	Ack             = attribute.Key("mcp_resume.ack")
	// Upstream names the upstream of a gateway of several that a request
	// went to.
	Upstream = attribute.Key("mcp_resume.upstream")
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

// Name returns a span's name: the method, and its target when it names one
// (Targeted: "tools/call countdown"; a resource's URI is an attribute only).
func Name(method, target string) string {
	if target == "" || !Targeted(method) {
		return method
	}
	return method + " " + target
}

// Attributes returns a CLIENT span's attributes for a request of method on
// target (a tool's or a prompt's name, a resource's URI) with id (a JSON-RPC
// id as sent: a string id with its quotes), in protocol version (may be
// empty) over transport (one of the Transport constants, or empty when it is
// not known).
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
	default:
		if target != "" && Addressed(method) {
			attrs = append(attrs, ResourceURI.String(target))
		}
	}
	if version != "" {
		attrs = append(attrs, ProtocolVersion.String(version))
	}
	if net, proto := Network(transport); net != "" {
		attrs = append(attrs, NetTransport.String(net))
		if proto != "" {
			attrs = append(attrs, NetProtocol.String(proto))
		}
	}
	return attrs
}

// Network returns the conventions' network.transport and
// network.protocol.name of transport (one of the Transport constants): "pipe"
// for stdio, "tcp" with "http" or "websocket"; "" for what is not known.
func Network(transport string) (netTransport, netProtocol string) {
	switch transport {
	case TransportStdio:
		return "pipe", ""
	case TransportHTTP, TransportWebSocket:
		return "tcp", transport
	}
	return "", ""
}

// Addressed reports whether a method's params name a resource by its "uri",
// which its span has as mcp.resource.uri (resources/read, resources/subscribe,
// resources/unsubscribe).
func Addressed(method string) bool {
	return method == "resources/read" || method == "resources/subscribe" || method == "resources/unsubscribe"
}

// Other stands for a method MCP does not have in a metric's attributes, and
// for an end of a request no other error.type names: a made-up method makes
// no series of its own.
const Other = "_OTHER"

// KnownMethod returns method when MCP has it (spec.IsMethod), else Other.
func KnownMethod(method string) string {
	if spec.IsMethod(method) {
		return method
	}
	return Other
}

// KnownVersion returns version when it is one MCP has, else "" (a server's
// answer to initialize may name anything).
func KnownVersion(version string) string {
	if slices.Contains(spec.Versions, version) {
		return version
	}
	return ""
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

// Outcome is how a request a client sent ended, for its span and its
// operation: the zero Outcome is a request answered with a result.
type Outcome struct {
	// ErrorType is error.type: the JSON-RPC code of an error answer,
	// "tool_error" for a tool's result with isError, or why the request ended
	// without an answer (connection_lost, cancelled, ...); "" for success.
	ErrorType string
	// StatusCode is rpc.response.status_code: the code of an error answer, ""
	// for any other end.
	StatusCode string
	// Reason is the error answer's data.reason (mcp_resume.error.reason).
	Reason string
	// Message is the span's status description.
	Message string
}

// Answered is the Outcome of an error answer: its code, message and
// data.reason.
func Answered(code int, msg, reason string) Outcome {
	s := strconv.Itoa(code)
	return Outcome{ErrorType: s, StatusCode: s, Reason: reason, Message: msg}
}

// Unanswered is the Outcome of a request that ended without an answer:
// errorType names why (connection_lost, cancelled, ...).
func Unanswered(errorType, msg string) Outcome {
	return Outcome{ErrorType: errorType, Message: msg}
}

// ToolFailed is the Outcome of a tool's own error (a result with isError).
var ToolFailed = Outcome{ErrorType: "tool_error", Message: "the tool's result is an error"}

// Record puts o on sp: error.type, rpc.response.status_code and
// mcp_resume.error.reason when they have a value, and the error status for a
// failure. Nothing for a nil sp or a success.
func (o Outcome) Record(sp trace.Span) {
	if sp == nil || o.ErrorType == "" {
		return
	}
	if o.StatusCode != "" {
		sp.SetAttributes(StatusCode.String(o.StatusCode))
	}
	sp.SetAttributes(ErrorType.String(o.ErrorType))
	if o.Reason != "" {
		sp.SetAttributes(Reason.String(o.Reason))
	}
	sp.SetStatus(codes.Error, o.Message)
}
