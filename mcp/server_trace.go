package mcp

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-resume/mcp-resume/audit"
	"github.com/mcp-resume/mcp-resume/resume"
	"github.com/mcp-resume/mcp-resume/spec"
)

// Tracing. With Options.TracerProvider set, every request a session receives
// gets a SERVER span named and attributed as the OpenTelemetry semantic
// conventions for MCP say ("tools/call countdown"; mcp.method.name,
// gen_ai.tool.name, jsonrpc.request.id, ...). Its parent is the client's span,
// from the traceparent and tracestate in params._meta (SEP-414), else from
// the HTTP headers of the POST that carried it (TracedStream).
//
// A call that becomes a resumable request keeps its span for its life: the
// span's trace context is stored with the request (resume.StartOptions.Trace,
// so in the Store too), its attachments and detachments are span events
// (resume.Observer), and it ends when the final response reaches a client, or
// when the request ends otherwise (cancelled, expired, the server stopped). A
// task's span ends when its work does. Everything that later names the
// request (requests/getStatus, requests/resume, a 2026 retry), on this
// instance or another, is a SERVER span whose parent is the request's stored
// span, so that a request has one trace; the client's own span of that later
// request, if it sent one, is the span's link.
//
// No span, name, attribute or event holds a resume token, a call key, a task
// id or a request state: the params are read for the method's target only.
//
// With no TracerProvider the core makes no span and reads nothing for one.

// instrumentation names the tracer the core's spans come from.
const instrumentation = "github.com/mcp-resume/mcp-resume/mcp"

// The attributes of the spans (the semantic conventions' names, and ours
// under mcp_resume.).
const (
	attrMethod          = attribute.Key("mcp.method.name")
	attrSessionID       = attribute.Key("mcp.session.id")
	attrProtocolVersion = attribute.Key("mcp.protocol.version")
	attrResourceURI     = attribute.Key("mcp.resource.uri")
	attrRequestID       = attribute.Key("jsonrpc.request.id")
	attrToolName        = attribute.Key("gen_ai.tool.name")
	attrPromptName      = attribute.Key("gen_ai.prompt.name")
	attrOperation       = attribute.Key("gen_ai.operation.name")
	attrNetTransport    = attribute.Key("network.transport")
	attrNetProtocol     = attribute.Key("network.protocol.name")
	attrClientAddress   = attribute.Key("client.address")
	attrErrorType       = attribute.Key("error.type")
	attrStatusCode      = attribute.Key("rpc.response.status_code")
	attrReason          = attribute.Key("mcp_resume.error.reason")
	attrAck             = attribute.Key("mcp_resume.ack")
	attrTask            = attribute.Key("mcp_resume.task")
	attrRerun           = attribute.Key("mcp_resume.rerun")
)

// The events on a request's span.
const (
	eventResumable = "mcp_resume.resumable" // the call became a resumable request (or a task)
	eventAttached  = "mcp_resume.attached"  // a client took it up
	eventDetached  = "mcp_resume.detached"  // its client went away; it runs on
	eventCompleted = "mcp_resume.completed" // its handler returned with no client attached: the response waits for one
	eventRerun     = "mcp_resume.rerun"     // a restartable request runs again (after a restart, or claimed)
)

// spanLost names the span of a request that ended, failed, because the
// process that ran it was lost (a restart, a lost instance of a cluster).
const spanLost = "mcp_resume.request_failed"

// The transports a session may name (SessionOptions.Transport), for its
// spans' network.transport and network.protocol.name.
const (
	TransportStdio     = "stdio"
	TransportHTTP      = "http"
	TransportWebSocket = "websocket"
)

// TracedStream is a Stream that carries the W3C trace context of the
// transport's own request (the traceparent and tracestate headers of a
// Streamable HTTP POST): the parent of the span of a request whose params
// carry none.
type TracedStream interface {
	Stream
	// TraceHeaders returns the traceparent and tracestate the stream's
	// transport request came with; "" for none.
	TraceHeaders() (traceparent, tracestate string)
}

var w3c propagation.TraceContext

// reqSpan is the span of one request, started once its parent is known
// (within) and ended once (end and its kin), whichever way the request ends
// first. A nil *reqSpan is a request traced by nobody: every method is a
// no-op on it.
//
// It also measures the request for Options.OnOperation (op): a server that
// measures but does not trace has a reqSpan with no span.
type reqSpan struct {
	s *Server
	// Until the span starts: what it is made of.
	src spanSource
	at  instant            // when the request came
	in  *trace.SpanContext // the client's, from params._meta or the transport; only with a tracer, until the span starts

	started bool        // within ran
	span    trace.Span  // nil until within, and without a tracer
	done    atomic.Bool // ended
	// detached: the request has no client attached now (Observer).
	detached atomic.Bool

	mu sync.Mutex // guards op once the span started, and aud's verdict
	op Operation  // for Options.OnOperation; Duration set at the end

	// aud is the call's audit (Options.Audit): a tools/call of its own
	// (callSpanOf); nil for every other request.
	aud *callAudit
}

// came returns when the span's request came.
func (sp *reqSpan) came() time.Time { return sp.at.time() }

// spanOf returns the span of request m, received on st by c, not started yet;
// nil when the server neither traces nor measures.
func spanOf(c *connState, m *spec.Message, st Stream) *reqSpan {
	return newSpan(c, m, st, nil)
}

// callSpanOf is spanOf for a request that is a call of its own, not one that
// names another (startCall's, refuse's, a call run again: rerun): a
// tools/call's span carries its audit when the server audits.
func callSpanOf(c *connState, m *spec.Message, st Stream, rerun bool) *reqSpan {
	return newSpan(c, m, st, auditOf(c, m, rerun))
}

func newSpan(c *connState, m *spec.Message, st Stream, a *callAudit) *reqSpan {
	s := c.s
	if s.tracer == nil && s.onOp == nil && a == nil {
		return nil
	}
	sp := &reqSpan{s: s, src: spanSource{c: c, m: m}, at: now(), aud: a}
	if s.tracer != nil {
		in := incoming(m.Params, st)
		sp.in = &in
	}
	return sp
}

// incoming returns the client's span context of a request: the traceparent
// and tracestate in its params' _meta (SEP-414), else its stream's
// (TracedStream). Invalid when it has none.
func incoming(params json.RawMessage, st Stream) trace.SpanContext {
	var parent, state string
	if meta, found, ok := spec.Member(params, "_meta"); found || !ok {
		if !ok {
			meta = slowMeta(params)
		}
		parent, state = spec.StringMember(meta, "traceparent"), spec.StringMember(meta, "tracestate")
	}
	if parent == "" {
		if ts, ok := st.(TracedStream); ok {
			parent, state = ts.TraceHeaders()
		}
	}
	return extract(parent, state)
}

// slowMeta is params' _meta by encoding/json, for params the scanner cannot
// read.
func slowMeta(params json.RawMessage) json.RawMessage {
	var p struct {
		Meta json.RawMessage `json:"_meta"`
	}
	_ = json.Unmarshal(params, &p)
	return p.Meta
}

// extract returns the span context a traceparent and tracestate name;
// invalid for a malformed or absent traceparent.
func extract(parent, state string) trace.SpanContext {
	if parent == "" {
		return trace.SpanContext{}
	}
	ctx := w3c.Extract(context.Background(), propagation.MapCarrier{"traceparent": parent, "tracestate": state})
	return trace.SpanContextFromContext(ctx)
}

// within starts the span: a child of the trace context h holds (a request
// the span's request names by token), with the client's span as its link;
// for h nil, or one without a trace context, a child of the client's span.
func (sp *reqSpan) within(h resume.Handle) {
	if sp == nil || sp.started {
		return
	}
	sp.started = true
	if sp.s.onOp != nil {
		method, version, transport := sp.src.operation()
		sp.mu.Lock()
		sp.op.Method, sp.op.ProtocolVersion, sp.op.Transport = method, version, transport
		sp.mu.Unlock()
	}
	if sp.s.tracer == nil {
		sp.src = spanSource{}
		return
	}
	var in trace.SpanContext
	if sp.in != nil {
		in, sp.in = *sp.in, nil
	}
	parent, link := in, trace.SpanContext{}
	if h != nil {
		if tc := h.Trace(); !tc.IsZero() {
			if stored := extract(tc.Parent, tc.State); stored.IsValid() {
				parent, link = stored, in
			}
		}
	}
	ctx := context.Background()
	if parent.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, parent)
	}
	// The attributes are set once the span is known to record (an unsampled
	// request's are not made), and not passed to Start, which would copy
	// them once more for samplers (the SDK's read none of them).
	name, target := sp.src.name()
	if link.IsValid() && !link.Equal(parent) {
		_, sp.span = sp.s.tracer.Start(ctx, name, spanKindServer, trace.WithTimestamp(sp.came()), trace.WithLinks(trace.Link{SpanContext: link}))
	} else {
		_, sp.span = sp.s.tracer.Start(ctx, name, spanKindServer, trace.WithTimestamp(sp.came()))
	}
	if sp.span.IsRecording() {
		sp.span.SetAttributes(sp.src.attributes(target)...)
	}
	sp.src = spanSource{} // a request's span outlives its session: it holds neither
}

// spanKindServer is the option of every request's span.
var spanKindServer = trace.WithSpanKind(trace.SpanKindServer)

// spanSource is what a request's span is made of as it starts: the request,
// the session it came on, and whether it is run again.
type spanSource struct {
	c *connState
	m *spec.Message
	// rerun: the request runs again (after a restart or a claim), on no
	// session and no transport of its own.
	rerun bool
}

// name is the span's name: the method, and its target for tools/call and
// prompts/get ("tools/call countdown"), which it returns too.
func (sp spanSource) name() (name, target string) {
	m := sp.m
	if !spec.IsMethod(m.Method) {
		return methodOther, "" // a client's made-up method names no span
	}
	switch m.Method {
	case string(mcp.MethodToolsCall), string(mcp.MethodPromptsGet):
		if target := m.Target(); target != "" {
			return m.Method + " " + target, target
		}
	}
	return m.Method, ""
}

// version returns the protocol version of the span's request: a 2026
// request's own, else its session's (or, for initialize, the one it asks
// for); "" when there is none.
func (sp spanSource) version() string {
	c, m := sp.c, sp.m
	if env := m.Envelope(); env.Modern() {
		return env.Version
	}
	if c.stateless || sp.rerun {
		return ""
	}
	v := c.sess.get().protocol
	if v == "" && m.Method == spec.MethodInitialize {
		v = spec.StringMember(m.Params, "protocolVersion")
	}
	return v
}

// attributes returns the span's attributes; target is the tool or prompt
// (name).
func (sp spanSource) attributes(target string) []attribute.KeyValue {
	c, m := sp.c, sp.m
	attrs := make([]attribute.KeyValue, 0, 10)
	attrs = append(attrs, attrMethod.String(knownMethod(m.Method)))
	if len(m.ID) > 0 {
		attrs = append(attrs, attrRequestID.String(idText(m.ID)))
	}
	switch m.Method {
	case string(mcp.MethodToolsCall):
		if target != "" {
			attrs = append(attrs, attrToolName.String(target))
		}
		attrs = append(attrs, attrOperation.String("execute_tool"))
	case string(mcp.MethodPromptsGet):
		if target != "" {
			attrs = append(attrs, attrPromptName.String(target))
		}
	case string(mcp.MethodResourcesRead):
		if uri := m.Target(); uri != "" {
			attrs = append(attrs, attrResourceURI.String(uri)) // not in the name: too many of them
		}
	}
	if v := sp.version(); v != "" {
		attrs = append(attrs, attrProtocolVersion.String(v))
	}
	if sp.rerun {
		return append(attrs, attrRerun.Bool(true)) // its session and transport are no client's
	}
	if !m.Envelope().Modern() && !c.stateless {
		attrs = append(attrs, attrSessionID.String(c.sess.id))
	}
	switch c.transport {
	case TransportStdio:
		attrs = append(attrs, attrNetTransport.String("pipe"))
	case TransportHTTP, TransportWebSocket:
		attrs = append(attrs, attrNetTransport.String("tcp"), attrNetProtocol.String(c.transport))
	}
	if c.remote != "" {
		attrs = append(attrs, attrClientAddress.String(c.remote))
	}
	return attrs
}

// idText is a JSON-RPC id as the jsonrpc.request.id attribute has it: a
// string id's text, a number's digits.
func idText(id spec.ID) string {
	if len(id) > 1 && id[0] == '"' {
		if inner := id[1 : len(id)-1]; !bytes.ContainsAny(inner, `\"`) {
			return string(inner) // no escape: its text as it is
		}
		var s string
		if json.Unmarshal(id, &s) == nil {
			return s
		}
	}
	return string(id)
}

// context returns ctx carrying the span (started when it was not), for a
// handler that makes spans of its own below it.
func (sp *reqSpan) context(ctx context.Context) context.Context {
	if sp == nil {
		return ctx
	}
	sp.within(nil)
	if sp.span == nil {
		return ctx
	}
	return trace.ContextWithSpan(ctx, sp.span)
}

// traceContext returns the span's W3C trace context, for the request's Record.
func (sp *reqSpan) traceContext() resume.TraceContext {
	if sp == nil || sp.span == nil {
		return resume.TraceContext{}
	}
	sc := sp.span.SpanContext()
	if !sc.IsValid() {
		return resume.TraceContext{}
	}
	return resume.TraceContext{Parent: traceparent(sc), State: sc.TraceState().String()}
}

// traceparent is sc's W3C traceparent, as the propagator writes it (version
// 00, the sampled flag alone).
func traceparent(sc trace.SpanContext) string {
	var b [55]byte
	tid, sid := sc.TraceID(), sc.SpanID()
	copy(b[:], "00-")
	hex.Encode(b[3:35], tid[:])
	b[35] = '-'
	hex.Encode(b[36:52], sid[:])
	b[52] = '-'
	hex.Encode(b[53:], []byte{byte(sc.TraceFlags() & trace.FlagsSampled)})
	return string(b[:])
}

// event adds an event to the span.
func (sp *reqSpan) event(name string, attrs ...attribute.KeyValue) {
	if sp == nil || sp.span == nil {
		return
	}
	sp.span.AddEvent(name, trace.WithAttributes(attrs...))
}

// end ends the span: e, when not nil, is the error the request was answered
// with.
func (sp *reqSpan) end(e *spec.Error) {
	if sp == nil || !sp.ending() {
		return
	}
	if e != nil {
		sp.failed(e.Code, e.Message, string(e.Reason))
	}
	sp.finish()
}

// ending starts the span if it has not started, and reports whether this is
// its one end.
func (sp *reqSpan) ending() bool {
	sp.within(nil)
	return sp.done.CompareAndSwap(false, true)
}

// endResponse ends the span with the response data, as written: an error
// response's error, or none.
func (sp *reqSpan) endResponse(data []byte) {
	if sp == nil {
		return
	}
	var e *spec.Error
	if raw, found, _ := spec.Member(data, "error"); found {
		e = new(spec.Error)
		if json.Unmarshal(raw, e) != nil {
			e = &spec.Error{Code: spec.CodeInternalError}
		}
	}
	sp.end(e)
}

// endWith ends the span with mcp-go's answer to the request.
func (sp *reqSpan) endWith(resp mcp.JSONRPCMessage) {
	if sp == nil || !sp.ending() {
		return
	}
	sp.result(resp)
	sp.finish()
}

// result records mcp-go's answer on the span: a JSON-RPC error's code, or a
// tool's own error (isError).
func (sp *reqSpan) result(resp mcp.JSONRPCMessage) {
	if sp == nil || !sp.started {
		return
	}
	var d *mcp.JSONRPCErrorDetails
	switch v := resp.(type) {
	case mcp.JSONRPCError:
		d = &v.Error
	case *mcp.JSONRPCError:
		d = &v.Error
	}
	if d != nil {
		sp.failed(d.Code, d.Message, reasonOf(d.Data))
		return
	}
	if failed(resp) { // a tool's own error, in a successful JSON-RPC response
		sp.setError("tool_error", "the tool's result is an error")
		sp.verdict(audit.Error, "tool_error")
		return
	}
	sp.verdict(audit.OK, "")
}

// failed records an error response: its code always; error.type and the
// error status for the codes the conventions count as the server's failures
// (every code but those of a request the server could not serve: parse
// error, invalid request, method not found, invalid params, resource not
// found); its data.reason, when there is one.
func (sp *reqSpan) failed(code int, msg, reason string) {
	sp.verdict(audit.Error, reason)
	s := strconv.Itoa(code)
	if sp.span != nil {
		sp.span.SetAttributes(attrStatusCode.String(s))
		if reason != "" {
			sp.span.SetAttributes(attrReason.String(reason))
		}
	}
	switch code {
	case spec.CodeParseError, spec.CodeInvalidRequest, spec.CodeMethodNotFound, spec.CodeInvalidParams, codeResourceNotFound:
		return
	}
	sp.setError(s, msg)
}

// setError records error.type t on the span (with the error status, msg its
// description) and the measure.
func (sp *reqSpan) setError(t, msg string) {
	if sp.span != nil {
		sp.span.SetAttributes(attrErrorType.String(t))
		sp.span.SetStatus(codes.Error, msg)
	}
	if sp.s.onOp != nil {
		sp.mu.Lock()
		sp.op.ErrorType = t
		sp.mu.Unlock()
	}
}

// finish ends the span, and tells Options.OnOperation of the request and
// Options.Audit of the call.
func (sp *reqSpan) finish() {
	if sp.span != nil {
		sp.span.End()
	}
	if sp.aud != nil {
		sp.audited()
	}
	if f := sp.s.onOp; f != nil {
		sp.mu.Lock()
		op := sp.op
		sp.mu.Unlock()
		op.Duration = time.Since(sp.came())
		f(op)
	}
}

// codeResourceNotFound is MCP's resources/read error for an unknown resource.
const codeResourceNotFound = -32002

// reasonOf returns the data.reason of an error's data as mcp-go holds it.
func reasonOf(data any) string {
	switch d := data.(type) {
	case json.RawMessage:
		return spec.StringMember(d, "reason")
	case map[string]any:
		s, _ := d["reason"].(string)
		return s
	}
	return ""
}

// endCause ends the span of a request that ended without a response, for
// cause: cancelled by its client, its connection lost, expired, the server
// stopping. error.type names it; none of them is the server's failure.
func (sp *reqSpan) endCause(cause error) {
	if sp == nil || !sp.ending() {
		return
	}
	var t string
	switch {
	case errors.Is(cause, errClientCancel), errors.Is(cause, resume.ErrCancelled):
		t = "cancelled"
	case errors.Is(cause, errConnectionLost):
		t = "connection_lost"
	case errors.Is(cause, resume.ErrExpired):
		t = "expired"
	case errors.Is(cause, resume.ErrClosed):
		t = "shutdown"
	case errors.Is(cause, resume.ErrStoreLost):
		t = string(spec.ReasonStoreLost)
	case errors.Is(cause, resume.ErrEnded):
	default:
		t = "_OTHER"
	}
	switch t {
	case "":
	case "cancelled":
		sp.verdict(audit.Cancelled, "")
	case "_OTHER":
		sp.verdict(audit.Lost, "")
	default:
		sp.verdict(audit.Lost, t)
	}
	if t != "" {
		if sp.span != nil {
			sp.span.SetAttributes(attrErrorType.String(t))
		}
		if sp.s.onOp != nil {
			sp.mu.Lock()
			sp.op.ErrorType = t
			sp.mu.Unlock()
		}
	}
	sp.finish()
}

// observer returns what the engine tells of the request the span stands for;
// nil when there is no span.
func (sp *reqSpan) observer() resume.Observer {
	if sp == nil {
		return nil
	}
	return spanObserver{sp}
}

// spanObserver puts what happens to a request on its span.
type spanObserver struct{ sp *reqSpan }

var _ resume.Observer = spanObserver{}

func (o spanObserver) Attached(ack uint64) {
	o.sp.detached.Store(false)
	o.sp.event(eventAttached, attrAck.Int64(int64(ack)))
}

func (o spanObserver) Detached() {
	o.sp.detached.Store(true)
	o.sp.event(eventDetached)
}

func (o spanObserver) Delivered()        { o.sp.end(nil) }
func (o spanObserver) Ended(cause error) { o.sp.endCause(cause) }

// span returns the span of request r, of message m, run again after a
// restart or a claim (nil when the server does not trace): a SERVER span of
// the request's stored trace (its parent the span of the request's first
// run, its link the client's span, from the stored request's _meta), whose
// events and end are the request's, as a span of a call made resumable has.
func (rr *reruns) span(c *connState, m *spec.Message, r *resume.Request) *reqSpan {
	sp := callSpanOf(c, m, nil, true)
	if sp == nil {
		return nil
	}
	sp.src.rerun = true
	sp.within(r)
	sp.event(eventRerun)
	r.Observe(sp.observer())
	if r.Gone() { // it ended before it was observed
		sp.endCause(r.Cause())
	}
	return sp
}

// lost is the engine's OnLost: a request that was processing when the
// process running it was lost ended now, failed (server_restarted,
// owner_lost). It is a span of the request's stored trace, below the span of
// the request's run that was lost, at the moment it ended; nothing when the
// server does not trace or the request has no trace.
func (rr *reruns) lost(rec resume.Record, cause error) {
	s := rr.s
	if s.tracer == nil || rec.Trace.IsZero() {
		return
	}
	parent := extract(rec.Trace.Parent, rec.Trace.State)
	if !parent.IsValid() {
		return
	}
	reason := spec.ReasonServerRestarted
	if errors.Is(cause, resume.ErrOwnerLost) {
		reason = spec.ReasonOwnerLost
	}
	attrs := []attribute.KeyValue{
		attrRequestID.String(idText(rec.ID)), attrErrorType.String(string(reason)), attrReason.String(string(reason)),
	}
	if rec.Task {
		attrs = append(attrs, attrTask.Bool(true))
	}
	ctx := trace.ContextWithRemoteSpanContext(context.Background(), parent)
	_, sp := s.tracer.Start(ctx, spanLost, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
	sp.SetStatus(codes.Error, cause.Error())
	sp.End()
}
