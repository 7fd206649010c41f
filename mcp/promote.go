package mcp

import (
	"bytes"
	"context"
	"errors"
	"time"

	"github.com/mcp-resume/mcp-resume/resume"
	"github.com/mcp-resume/mcp-resume/spec"
)

// promotion is how a call's policy makes it resumable, guarded by the call's
// mu: timer, for Mode After and for Always with QuickCall, promotes it when
// it fires; eager: its policy (Always) makes it resumable at once, and
// Options.QuickCall deferred that: its first message promotes it, or its
// timer, whichever comes first (see due); applied: the middleware applied a
// policy of Mode Always or After (Promote may make the call resumable),
// restartable that policy's; primed: the call's stream has given its client
// an id to reconnect with (PrimingStream): a quick window would come too
// late. pending: a tool call whose tool has not started, so whether and how
// it becomes resumable is not known yet: its stream holds its priming event
// back (held, until the middleware has applied the tool's policy).
type promotion struct {
	timer                       *time.Timer
	eager, applied, restartable bool
	primed, pending, held       bool
}

// Promotion: a call becomes a request of the engine (resumable, or a task).
// promote is the one way, whatever asks for it: its policy (at once, after its
// quick window or its After), its first message (due), its stream's priming
// event (beforePrime), a question of a 2026 request (ask), or its tool
// (Promote).

// promote makes the call resumable: registers it, tells its client (the
// policy notification, before any other message of the request; a task's
// creation), and attaches it to its connection. running says the tool
// already runs on the call's context, which must then end when the request
// does. Whether the request may run again after a restart is the applied
// policy's (cl.pol.restartable), whatever made the call resumable now. It returns
// the request, or nil when the call stays plain.
func (cl *call) promote(running bool) *resume.Request {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.done || cl.lost || cl.req != nil || cl.ctx.Err() != nil {
		// Answered, gone with its connection, a request already, or ended
		// (cancelled by its client before it became one: see cancelled).
		return nil
	}
	cl.pol.eager = false
	so, rd, askedTTL := cl.startOptionsLocked()
	r, tok, err := cl.c.s.eng.Start(cl.id, &so)
	if err != nil {
		cl.notStartedLocked(err)
		return nil
	}
	cl.token = tok
	// On the span before anything tells the client: a task's creation, once
	// answered, may be cancelled at once, and an ended span takes no event.
	if cl.span != nil { // the attribute's slice is not made for nobody
		cl.span.event(eventResumable, attrTask.Bool(cl.kind.task()))
	}
	if !cl.announceLocked(r, tok, so, rd, askedTTL) {
		return nil
	}
	cl.becomeLocked(r, so.Sink, running)
	return r
}

// hiddenLocked reports whether the call's request is one its client holds no
// token of: a client that did not declare SEP-975 (a request only for its
// session's stream reconnects), or a task, found by its task id: no policy,
// no sequence numbers, whatever the client declared.
func (cl *call) hiddenLocked() bool { return !cl.resumable || cl.kind.task() }

// startOptionsLocked is what the engine is told of the call as it starts its
// request: where its messages go (a 2026 request's through its first round
// rd; a task's nowhere yet), its token (its key, when its client named one),
// what a restart needs to run it again, a task's ttl (and the ttl its 2025
// client asked for when that was cut, askedTTL).
func (cl *call) startOptionsLocked() (so resume.StartOptions, rd *round, askedTTL time.Duration) {
	c, s := cl.c, cl.c.s
	hidden := cl.hiddenLocked()
	so = resume.StartOptions{AckMode: cl.ackMode && !hidden, Sink: cl.st, Principal: c.principal, Task: cl.kind.task(),
		Trace: cl.span.traceContext(), Observer: cl.span.observer()}
	// Its client can find it: by its token, its task id, or a deferred
	// answer's handle (one it may be given later: deferTimer).
	known := !hidden || cl.kind.task() || cl.dfr.deferred || cl.dfr.timer != nil
	if known {
		so.Token = cl.key // "": the engine makes one
	}
	// A task is restartable too: its client polls it by id, and gets the new
	// run's result.
	if cl.pol.restartable && known {
		so.Payload = bytes.Clone(cl.raw)
		if cl.key != "" {
			so.Payload = spec.WithoutKey(so.Payload) // a secret, not stored
		}
	}
	switch {
	case cl.kind.task():
		// Answered with its CreateTaskResult, then detached; tasks/get reads
		// its outbox.
		so.TTL, askedTTL = s.taskTTL(cl)
		so.Sink = nil
	case cl.dfr.deferred:
		// Answered with its deferred answer, then detached: the await tool
		// attaches to it.
		so.Sink = nil
	case cl.modern != nil:
		// Every message of a 2026 request goes through its rounds (MRTR).
		rd = &round{st: cl.st, id: cl.id, orig: cl.id}
		so.Sink = rd
	}
	if cl.span != nil { // a task starts with no client attached
		cl.span.detached.Store(so.Sink == nil)
	}
	return so, rd, askedTTL
}

// notStartedLocked records why the engine made no request of the call: a
// key of another request (the call is refused), or a bound (it runs plain).
func (cl *call) notStartedLocked(err error) {
	if errors.Is(err, resume.ErrExists) {
		cl.refusal = spec.NewError(spec.CodeInvalidParams, spec.ReasonKeyInUse, "the call key names another request: choose a new key for each call")
		return
	}
	cl.c.logger().Warn().Err(err).Str("request", string(cl.id)).Msg("request runs without a resume policy")
}

// announceLocked tells the client of r, the call's request with token tok: a
// task's creation, a 2026 request's state for its rounds (rd), the resume
// policy. It reports false when the policy could not be written and nobody
// can resume r (no key): r is cancelled, as a call whose connection was lost
// before it became resumable.
func (cl *call) announceLocked(r *resume.Request, tok string, so resume.StartOptions, rd *round, askedTTL time.Duration) bool {
	c, s := cl.c, cl.c.s
	if cl.kind.task() {
		tid := &taskID{ID: cl.id, Token: tok, Created: r.Created().UnixMilli(), TTL: so.TTL.Milliseconds()}
		data := taskResult(cl.id, tid, "working")
		if cl.kind.legacy() {
			s.taskList.add(c.principal, tid)
			cl.taskID = tid
			data = cl.legacyTaskResult(tid, "working", "", askedTTL)
		}
		if err := cl.st.Write(c.ctx, Message{Kind: KindResponse, Data: data}); err != nil {
			c.debug().Err(err).Str("request", string(cl.id)).Msg("writing a task's creation")
		}
	}
	if rd != nil {
		rd.gatherOn(s, r)
		rs := requestState{ID: cl.id, Token: tok}
		if m, derr := spec.Decode(cl.raw); derr == nil {
			rs.Name = m.Target()
		}
		rd.state = rs.encode()
		cl.round = rd
	}
	if cl.hiddenLocked() {
		return true
	}
	p := spec.ResumePolicyParams{RequestID: cl.id, ResumeToken: tok, MaxWait: &s.caps.MaxWait, MinWait: &s.caps.MinWait}
	msg := Message{Kind: KindNotification, Data: spec.AppendResumePolicy(make([]byte, 0, 192), &p)}
	switch err := cl.st.Write(c.ctx, msg); {
	case err == nil:
	case cl.key == "":
		// The client never got the token, so nobody can resume: as if the
		// connection was lost before the request became resumable.
		r.Cancel()
		cl.lost = true
		cl.cancel(errConnectionLost)
		return false
	default:
		// The client holds the key, which is the token: the request runs on,
		// detached, for the call sent again.
		r.Detach(so.Sink)
	}
	return true
}

// becomeLocked makes r, attached to sink, the call's request from now on: the
// engine holds its key, its end ends the call's context (running), and the
// session tracks it where stream reconnects look it up.
func (cl *call) becomeLocked(r *resume.Request, sink Stream, running bool) {
	c, s := cl.c, cl.c.s
	hidden := cl.hiddenLocked()
	cl.req, cl.hidden = r, hidden
	if cl.hold != nil && (!hidden || cl.kind.task()) { // the engine knows the key from now on
		s.keys.drop(c.principal, cl.key, cl.hold)
	}
	if running {
		context.AfterFunc(r.Context(), func() { cl.cancel(context.Cause(r.Context())) })
	}
	if c.replay && !cl.dfr.deferred {
		// On a one-stream transport the running call stands for its request
		// (cancel by id, detach at the end); once it has ended, a result kept
		// for retention needs nothing from this connection. Only stream
		// reconnects (replay) look requests up by id after their call.
		c.att.trackAs(tracked{r: r, hidden: hidden, sink: sink, task: cl.kind.task()}, cl.st)
	}
}

// promoteAfter makes the call resumable once it has run d, unless it ends
// sooner; eager: or sooner still, right before its first message (due). Only
// the first call counts.
func (cl *call) promoteAfter(d time.Duration, eager bool) {
	cl.mu.Lock()
	if eager && cl.pol.primed {
		// Its client has an id to reconnect with already: resumable now.
		cl.mu.Unlock()
		cl.promote(true)
		return
	}
	defer cl.mu.Unlock()
	if cl.pol.timer == nil && !cl.done {
		cl.pol.eager = eager
		cl.pol.timer = time.AfterFunc(d, func() { cl.promote(true) })
	}
}

// beforePrime runs right before the call's stream gives its client an id to
// reconnect with (PrimingStream): a call in its quick window becomes
// resumable now, and one whose policy applies later (After) or never stays
// as it is. A call whose tool has not started holds the id back (false)
// until its policy is applied (policyApplied): a client that went away
// with the id in that gap would come back to nothing, the call gone with
// its connection. A call whose tool never runs here needs no end to the
// wait: a refusal is answered at once, and a call sent again starts its
// stream with the policy of the request it joined (attachments.rejoin).
func (cl *call) beforePrime() bool {
	cl.mu.Lock()
	if cl.pol.pending && !cl.done {
		cl.pol.held = true
		cl.mu.Unlock()
		cl.c.debug().Str("request", string(cl.id)).Msg("priming event held until the call's tool starts")
		return false
	}
	cl.pol.primed = true
	eager := cl.pol.eager
	cl.mu.Unlock()
	if eager {
		cl.promote(true)
	}
	return true
}

// policyApplied runs as the call's tool starts, once the middleware has
// applied its policy (or found none applies): a priming event held back
// (beforePrime) may go out now, and names the request the policy made.
func (cl *call) policyApplied() {
	cl.mu.Lock()
	held := cl.pol.held
	cl.pol.pending, cl.pol.held = false, false
	ps, _ := cl.st.(PrimingStream)
	cl.mu.Unlock()
	if held && ps != nil {
		ps.Prime()
	}
}

// due makes an eager call resumable before its first message goes out, so that
// the message is in the request's outbox, numbered, after the policy.
func (cl *call) due() {
	cl.mu.Lock()
	eager := cl.pol.eager
	cl.mu.Unlock()
	if eager {
		cl.promote(true)
	}
}
