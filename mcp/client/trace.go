package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-resume/mcp-resume/internal/mcptrace"
	"github.com/mcp-resume/mcp-resume/spec"
)

// Tracing (Options.TracerProvider): every request the client sends (its
// calls and each connection's initialize) is a CLIENT span, named and
// attributed as the OpenTelemetry semantic conventions for MCP say, a child
// of the span the request's context carries. Its W3C trace context goes in
// the request's params._meta (SEP-414) and in every requests/resume of it,
// so that the server's span of the request is its child and the server's
// spans of the resumes link to it. A call's span lives as long as the call,
// across connections: a lost connection, a resume sent and a call sent again
// are its events. The params are read for the method's target only (the tool
// or prompt name, a resource's URI), never a token, a key, a task id or an
// argument.
//
// Measuring (Options.OnOperation): the same requests, each once it is over,
// as an Operation (operation.go).

// observer traces and measures the requests of a client. A nil *observer
// (a client that does neither) does nothing and reads nothing.
type observer struct {
	tracer    trace.Tracer         // nil: no spans
	onOp      func(Operation)      // nil: no Operations
	transport string               // Options.Transport
	attrs     []attribute.KeyValue // Options.SpanAttributes
}

// newObserver returns the observer of a client with opts; nil when they ask
// for neither spans nor Operations.
func newObserver(opts *Options) *observer {
	if opts.TracerProvider == nil && opts.OnOperation == nil {
		return nil
	}
	o := &observer{onOp: opts.OnOperation, transport: opts.Transport, attrs: opts.SpanAttributes}
	if tp := opts.TracerProvider; tp != nil {
		o.tracer = tp.Tracer(mcptrace.Instrumentation)
	}
	return o
}

// start starts cl's span, for a request on target (Targeted's name, or an
// Addressed resource's URI; "" for none) in protocol version, below the
// span ctx carries, and notes when the request began for its Operation.
func (o *observer) start(ctx context.Context, cl *call, target, version string) {
	if o == nil {
		return
	}
	cl.began, cl.target, cl.version = time.Now(), target, version
	if o.tracer == nil {
		return
	}
	cl.span = mcptrace.Start(ctx, o.tracer, mcptrace.Name(cl.method, target),
		append(mcptrace.Attributes(cl.method, target, string(cl.id), version, o.transport), o.attrs...))
	cl.traceparent, cl.tracestate = mcptrace.Context(cl.span)
}

// end ends cl's span with the request's outcome, its result res or its
// error err, and tells Options.OnOperation of it.
func (o *observer) end(cl *call, res json.RawMessage, err error) {
	if o == nil || cl.began.IsZero() {
		return
	}
	out := outcome(cl.method, res, err)
	if cl.span != nil {
		out.Record(cl.span)
		cl.span.End()
	}
	if o.onOp != nil {
		o.onOp(o.operation(cl, out))
	}
}

// target returns the target of a request of method whose params are fields:
// the tool's or the prompt's name, a resource's URI; "" for none.
func target(method string, fields map[string]json.RawMessage) string {
	var target string
	switch {
	case mcptrace.Targeted(method):
		_ = json.Unmarshal(fields["name"], &target)
	case mcptrace.Addressed(method):
		_ = json.Unmarshal(fields["uri"], &target)
	}
	return target
}

// outcome is how a request of method ended: with its result res, or its
// error err.
func outcome(method string, res json.RawMessage, err error) mcptrace.Outcome {
	var (
		e  *spec.Error
		pe *ProtocolError
		po *PolicyError
	)
	switch {
	case err == nil:
		if method == spec.MethodToolsCall {
			if v, found, _ := spec.Member(res, "isError"); found && bytes.Equal(v, []byte("true")) {
				return mcptrace.ToolFailed
			}
		}
		return mcptrace.Outcome{}
	case errors.As(err, &e): // a *ResumeError too
		return mcptrace.Answered(e.Code, e.Message, string(e.Reason))
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return mcptrace.Unanswered("cancelled", err.Error())
	case errors.Is(err, ErrNotResumable), errors.Is(err, errNoAnswer):
		return mcptrace.Unanswered("connection_lost", err.Error())
	case errors.Is(err, ErrGaveUp):
		return mcptrace.Unanswered("gave_up", err.Error())
	case errors.Is(err, ErrClosed):
		return mcptrace.Unanswered("closed", err.Error())
	case errors.As(err, &pe):
		return mcptrace.Unanswered("protocol_error", "the server broke the protocol")
	case errors.As(err, &po):
		return mcptrace.Unanswered("invalid_policy", po.Problem)
	}
	return mcptrace.Unanswered(mcptrace.Other, err.Error())
}

// spanVersion sets the protocol version of cl's span to the one initialize
// agreed on, when it is not the one asked for.
func spanVersion(cl *call, version string) {
	if version != cl.version {
		cl.version = version // the one the requests to come are sent in
		if cl.span != nil {
			cl.span.SetAttributes(mcptrace.ProtocolVersion.String(version))
		}
	}
}
