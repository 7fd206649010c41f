package mcp

import (
	"context"
	"errors"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mcp-resume/mcp-resume/resume"
	"github.com/mcp-resume/mcp-resume/spec"
	"github.com/mcp-resume/mcp-resume/transport"
)

// sessionCalls are the calls a session runs: requests whose handler runs here,
// and the 2026 rounds its retries attached (sessionState.running and
// retries).
type sessionCalls struct {
	c *connState
}

// startCall starts handling request m in its own goroutine. mr is the envelope
// of a 2026-era request; nil for a 2025-era one.
func (cc *sessionCalls) startCall(m *spec.Message, raw []byte, st Stream, mr *modernReq) {
	c := cc.c
	cl := cc.newCall(m, raw, st, mr)
	if ref := cc.gate(m, st); ref != nil {
		// Its credentials do not allow its tool: refused before anything runs.
		if g, ok := st.(GatedStream); !ok || !g.Refuse(m.ID, ref) {
			c.replyError(st, m.ID, ref.Err)
		}
		cl.cancel(errClientCancel)
		cl.refused(ref.Err)
		return
	}
	if refusal, cause := cc.accept(cl, m, raw); cause != nil {
		cl.cancel(cause)
		cl.releaseKey()
		switch {
		case refusal != nil:
			c.replyError(st, m.ID, refusal)
			cl.refused(refusal)
			return
		case errors.Is(cause, errCancelledEarly):
			// No answer: its stream, when it is the call's own (a POST's),
			// ends now.
			if cs, ok := st.(ClosableStream); ok {
				cs.CloseStream()
			}
		}
		cl.notAccepted(cause) // answered by the request the call joined, or cancelled
		return
	}
	cl.step(evAccepted)
	c.s.wg.Add(1)
	c.s.calls.Add(1)
	c.s.pool.run(func() {
		defer c.s.wg.Done()
		defer c.s.calls.Add(-1)
		cl.run(m, raw)
	})
}

// newCall returns the call of request m, of its kind, with its own context.
func (cc *sessionCalls) newCall(m *spec.Message, raw []byte, st Stream, mr *modernReq) *call {
	c := cc.c
	sp := callSpanOf(c, m, st, false)
	// The handler's context carries the call's span, for spans of its own.
	ctx, cancel := context.WithCancelCause(sp.context(context.WithoutCancel(c.ctx)))
	cl := &call{c: c, st: st, id: m.ID, raw: raw, ctx: ctx, cancel: cancel, modern: mr, span: sp, pol: &noPolicy}
	cl.sess = callSession{cl: cl, asker: asker{cl}}
	cl.life.phase = phasePlain
	if m.Method == string(mcp.MethodToolsCall) {
		// Its tool's policy decides, as the tool starts, whether and when it
		// becomes a request; its priming event waits for that.
		cl.life.phase, cl.tool = phaseStarting, m.Target()
		cl.pol = c.s.policy(cl.tool)
	}
	if ps, ok := st.(PrimingStream); ok {
		ps.BeforePrime(cl.beforePrime)
	}
	if mr != nil {
		cl.resumable, cl.ackMode = mr.resumable()
		cl.sess.own = &ownSession{declaredState: declaredState{d: declared{level: mcp.LoggingLevelInfo}}}
		switch m.Method {
		case spec.MethodServerDiscover:
			cl.patch = c.s.discover
		case spec.MethodSubscriptionsListen:
			cl.kind = callListen
		}
	} else {
		cl.resumable, cl.ackMode = c.resumable.Load(), c.ackMode.Load()
		if m.Method == string(mcp.MethodToolsList) && c.s.tasks {
			cl.patch = c.s.taskSupport
		}
	}
	if m.Method == string(mcp.MethodResourcesRead) {
		cl.uri = m.Target()
	}
	if m.Method == string(mcp.MethodToolsCall) && c.s.tasks {
		switch {
		case cl.pol.Task == NoTask:
		case mr != nil && mr.tasks():
			cl.kind = callTask
		case mr == nil && asksForTask(m.Params):
			cl.kind = callLegacyTask // 2025-11-25: the client asked
			p := *cl.pol
			p.Mode = Always
			cl.pol = &p
		}
	}
	cl.hidden = !cl.resumable || cl.kind.task()
	cl.applies = cl.resumable || cl.kind.task() || (mr == nil && c.replay)
	return cl
}

// accept decides whether cl runs, and records it as running when it does. When
// it does not, cause is why (its context's cause) and refusal, when not nil, the
// error that answers it; a call sent again that joins the one its key names is
// answered by the join.
func (cc *sessionCalls) accept(cl *call, m *spec.Message, raw []byte) (refusal *spec.Error, cause error) {
	c, st, mr := cc.c, cl.st, cl.modern
	if cc.bornCancelled(m) {
		return nil, errCancelledEarly
	}
	if m.Method == string(mcp.MethodToolsCall) && c.s.tasks && !cl.kind.task() && cl.pol.Task == TaskRequired {
		if mr != nil {
			return errNeedsTasks("this tool runs only as a task: declare the " + spec.ExtensionTasks + " extension in the request's capabilities"), errClientCancel
		}
		return spec.NewError(spec.CodeMethodNotFound, "", "this tool runs only as a task: call it with params.task"), errClientCancel
	}
	// A keyed call (our extension) sent again joins the one its key names: a
	// resumable request, or a task, whose client may have lost the answer
	// that named it.
	if m.Method == string(mcp.MethodToolsCall) && (cl.resumable || cl.kind.task()) {
		ck, kerr := spec.CallKey(m.Params)
		if kerr != nil {
			return kerr, errClientCancel
		}
		if ck != "" {
			switch r, err := c.s.eng.LookupKey(ck, m.ID, c.principal); {
			case err == nil && cl.kind.task(): // sent again: its task, as it is now
				c.tasks.rejoinTask(r, cl, ck)
				return nil, errClientCancel
			case err == nil: // sent again: the call runs already, or has its result
				c.att.rejoin(r, m.ID, ck, st, mr)
				return nil, errClientCancel
			case errors.Is(err, resume.ErrUnknown):
				survives := cl.kind.task() || cl.pol.Mode == Always
				h, other := c.s.keys.hold(c.principal, ck, survives)
				if h == nil && other != nil {
					// The first copy becomes a request as its tool starts:
					// this one then attaches to it.
					cc.awaitKey(other, m, raw, st, mr)
					return nil, errClientCancel
				}
				if h == nil {
					return spec.NewError(spec.CodeInvalidParams, spec.ReasonNotResumable,
						"the call with this key runs, but not as a resumable request: it ends with the connection it came on"), errClientCancel
				}
				cl.key, cl.hold, cl.survives = ck, h, survives
			default: // ended: what a resume would answer
				return wireError(err), errClientCancel
			}
		}
	}
	if m.Method == string(mcp.MethodToolsCall) && c.s.draining.Load() && cl.tool != c.s.awaitTool {
		// A new call, on an instance that is stopping: another takes it.
		return spec.NewError(spec.CodeInternalError, spec.ReasonShuttingDown,
			"the server is shutting down and takes no new call: send it again (another instance takes it)"), errClientCancel
	}
	if m.Method == string(mcp.MethodToolsCall) && cl.tool != c.s.awaitTool && c.s.overloaded() {
		c.s.tellRefused(cl, spec.ReasonOverloaded)
		return spec.RateLimited(spec.ReasonOverloaded,
			"the server is short of memory and takes no new call for now: try again later (another instance may take it)", OverloadedRetry), errClientCancel
	}
	key := string(m.ID)
	c.update(func(st *sessionState) {
		switch _, dup := st.running[key]; {
		case st.closed:
			cause = errConnectionLost
		case dup:
			refusal, cause = spec.NewError(spec.CodeInvalidRequest, spec.ReasonDuplicateID,
				"a request with id "+key+" is already in flight on this connection"), errClientCancel
		case !c.s.admission.admit(c.principal):
			refusal, cause = spec.RateLimited(spec.ReasonTooManyRequests,
				"too many requests of this principal in flight; retry when one has finished", time.Second), errClientCancel
		default:
			st.running[key] = cl
		}
	})
	if refusal != nil && refusal.Reason == spec.ReasonTooManyRequests {
		c.s.tellRefused(cl, spec.ReasonTooManyRequests)
	}
	return refusal, cause
}

// gate returns the refusal of tools/call m by the credentials it came with:
// its stream's (a Streamable HTTP POST's token), else its session's (a
// WebSocket's handshake); nil when they allow its tool, or m is no tools/call.
// The tool is the name the decoder read (m.Target), which mcp-go runs.
func (cc *sessionCalls) gate(m *spec.Message, st Stream) *transport.Refusal {
	if m.Method != string(mcp.MethodToolsCall) {
		return nil
	}
	if g, ok := st.(GatedStream); ok {
		if ref := g.ToolRefusal(m.Target()); ref != nil {
			return ref
		}
	}
	if refuse := cc.c.toolRefusal; refuse != nil {
		return refuse(m.Target())
	}
	return nil
}

// bornCancelled reports whether the client cancelled request m before it
// came: it is not run, and gets no answer, as a cancelled request gets none.
// A keyed call names a request that may run already (its first copy, on
// another connection): the cancel is for it.
func (cc *sessionCalls) bornCancelled(m *spec.Message) bool {
	c := cc.c
	var early bool
	c.update(func(st *sessionState) { early = st.takeEarlyCancel(string(m.ID), time.Now()) })
	if !early {
		return false
	}
	c.debug().Str("request", string(m.ID)).Msg("request cancelled before it came; not run")
	if m.Method == string(mcp.MethodToolsCall) {
		if ck, _ := spec.CallKey(m.Params); ck != "" {
			if r, err := c.s.eng.LookupKey(ck, m.ID, c.principal); err == nil {
				r.Cancel()
			}
		}
	}
	return true
}

// awaitKey handles request m, a keyed call sent again while the first copy
// holds its key, once that copy has let go of it: it then runs, or has become
// a request this one attaches to. A copy that stays plain (not Mode Always) is
// refused at once; one that does not let go within keyWait is refused too.
func (cc *sessionCalls) awaitKey(other *keyHold, m *spec.Message, raw []byte, st Stream, mr *modernReq) {
	c := cc.c
	if !other.survives {
		c.replyError(st, m.ID, spec.NewError(spec.CodeInvalidParams, spec.ReasonNotResumable,
			"the call with this key runs, but not as a resumable request: it ends with the connection it came on"))
		return
	}
	c.s.wg.Add(1)
	go func() {
		defer c.s.wg.Done()
		t := time.NewTimer(keyWait)
		defer t.Stop()
		select {
		case <-other.gone:
			cc.startCall(m, raw, st, mr)
		case <-t.C:
			c.replyError(st, m.ID, spec.NewError(spec.CodeInvalidParams, spec.ReasonNotResumable,
				"the call with this key has not started within "+keyWait.String()+"; send it again"))
		case <-c.ctx.Done():
		}
	}()
}

// retry handles the retry of a request that is waiting for input: its answers go
// to the waiting tool, and st becomes the request's next round. Its span, in
// the request's trace, covers the lookup and the attach.
func (cc *sessionCalls) retry(m *spec.Message, st Stream, state string) {
	c := cc.c
	invalid := spec.NewError(spec.CodeInvalidParams, spec.ReasonInvalidState,
		"requestState is not one this server handed out, or its request has ended")
	c.answerByToken(m, st, func(q *byToken) ([]byte, *spec.Error) {
		rs, ok := decodeState(state)
		if !ok {
			return nil, q.badToken(invalid)
		}
		r, err := q.lookup(rs.Token, rs.ID)
		if e := refusal(err); e != nil {
			return nil, e
		}
		if err != nil || m.Target() != rs.Name {
			return nil, invalid
		}
		if e := c.s.inputResponses(c, m.Params); e != nil {
			return nil, e
		}
		rd := &round{st: st, id: m.ID, orig: rs.ID, state: state}
		rd.gatherOn(c.s, r)
		var closed bool
		c.update(func(s *sessionState) {
			if closed = s.closed; closed {
				return
			}
			if s.retries == nil {
				s.retries = make(map[string]retried)
			}
			// A long-lived connection forgets answered rounds, in amortized
			// sweeps (as attached requests are: see trackAs).
			if len(s.retries) >= s.retrySweepAt {
				for k, rt := range s.retries {
					if rt.rd.answered() || rt.r.Gone() {
						delete(s.retries, k)
					}
				}
				s.retrySweepAt = max(minSweep, 2*len(s.retries))
			}
			s.retries[string(m.ID)] = retried{r: r, rd: rd}
		})
		q.answerLater()
		if closed {
			r.Cancel()
			q.sp.endCause(errConnectionLost)
			return nil, nil
		}
		// The replay may be long, and waits for another instance when the
		// request lives there: not on the connection's read loop.
		c.s.wg.Go(func() {
			if err := r.Attach(rd, 0); err != nil {
				q.fail(wireError(err))
				return
			}
			q.sp.end(nil)
		})
		return nil, nil
	})
}

// retriesClosed cancels the requests whose retry came on st and that had no
// answer yet.
func (cc *sessionCalls) retriesClosed(st Stream) {
	var closed map[string]retried
	cc.c.update(func(s *sessionState) {
		for k, rt := range s.retries {
			if rt.rd.st == st {
				if closed == nil {
					closed = map[string]retried{}
				}
				closed[k] = rt
				delete(s.retries, k)
			}
		}
	})
	cancelUnanswered(closed, st)
}

// cancelUnanswered cancels the requests of rounds, those whose retry came on st
// (nil: every one), that had no answer yet.
func cancelUnanswered(rounds map[string]retried, st Stream) {
	for _, rt := range rounds {
		if (st == nil || rt.rd.st == st) && !rt.rd.answered() {
			rt.r.Cancel()
		}
	}
}

// cancelled handles notifications/cancelled. A request attached to this connection,
// or one named with its resume token (our extension), is cancelled; anything else
// is ignored, as JSON-RPC allows no answer to a notification.
//
// [2025-11-25 utilities/cancellation §Behavior Requirements] Receivers of
// cancellation notifications SHOULD stop processing the cancelled request,
// free associated resources, and not send a response for the cancelled
// request; they MAY ignore cancellation notifications if the referenced
// request is unknown. The handler's context ends (its tool stops), and the
// request ends cancelled: no response follows, its client asks about it
// (getStatus, resume) and hears cancelled.
func (cc *sessionCalls) cancelled(m *spec.Message) {
	c := cc.c
	p, err := spec.DecodeCancelledParams(m.Params)
	if err != nil {
		c.debug().Err(err).Msg("malformed notifications/cancelled; ignored")
		return
	}
	key := string(p.RequestID)
	if c.tasks.stopTaskStream(key) {
		return // the stream ends; its task runs on
	}
	var cl *call
	var r resume.Handle
	c.update(func(st *sessionState) { cl, r = st.running[key], st.attached[key].r })
	if cl != nil {
		cl.step(evCancel)
		return
	}
	if r != nil {
		// Delivered by this session. (A request another session took over since
		// may still be named here; its client is the one that held the token.)
		r.Cancel()
		return
	}
	if p.ResumeToken != "" {
		r, wait, err := c.att.lookup(p.ResumeToken, p.RequestID)
		if wait > 0 {
			c.debug().Str("request", key).Msg("cancel by token while rate limited; ignored")
			return
		}
		if err == nil {
			r.Cancel()
			return
		}
	}
	// Not (yet) here: the call may come after its cancel (Streamable HTTP
	// sends each as a POST of its own), and is then born cancelled.
	c.update(func(st *sessionState) {
		if !st.closed {
			st.noteEarlyCancel(key, time.Now())
		}
	})
	c.debug().Str("request", key).Msg("cancel for a request not here (yet)")
}

// OverloadedRetry is when a call refused while the server is overloaded
// (Options.Overloaded) may be tried again: error.data.retryAfterMs.
const OverloadedRetry = 5 * time.Second

// overloaded reports whether the server takes no new call now
// (Options.Overloaded).
func (s *Server) overloaded() bool {
	f := s.opts.Overloaded
	return f != nil && f()
}
