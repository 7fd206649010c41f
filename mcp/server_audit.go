package mcp

import (
	"encoding/json"
	"errors"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-resume/mcp-resume/audit"
	"github.com/mcp-resume/mcp-resume/resume"
	"github.com/mcp-resume/mcp-resume/spec"
)

// The audit trail (Options.Audit). Only tools/call is audited: each call the
// server received, once, when it is over, and each one it refused. A call's
// audit rides on its span (reqSpan), which ends exactly once whichever way
// the call ends (answered, failed, cancelled, its connection lost, a
// resumable request's response delivered or the request ended otherwise), so
// the event is told at the span's end (reqSpan.finish). What it says is
// gathered there too: the answer's error or result (reqSpan.result,
// reqSpan.failed), the cause of an end without one (reqSpan.endCause), a
// refusal (call.refused).
//
// A request that names another (a 2026 retry with requestState,
// requests/resume, tasks/*) is not a call of its own: it makes no event. A
// keyed call sent again that joins the call its key names makes none either:
// that call's event is its.

// callAudit is what a call's audit event is made of, beside its span.
type callAudit struct {
	// ev holds what is known as the call arrives; Outcome and Reason are
	// set under the span's mu.
	ev audit.Event
	// sent is the size of the response written for the call (reqSpan.sent).
	sent atomic.Int64
	// skip: the call joined another (its key's): no event of its own.
	// refused: it was refused before its tool ran (reqSpan.refused). Both are
	// set before the span ends, and read as it ends.
	skip, refused bool
}

// auditOf returns the audit of request m, received by c, when the server
// audits and m is a tools/call of its own; nil otherwise.
func auditOf(c *connState, m *spec.Message, rerun bool) *callAudit {
	s := c.s
	if s.audit == nil || m.Method != string(mcp.MethodToolsCall) {
		return nil
	}
	a := &callAudit{ev: audit.Event{
		Tool:      m.Target(),
		RequestID: idText(m.ID),
		BytesIn:   int64(len(m.Params)),
	}}
	src := spanSource{c: c, m: m, rerun: rerun}
	a.ev.ProtocolVersion = src.version()
	if !rerun {
		a.ev.Principal, a.ev.Transport = c.principal, c.transport
	}
	if r := s.policy(a.ev.Tool).Arguments; r != "" {
		r.Apply(arguments(m.Params), &a.ev)
	}
	return a
}

// arguments returns the arguments of a tools/call's params, read as mcp-go
// reads them (encoding/json, where the scanner cannot answer as it would).
func arguments(params json.RawMessage) json.RawMessage {
	if v, _, ok := spec.Member(params, "arguments"); ok {
		return v
	}
	var p struct {
		Arguments json.RawMessage `json:"arguments"`
	}
	_ = json.Unmarshal(params, &p)
	return p.Arguments
}

// verdict records how the call ended, unless the span has ended already.
// Later verdicts override earlier ones, as the span's error.type does: a
// result that then expires undelivered is lost.
func (sp *reqSpan) verdict(o audit.Outcome, reason string) {
	if sp == nil || sp.aud == nil {
		return
	}
	sp.mu.Lock()
	sp.aud.ev.Outcome, sp.aud.ev.Reason = o, reason
	sp.mu.Unlock()
}

// sent records the size of the response written for the call.
func (sp *reqSpan) sent(n int) {
	if sp != nil && sp.aud != nil {
		sp.aud.sent.Store(int64(n))
	}
}

// audited tells Options.Audit of the call, as its span ends.
func (sp *reqSpan) audited() {
	a := sp.aud
	if a == nil || a.skip {
		return
	}
	sp.mu.Lock()
	ev := a.ev
	sp.mu.Unlock()
	ev.Start, ev.End = sp.came(), time.Now()
	ev.BytesOut = a.sent.Load()
	switch {
	case a.refused:
		ev.Outcome = audit.Refused // its reason is its error's (failed)
	case ev.Outcome == "":
		// Ended with a response that is not its handler's: the engine's own
		// (Server.Abandon's server_stopped; a store lost ends the request
		// first, with its cause).
		ev.Outcome, ev.Reason = audit.Lost, string(spec.ReasonServerStopped)
	}
	if sp.span != nil {
		if sc := sp.span.SpanContext(); sc.IsValid() {
			ev.TraceID, ev.SpanID = sc.TraceID().String(), sc.SpanID().String()
		}
	}
	sp.s.audit(ev)
}

// refused ends the span of a tools/call the server refused before its tool
// ran, answered with e: its audit event says refused, for e's reason. Every
// refusal of a call goes through here: startCall's (its credentials, and
// every refusal accept returns) and refuse's (a server closed, an era or
// version it does not serve).
func (cl *call) refused(e *spec.Error) { cl.span.refused(e) }

// refused is call.refused on the span alone.
func (sp *reqSpan) refused(e *spec.Error) {
	sp.markRefused()
	sp.end(e)
}

// markRefused says the call was refused before its tool ran, by its tool's
// limits (Server.admit): its span ends as the call's answer goes out.
func (sp *reqSpan) markRefused() {
	if sp != nil && sp.aud != nil {
		sp.aud.refused = true
	}
}

// notAccepted ends the span of a call accept did not run for cause with no
// refusal: cancelled before it came, its session closed, or joined to the
// call its key names (which has the event).
func (cl *call) notAccepted(cause error) {
	switch sp := cl.span; {
	case errors.Is(cause, errCancelledEarly):
		sp.verdict(audit.Cancelled, "")
	case errors.Is(cause, errConnectionLost):
		sp.verdict(audit.Lost, "connection_lost")
	case sp != nil && sp.aud != nil:
		sp.aud.skip = true // joined: not ended yet, so nobody reads skip
	}
	cl.span.end(nil)
}

// auditLost is the engine's OnLost for the audit: a request that was
// processing when the process running it was lost ended now, lost. Its
// record knows its principal, id and start, not its tool.
func (s *Server) auditLost(rec resume.Record, cause error) {
	reason := spec.ReasonServerRestarted
	if errors.Is(cause, resume.ErrOwnerLost) {
		reason = spec.ReasonOwnerLost
	}
	ev := audit.Event{
		Start: rec.Created, End: time.Now(), Principal: rec.Principal,
		RequestID: idText(rec.ID), Outcome: audit.Lost, Reason: string(reason),
	}
	if m, err := spec.Decode(rec.Payload); err == nil && m.Method == string(mcp.MethodToolsCall) {
		ev.Tool = m.Target()
	}
	s.audit(ev)
}
