package mcp

import (
	"slices"
	"time"

	"github.com/mcp-resume/mcp-resume/spec"
)

// Operation is one request a server received, once it is over, as the
// OpenTelemetry semantic conventions for MCP measure it in the histogram
// mcp.server.operation.duration (Options.OnOperation). Its values are bounded
// whatever clients send, so that they make a bounded number of series: a
// method MCP does not name is "_OTHER", a tool is named only when the server
// has it (it ran), a protocol version only when the server speaks it.
type Operation struct {
	// Method is mcp.method.name: "tools/call", "requests/resume", ...;
	// "_OTHER" for a method MCP does not have.
	Method string
	// Tool is gen_ai.tool.name: the tool a tools/call ran; "" for none (another
	// method, or a tool the server does not have).
	Tool string
	// ErrorType is error.type, as on the request's span: "" when it did not
	// fail.
	ErrorType string
	// ProtocolVersion is mcp.protocol.version; "" when the request had none.
	ProtocolVersion string
	// Transport is network.transport: "pipe" (stdio), "tcp" (HTTP and
	// WebSocket), "" when the session did not say (SessionOptions.Transport).
	Transport string
	// Duration runs from the request's arrival to its response, or, for a
	// resumable request or a task, to the end of its span (its final response
	// delivered, or its end otherwise).
	Duration time.Duration
}

// methodOther stands for a method MCP does not have, in span names and
// attributes: a client's made-up methods make neither unbounded.
const methodOther = "_OTHER"

// knownMethod returns method when MCP has it, else methodOther.
func knownMethod(method string) string {
	if spec.IsMethod(method) {
		return method
	}
	return methodOther
}

// operation returns what the request says of its operation (its tool comes
// when it runs: reqSpan.ran): its method, protocol version and transport, each
// one of those known or "" (the metric's attributes are bounded whatever a
// client sends).
func (src spanSource) operation() (method, version, transport string) {
	method = knownMethod(src.m.Method)
	version = src.version()
	if !slices.Contains(spec.Versions, version) {
		version = ""
	}
	if !src.rerun {
		switch src.c.transport {
		case TransportStdio:
			transport = "pipe"
		case TransportHTTP, TransportWebSocket:
			transport = "tcp"
		}
	}
	return method, version, transport
}

// ran records that the span's tools/call runs tool, a tool the server has
// (the core's middleware runs right before it).
func (sp *reqSpan) ran(tool string) {
	if sp == nil || sp.s.onOp == nil {
		return
	}
	sp.mu.Lock()
	sp.op.Tool = tool
	sp.mu.Unlock()
}
