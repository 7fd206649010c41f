package client

import (
	"time"

	"github.com/mcp-resume/mcp-resume/internal/mcptrace"
	"github.com/mcp-resume/mcp-resume/spec"
)

// Operation is one request a client sent, once it is over, as the
// OpenTelemetry semantic conventions for MCP measure it in the histogram
// mcp.client.operation.duration (Options.OnOperation; metrics.ClientOperations
// and metrics.OTelClientOperations record it). The gateway's requests to its
// upstream are Operations too (gateway.Options.OnOperation). Its method and
// protocol version are bounded whatever a server answers: a method MCP does
// not have is "_OTHER", a version MCP does not name "".
type Operation struct {
	// Method is mcp.method.name: "tools/call", "initialize", ...; "_OTHER" for
	// a method MCP does not have.
	Method string
	// Tool is gen_ai.tool.name, the tool a tools/call called; Prompt is
	// gen_ai.prompt.name, the prompt a prompts/get got. "" for none.
	Tool, Prompt string
	// ErrorType is error.type, as on the request's span: a JSON-RPC error's
	// code, "tool_error", or why the request ended without an answer
	// (connection_lost, cancelled, gave_up, ...); "" when it succeeded.
	ErrorType string
	// StatusCode is rpc.response.status_code: the JSON-RPC error code of an
	// error answer, "" for any other end.
	StatusCode string
	// ProtocolVersion is mcp.protocol.version: the version the request was
	// sent in (for initialize, the one negotiated); "" when not known.
	ProtocolVersion string
	// Transport is network.transport ("pipe" for stdio, "tcp" for HTTP and
	// WebSocket) and Protocol network.protocol.name ("http", "websocket");
	// "" when not known (Options.Transport).
	Transport, Protocol string
	// Duration runs from the request's start to its end: a call's across the
	// connections it was resumed on, to its result or its error.
	Duration time.Duration
}

// OperationName is gen_ai.operation.name of an operation of method:
// "execute_tool" for tools/call, "" otherwise.
func OperationName(method string) string {
	if method == spec.MethodToolsCall {
		return "execute_tool"
	}
	return ""
}

// operation is the Operation of cl, which ended as out.
func (o *observer) operation(cl *call, out mcptrace.Outcome) Operation {
	op := Operation{
		Method:          mcptrace.KnownMethod(cl.method),
		ErrorType:       out.ErrorType,
		StatusCode:      out.StatusCode,
		ProtocolVersion: mcptrace.KnownVersion(cl.version),
		Duration:        time.Since(cl.began),
	}
	op.Transport, op.Protocol = mcptrace.Network(o.transport)
	switch cl.method {
	case spec.MethodToolsCall:
		op.Tool = cl.target
	case "prompts/get":
		op.Prompt = cl.target
	}
	return op
}
