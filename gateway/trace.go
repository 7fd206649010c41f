package gateway

import (
	"context"
	"errors"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-resume/mcp-resume/internal/mcptrace"
	"github.com/mcp-resume/mcp-resume/spec"
)

// Tracing (Options.TracerProvider): every tools/call the gateway sends its
// upstream is a CLIENT span, a child of the core's SERVER span of the
// client's call (the tool's context carries it), named and attributed as the
// semantic conventions for MCP say; its trace context goes in the upstream
// request's _meta (SEP-414), and in its requests/resume, so that the
// upstream's span of the call is the CLIENT span's child. One span per
// upstream request: a call the gateway sends as a new request (asked again
// with the answers to the upstream's questions, run again on the next
// upstream when it is restartable) gets a new one. Without a TracerProvider
// the trace context of the core's span, if any, is passed on as it is.

// tracerName names the tracer of the gateway's spans.
const tracerName = "github.com/mcp-resume/mcp-resume/gateway"

// upSpan is the CLIENT span of the upstream request a client's call runs as.
// A nil *upSpan is a call traced by nobody.
type upSpan struct {
	g    *Gateway
	ctx  context.Context // the call's: the core's span of it
	tool string
	span trace.Span // of the current upstream request; nil before the first
}

// upstreamSpan returns the span keeper of a call of tool on ctx; nil when the
// gateway does not trace.
func (g *Gateway) upstreamSpan(ctx context.Context, tool string) *upSpan {
	if g.tracer == nil {
		return nil
	}
	return &upSpan{g: g, ctx: ctx, tool: tool}
}

// start starts the span of a new upstream request id of the call, in the
// 2026-07-28 era when modern; the span of the call's previous upstream
// request, if it is still open, ends as why (an error.type; "" for a request
// that was answered).
func (u *upSpan) start(id spec.ID, modern bool, why string) {
	if u == nil {
		return
	}
	u.finish(why)
	version := Protocol
	if modern {
		version = spec.Version2026
	}
	transport := mcptrace.TransportStdio
	switch {
	case isWebSocket(u.g.opts.URL):
		transport = mcptrace.TransportWebSocket
	case u.g.opts.URL != "":
		transport = mcptrace.TransportHTTP
	}
	u.span = mcptrace.Start(u.ctx, u.g.tracer, mcptrace.Name("tools/call", u.tool),
		mcptrace.Attributes("tools/call", u.tool, string(id), version, transport))
}

// finish ends the current span, as why ("": answered).
func (u *upSpan) finish(why string) {
	if u.span == nil {
		return
	}
	if why != "" {
		mcptrace.Unanswered(why, "the upstream request did not end with an answer").Record(u.span)
	}
	u.span.End()
	u.span = nil
}

// event adds an event to the current span.
func (u *upSpan) event(name string, opts ...trace.EventOption) {
	if u == nil || u.span == nil {
		return
	}
	u.span.AddEvent(name, opts...)
}

// inject puts the trace context of the current span into meta, an upstream
// request's _meta; without a span, that of the span ctx carries (the core's
// of the client's call, when the gateway itself does not trace).
func (u *upSpan) inject(ctx context.Context, meta map[string]any) {
	if u != nil && u.span != nil {
		parent, state := mcptrace.Context(u.span)
		if parent != "" {
			meta["traceparent"] = parent
			if state != "" {
				meta["tracestate"] = state
			}
		}
		return
	}
	withTrace(ctx, meta)
}

// end ends the call's last span with the call's outcome.
func (u *upSpan) end(res *mcpgo.CallToolResult, err error) {
	if u == nil || u.span == nil {
		return
	}
	var e *spec.Error
	switch {
	case err == nil:
		if res != nil && res.IsError {
			mcptrace.ToolFailed.Record(u.span)
		}
	case errors.As(err, &e):
		mcptrace.Answered(e.Code, e.Message, string(e.Reason)).Record(u.span)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		mcptrace.Unanswered("cancelled", err.Error()).Record(u.span)
	default:
		mcptrace.Unanswered(mcptrace.Other, err.Error()).Record(u.span)
	}
	u.span.End()
	u.span = nil
}

// withTrace puts the W3C trace context of the span ctx carries (the core's
// span of the client's call, when the gateway traces) into meta, a request's
// _meta to the upstream (SEP-414): the upstream's spans of the call join the
// client's trace, below the gateway's span.
func withTrace(ctx context.Context, meta map[string]any) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	for k, v := range c {
		meta[k] = v
	}
}
