package gateway

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-resume/mcp-resume/internal/mcptrace"
	"github.com/mcp-resume/mcp-resume/mcp/client"
	"github.com/mcp-resume/mcp-resume/spec"
)

// Tracing (Options.TracerProvider) and measuring (Options.OnOperation): every
// request the gateway sends its upstream is a CLIENT span, named and
// attributed as the semantic conventions for MCP say, and an Operation of
// mcp.client.operation.duration once it is over. Its trace context goes in
// the upstream request's _meta (SEP-414), so that the upstream's span of it
// is the CLIENT span's child.
//
// A tools/call's span (upSpan) is a child of the core's SERVER span of the
// client's call (the tool's context carries it) and goes in its
// requests/resume too. One span per upstream request: a call the gateway
// sends as a new request (asked again with the answers to the upstream's
// questions, run again on the next upstream when it is restartable) gets a
// new one. Every other request (exchange) is a span of its own: below the
// core's SERVER span of the client's request it serves (resources/read,
// prompts/get, completion/complete, resources/subscribe, the tasks/* that
// follow an upstream's task), or a root for the gateway's own (initialize,
// server/discover, the lists it mirrors). Without a TracerProvider the trace
// context of the core's span, if any, is passed on as it is.
//
// The params are read for the method's target only (the tool or prompt name,
// a resource's URI) and the protocol version: never a token, a key, a task
// id or an argument.

// tracerName names the tracer of the gateway's spans.
const tracerName = "github.com/mcp-resume/mcp-resume/gateway"

// observer traces and measures the gateway's upstream requests. A nil
// *observer (a gateway that does neither) does nothing and reads nothing.
type observer struct {
	tracer    trace.Tracer           // nil: no spans
	onOp      func(client.Operation) // nil: no Operations
	transport string                 // the upstream's: mcptrace.Transport*
}

// newObserver returns the observer of a gateway with opts; nil when they ask
// for neither spans nor Operations.
func newObserver(opts *Options) *observer {
	if opts.TracerProvider == nil && opts.OnOperation == nil {
		return nil
	}
	o := &observer{onOp: opts.OnOperation, transport: mcptrace.TransportStdio}
	if opts.TracerProvider != nil {
		o.tracer = opts.TracerProvider.Tracer(tracerName)
	}
	switch {
	case isWebSocket(opts.URL):
		o.transport = mcptrace.TransportWebSocket
	case opts.URL != "":
		o.transport = mcptrace.TransportHTTP
	}
	return o
}

// upReq is one upstream request being traced and measured. A nil *upReq is
// one that is neither.
type upReq struct {
	o                       *observer
	span                    trace.Span // nil when the gateway does not trace
	began                   time.Time
	method, target, version string
}

// begin starts the span of upstream request id of method on target (a
// tool's or a prompt's name, a resource's URI; "" for none) in protocol
// version, below the span ctx carries; nil for a nil o.
func (o *observer) begin(ctx context.Context, method, target string, id spec.ID, version string) *upReq {
	if o == nil {
		return nil
	}
	r := &upReq{o: o, began: time.Now(), method: method, target: target, version: version}
	if o.tracer != nil {
		r.span = mcptrace.Start(ctx, o.tracer, mcptrace.Name(method, target),
			mcptrace.Attributes(method, target, string(id), version, o.transport))
	}
	return r
}

// negotiated records version as the request's protocol version (an
// initialize's, once the upstream answered it).
func (r *upReq) negotiated(version string) {
	if r == nil || version == "" {
		return
	}
	r.version = version
	if r.span != nil {
		r.span.SetAttributes(mcptrace.ProtocolVersion.String(version))
	}
}

// end ends the request's span as out, and tells Options.OnOperation of it.
func (r *upReq) end(out mcptrace.Outcome) {
	if r == nil {
		return
	}
	if r.span != nil {
		out.Record(r.span)
		r.span.End()
	}
	if r.o.onOp == nil {
		return
	}
	op := client.Operation{
		Method: mcptrace.KnownMethod(r.method), ErrorType: out.ErrorType, StatusCode: out.StatusCode,
		ProtocolVersion: mcptrace.KnownVersion(r.version), Duration: time.Since(r.began),
	}
	op.Transport, op.Protocol = mcptrace.Network(r.o.transport)
	switch r.method {
	case spec.MethodToolsCall:
		op.Tool = r.target
	case "prompts/get":
		op.Prompt = r.target
	}
	r.o.onOp(op)
}

// exchange sends request id of method with params on p and waits for its
// answer (peer.send), as a CLIENT span of its own below the span ctx carries
// and an Operation, when the gateway traces or measures. The request carries
// the trace context of its span in its _meta; without a span of the
// gateway's, that of the span ctx carries (the core's of the client's
// request), if any.
func exchange(ctx context.Context, p *peer, id spec.ID, method string, params json.RawMessage, renew bool) (json.RawMessage, error) {
	o := p.g.obs
	if o == nil {
		if trace.SpanContextFromContext(ctx).IsValid() {
			params = withTraceMeta(params, ctx)
		}
		return p.send(ctx, id, method, params, renew)
	}
	var h struct {
		Name            string `json:"name"`
		URI             string `json:"uri"`
		ProtocolVersion string `json:"protocolVersion"` // initialize's
		Meta            struct {
			ProtocolVersion string `json:"io.modelcontextprotocol/protocolVersion"` // a 2026-07-28 request's
		} `json:"_meta"`
	}
	_ = json.Unmarshal(params, &h)
	var target string
	switch {
	case mcptrace.Targeted(method):
		target = h.Name
	case mcptrace.Addressed(method):
		target = h.URI
	}
	r := o.begin(ctx, method, target, id, cmp.Or(h.Meta.ProtocolVersion, h.ProtocolVersion, p.version))
	switch {
	case r.span != nil:
		params = withTraceMeta(params, trace.ContextWithSpan(ctx, r.span))
	case trace.SpanContextFromContext(ctx).IsValid():
		params = withTraceMeta(params, ctx)
	}
	raw, err := p.send(ctx, id, method, params, renew)
	if method == spec.MethodInitialize && err == nil {
		var res struct {
			ProtocolVersion string `json:"protocolVersion"`
		}
		_ = json.Unmarshal(raw, &res)
		r.negotiated(res.ProtocolVersion)
	}
	r.end(upstreamOutcome(err))
	return raw, err
}

// upstreamOutcome is how an upstream request that ended with err (nil: its
// result) ended.
func upstreamOutcome(err error) mcptrace.Outcome {
	var e *spec.Error
	switch {
	case err == nil:
		return mcptrace.Outcome{}
	case errors.As(err, &e):
		return mcptrace.Answered(e.Code, e.Message, string(e.Reason))
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return mcptrace.Unanswered("cancelled", err.Error())
	case errors.Is(err, errNotSent):
		return mcptrace.Unanswered("not_sent", err.Error())
	case errors.Is(err, errLost), errors.Is(err, errStreamLost):
		return mcptrace.Unanswered("connection_lost", err.Error())
	}
	return mcptrace.Unanswered(mcptrace.Other, err.Error())
}

// withTraceMeta returns params, a request's (a JSON object, or empty for
// none), with the W3C trace context of the span ctx carries in its _meta
// (traceparent, and tracestate when there is one); params as they are when
// they are not an object.
func withTraceMeta(params json.RawMessage, ctx context.Context) json.RawMessage {
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	if c["traceparent"] == "" {
		return params
	}
	var fields map[string]json.RawMessage
	if len(params) > 0 && json.Unmarshal(params, &fields) != nil {
		return params
	}
	if fields == nil {
		fields = map[string]json.RawMessage{}
	}
	var meta map[string]json.RawMessage
	if m, ok := fields["_meta"]; ok && json.Unmarshal(m, &meta) != nil {
		return params
	}
	if meta == nil {
		meta = map[string]json.RawMessage{}
	}
	delete(meta, "tracestate") // another span's
	for k, v := range c {
		meta[k], _ = json.Marshal(v)
	}
	fields["_meta"], _ = json.Marshal(meta)
	b, err := json.Marshal(fields)
	if err != nil {
		return params
	}
	return b
}

// upSpan keeps the span and the Operation of the upstream request a client's
// call runs as. A nil *upSpan is a call neither traced nor measured.
type upSpan struct {
	g    *Gateway
	ctx  context.Context // the call's: the core's span of it
	tool string
	req  *upReq // the current upstream request; nil before the first
}

// upstreamSpan returns the span keeper of a call of tool on ctx; nil when the
// gateway neither traces nor measures.
func (g *Gateway) upstreamSpan(ctx context.Context, tool string) *upSpan {
	if g.obs == nil {
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
	u.req = u.g.obs.begin(u.ctx, spec.MethodToolsCall, u.tool, id, version)
}

// finish ends the current span, as why ("": answered).
func (u *upSpan) finish(why string) {
	if u.req == nil {
		return
	}
	var out mcptrace.Outcome
	if why != "" {
		out = mcptrace.Unanswered(why, "the upstream request did not end with an answer")
	}
	u.req.end(out)
	u.req = nil
}

// event adds an event to the current span.
func (u *upSpan) event(name string, opts ...trace.EventOption) {
	if u == nil || u.req == nil || u.req.span == nil {
		return
	}
	u.req.span.AddEvent(name, opts...)
}

// inject puts the trace context of the current span into meta, an upstream
// request's _meta; without a span, that of the span ctx carries (the core's
// of the client's call, when the gateway itself does not trace).
func (u *upSpan) inject(ctx context.Context, meta map[string]any) {
	if u != nil && u.req != nil && u.req.span != nil {
		ctx = trace.ContextWithSpan(ctx, u.req.span)
	}
	withTrace(ctx, meta)
}

// end ends the call's last span with the call's outcome.
func (u *upSpan) end(res *mcpgo.CallToolResult, err error) {
	if u == nil || u.req == nil {
		return
	}
	var (
		e   *spec.Error
		out mcptrace.Outcome
	)
	switch {
	case err == nil:
		if res != nil && res.IsError {
			out = mcptrace.ToolFailed
		}
	case errors.As(err, &e):
		out = mcptrace.Answered(e.Code, e.Message, string(e.Reason))
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		out = mcptrace.Unanswered("cancelled", err.Error())
	default:
		out = mcptrace.Unanswered(mcptrace.Other, err.Error())
	}
	u.req.end(out)
	u.req = nil
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
