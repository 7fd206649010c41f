package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"

	"github.com/mcp-resume/mcp-resume/internal/mcptrace"
	"github.com/mcp-resume/mcp-resume/spec"
)

// Tracing (Options.TracerProvider): every call is a CLIENT span, named and
// attributed as the OpenTelemetry semantic conventions for MCP say, a child
// of the span the call's context carries. Its W3C trace context goes in the
// request's params._meta (SEP-414) and in every requests/resume of it, so
// that the server's span of the call is its child and the server's spans of
// the resumes link to it. The span lives as long as the call, across
// connections: a lost connection, a resume sent and a call sent again are its
// events. The params are read for the method's target only (the tool or
// prompt name), never a token, a key, a task id or an argument.

// startSpan starts cl's span, for a request whose params are fields, below
// the span ctx carries. Nothing when the client does not trace.
func (c *Client) startSpan(ctx context.Context, cl *call, fields map[string]json.RawMessage) {
	if c.tracer == nil {
		return
	}
	var target string
	if mcptrace.Targeted(cl.method) {
		_ = json.Unmarshal(fields["name"], &target)
	}
	var version string
	c.mu.Lock()
	if c.init != nil {
		version = c.init.ProtocolVersion
	}
	c.mu.Unlock()
	cl.span = mcptrace.Start(ctx, c.tracer, mcptrace.Name(cl.method, target),
		mcptrace.Attributes(cl.method, target, string(cl.id), version, c.opts.Transport))
	cl.traceparent, cl.tracestate = mcptrace.Context(cl.span)
}

// endSpan ends cl's span with the call's outcome: its result res or its
// error err.
func (c *Client) endSpan(cl *call, res json.RawMessage, err error) {
	sp := cl.span
	if sp == nil {
		return
	}
	defer sp.End()
	var (
		e  *spec.Error
		pe *ProtocolError
		po *PolicyError
	)
	switch {
	case err == nil:
		if cl.method == spec.MethodToolsCall {
			if v, found, _ := spec.Member(res, "isError"); found && bytes.Equal(v, []byte("true")) {
				mcptrace.ToolError(sp)
			}
		}
	case errors.As(err, &e): // a *ResumeError too
		mcptrace.Failed(sp, e.Code, e.Message, string(e.Reason))
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		mcptrace.Ended(sp, "cancelled", err.Error())
	case errors.Is(err, ErrNotResumable):
		mcptrace.Ended(sp, "connection_lost", err.Error())
	case errors.Is(err, ErrGaveUp):
		mcptrace.Ended(sp, "gave_up", err.Error())
	case errors.Is(err, ErrClosed):
		mcptrace.Ended(sp, "closed", err.Error())
	case errors.As(err, &pe):
		mcptrace.Ended(sp, "protocol_error", "the server broke the protocol")
	case errors.As(err, &po):
		mcptrace.Ended(sp, "invalid_policy", po.Problem)
	default:
		mcptrace.Ended(sp, "_OTHER", err.Error())
	}
}
