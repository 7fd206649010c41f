package mcp

import (
	"fmt"
	"time"

	"github.com/mcp-resume/mcp-resume/resume"
	"github.com/mcp-resume/mcp-resume/spec"
)

// A call's life: the phase it is in and what it holds there (callLife),
// changed only by step, the one transition function, under the call's lock,
// which re-checks the life's invariants after each change. What makes a call
// change is an event (callEvent): its tool starts with its policy, its timer
// fires, a message of it is about to go out, its stream is about to prime,
// a 2026 question needs it to be a request, its tool asks for that, its
// connection goes, its client cancels it, its handler returns.

// callPhase is where a call is in its life.
type callPhase uint8

const (
	// phaseStarting: accepted, its tool not started: whether and when it
	// becomes a request is not known yet (its stream holds its priming event
	// back: held).
	phaseStarting callPhase = iota
	// phasePlain: running, not a request of the engine: its end answers it
	// as a plain server would, unless its schedule (promoteAt, eager) or a
	// trigger makes it a request first.
	phasePlain
	// phaseRequest: a request of the engine (resumable, one for its
	// session's stream reconnects only (hidden), or a task).
	phaseRequest
	// phaseDeferred: a request answered with a deferred answer: it runs on,
	// detached, for the await tool.
	phaseDeferred
	// phaseLost: ended before it became a request (its connection went, its
	// client cancelled it): nothing answers it; its handler may still run.
	phaseLost
	// phaseDone: its handler returned (a lost call stays lost).
	phaseDone
)

var phaseNames = [...]string{"starting", "plain", "request", "deferred", "lost", "done"}

func (p callPhase) String() string { return phaseNames[p] }

// request reports whether a call in phase p is a request of the engine.
func (p callPhase) request() bool { return p == phaseRequest || p == phaseDeferred }

// early reports whether a call in phase p may still become a request.
func (p callPhase) early() bool { return p == phaseStarting || p == phasePlain }

// callLife is what changes in a call's life, guarded by its lock.
type callLife struct {
	// req, token: its request of the engine, once it is one (phaseRequest,
	// phaseDeferred; kept when it is done), and the request's token until
	// the deferred answer that names it, while it may get one; round: a
	// 2026 request's first round; taskID: a 2025-11-25 task's id.
	req    *resume.Request
	token  string
	round  *round
	taskID *taskID

	// sched is its schedule (callSchedule), while it has one: nil for
	// most of a long call's life.
	sched *callSchedule
	// timedOut: it ran past its deadline before it became a request: its
	// answer is the timeout error.
	timedOut bool

	// applied: the middleware applied a policy of Mode Always or After
	// (Promote may make the call a request); restartable: that policy's,
	// or, for a call deferred before its tool started, its tool's.
	applied, restartable bool
	// primed: its stream gave its client an id to reconnect with; held: a
	// priming event waits for its tool to start.
	primed, held bool
	// phase is where it is in its life (with the flags above: one word).
	phase callPhase

	// What its answer becomes: missing, the capability error of a 2026 tool
	// that asked without it; failure, a *spec.Error its tool returned;
	// refusal, why it may not run (its key names another request).
	missing, failure, refusal *spec.Error

	// For its deferred answer: when it was accepted, and its latest progress.
	started      instant
	lastProgress *progressNote
}

// callSchedule is what a call's life waits for, with its timer. promoteAt:
// its policy's After, or its quick window, while it is early; eager: its
// first message, or its priming event, makes it a request sooner;
// deferAt: Options.AnswerWithin's deadline; deadline: its tool's Timeout,
// from its start (a request run again: its record's), until its handler
// returns. timer fires at the soonest.
type callSchedule struct {
	promoteAt, deferAt, deadline time.Time
	eager                        bool
	timer                        *time.Timer
}

// noSchedule is the schedule of a call that has none: read, never written.
var noSchedule callSchedule

// at returns the call's schedule, to read.
func (l *callLife) at() *callSchedule {
	if l.sched == nil {
		return &noSchedule
	}
	return l.sched
}

// plan returns the call's schedule, to change: made when it has none.
func (l *callLife) plan() *callSchedule {
	if l.sched == nil {
		l.sched = new(callSchedule)
	}
	return l.sched
}

// unpromote drops a scheduled promotion (its time, and eagerness).
func (l *callLife) unpromote() {
	if s := l.sched; s != nil {
		s.eager, s.promoteAt = false, time.Time{}
	}
}

// callEvent is what happened to a call: the argument of step.
type callEvent uint8

const (
	evAccepted callEvent = iota // it was accepted: its deferral's clock starts (Options.AnswerWithin)
	evPolicy                    // its tool starts: the middleware applies its policy
	evTimer                     // its timer fired
	evMessage                   // a message of it is about to go out
	evPrime                     // its stream is about to give its client an id to reconnect with
	evAsk                       // a 2026 question: it must be a request to wait for the answer
	evPromote                   // its tool asks to be resumable now (Promote)
	evConnLost                  // its connection went away
	evCancel                    // its client cancelled it
	evReturned                  // its handler returned
)

// lose ends an early call without a request: nothing schedules it any more.
func (l *callLife) lose() {
	l.phase = phaseLost
	l.held = false
	l.unpromote()
}

// stepped is what a step leaves its caller to do, outside the call's lock.
type stepped struct {
	// req is the call's request, when it is one after the step.
	req *resume.Request
	// runOn: evPolicy made the call a request as its tool starts: the tool
	// runs on the request's context.
	runOn *resume.Request
	// prime: a priming event held back may go out now (PrimingStream.Prime).
	prime bool
	// hold: evPrime found the call starting: the priming event waits.
	hold bool
	// cancel: the request to cancel (a call that lost its connection).
	cancel *resume.Request
	// timeout: the request to end with the timeout error (its deadline
	// passed).
	timeout *resume.Request
}

// step applies ev to the call's life, under its lock, and checks the life's
// invariants after. The effects of a change that the client must see in order
// with the call's messages (a request's start and its policy, a deferred
// answer) happen here, under the lock; the rest is left to the caller in
// what step returns.
func (cl *call) step(ev callEvent) (out stepped) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	l := &cl.life
	switch ev {
	case evAccepted:
		if cl.defers() && l.phase.early() {
			l.started = now()
			l.plan().deferAt = l.started.time().Add(cl.c.s.opts.AnswerWithin)
		}
	case evPolicy:
		if cl.pol.Timeout > 0 && l.at().deadline.IsZero() {
			l.plan().deadline = time.Now().Add(cl.pol.Timeout)
		}
		out.prime = l.held
		l.held = false
		if l.phase != phaseStarting {
			break
		}
		l.phase = phasePlain
		out.runOn = cl.schedulePolicyLocked()
	case evTimer:
		now, at := time.Now(), l.at()
		if !at.deadline.IsZero() && !now.Before(at.deadline) {
			at.deadline = time.Time{}
			switch {
			case l.phase.early(): // answered with the timeout error (run)
				l.lose()
				l.timedOut = true
				cl.cancel(errTimeout)
			case l.phase.request():
				out.timeout = l.req
			}
			break
		}
		if !at.deferAt.IsZero() && !now.Before(at.deferAt) {
			at.deferAt = time.Time{}
			cl.deferLocked()
		}
		if !at.promoteAt.IsZero() && !now.Before(at.promoteAt) {
			at.promoteAt = time.Time{}
			cl.promoteLocked(true)
		}
	case evMessage:
		if l.at().eager {
			cl.promoteLocked(true)
		}
	case evPrime:
		switch {
		case l.phase == phaseStarting:
			l.held, out.hold = true, true
		default:
			l.primed = true
			if l.at().eager {
				cl.promoteLocked(true)
			}
		}
	case evAsk:
		if !l.phase.request() {
			cl.promoteLocked(true)
		}
	case evPromote:
		if l.applied && l.phase.early() {
			cl.promoteLocked(true)
		}
	case evConnLost:
		if cl.keepsOnLossLocked() {
			break
		}
		if l.phase.early() {
			l.lose()
		}
		cl.cancel(errConnectionLost)
		if l.req != nil && l.phase != phaseDone {
			out.cancel = l.req
		}
	case evCancel:
		if l.phase.early() {
			// Cancelled before promoteLocked can make it a request, which
			// looks at its context under the same lock.
			l.lose()
			cl.cancel(errClientCancel)
		} else if l.req != nil && l.phase != phaseDone {
			// Under the lock: a deferral deciding now sees it ended.
			l.req.Cancel()
		}
	case evReturned:
		if l.phase != phaseLost { // lost stays lost: its key's tombstone says so (releaseKey)
			l.phase = phaseDone
		}
		l.held = false
		if at := l.sched; at != nil {
			at.eager = false
			at.promoteAt, at.deferAt, at.deadline = time.Time{}, time.Time{}, time.Time{}
		}
	}
	cl.armLocked()
	cl.checkLocked()
	if l.phase.request() || l.phase == phaseDone {
		out.req = l.req
	}
	return out
}

// keepsOnLossLocked reports whether the call runs on when its connection goes:
// a request its client can come back for (a 2025 session's, a resumable
// one's, a task, a deferred call, a 2026 round answered and waiting for its
// retry), or a keyed call that its policy makes a request as its tool starts
// (survives: its client finds it by its key).
func (cl *call) keepsOnLossLocked() bool {
	l := &cl.life
	switch {
	case l.phase == phaseDone || l.phase == phaseLost:
		return true // nothing to end
	case l.phase.request():
		return cl.modern == nil || cl.resumable || cl.kind.task() || l.phase == phaseDeferred || l.round.answered()
	}
	return cl.survives
}

// schedulePolicyLocked sets the call's schedule from its policy (cl.pol) as
// its tool starts: a request now (Always: returned, for the tool to run on
// its context), after its quick window or its first message (Always with
// Options.QuickCall), or after its After.
func (cl *call) schedulePolicyLocked() *resume.Request {
	l, p := &cl.life, cl.pol
	if p.Mode == Never || !cl.applies {
		return nil
	}
	l.applied, l.restartable = true, p.Restartable
	switch p.Mode {
	case Always:
		if w := cl.c.s.opts.QuickCall; w > 0 && cl.key == "" && !cl.kind.task() {
			// Its client holds no token until the policy is sent: a call that
			// answers first is answered as a plain one (Options.QuickCall).
			if l.primed {
				cl.promoteLocked(true) // its client has an id to reconnect with already
				return nil
			}
			at := l.plan()
			at.eager, at.promoteAt = true, time.Now().Add(w)
			return nil
		}
		return cl.promoteLocked(false)
	case After:
		l.plan().promoteAt = time.Now().Add(p.After)
	}
	return nil
}

// defers reports whether the call is answered with a deferred answer when
// it runs past Options.AnswerWithin: a tools/call that is no task, of a tool
// whose policy is not Never, other than the await tool.
func (cl *call) defers() bool {
	s := cl.c.s
	return s.opts.AnswerWithin > 0 && cl.tool != "" && !cl.kind.task() && cl.tool != s.awaitTool && cl.pol.Mode != Never
}

// armLocked sets the call's one timer to the sooner of its deadlines, or stops
// it when it has none; a schedule left with nothing goes.
func (cl *call) armLocked() {
	l := &cl.life
	at := l.sched
	if at == nil {
		return
	}
	if !l.phase.early() && l.phase != phaseRequest {
		at.promoteAt, at.deferAt = time.Time{}, time.Time{}
	}
	if l.phase == phaseDone || l.phase == phaseLost {
		at.deadline = time.Time{}
	}
	var next time.Time
	for _, t := range []time.Time{at.promoteAt, at.deferAt, at.deadline} {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	if next.IsZero() {
		if at.timer != nil {
			at.timer.Stop()
			at.timer = nil
		}
		if !at.eager {
			l.sched = nil
		}
		return
	}
	if at.timer == nil {
		at.timer = time.AfterFunc(time.Until(next), cl.onTimer)
		return
	}
	at.timer.Reset(time.Until(next))
}

// onTimer is the call's timer: the step, then the end of a request whose
// deadline passed, outside the call's lock.
func (cl *call) onTimer() {
	if r := cl.step(evTimer).timeout; r != nil {
		cl.endTimedOut(r)
	}
}

// endTimedOut ends r, the call's request, with the timeout error as its final
// response, failed, and cancels its tool (on the request's context or the
// call's).
func (cl *call) endTimedOut(r *resume.Request) {
	resp := errorResponse(timeoutError(cl.pol.Timeout))
	if _, err := r.End(errTimeout, func(seq uint64) []byte { return encodeReply(cl.id, resp, nil, cl.stamp(seq)) }); err != nil {
		// It ended meanwhile (its tool returned as the deadline passed): its
		// own end stands, and the call's context is left alone (cancelled,
		// it would make the call's end cancel the request and its result).
		cl.c.debug().Err(err).Str("request", string(cl.id)).Msg("the timeout came as the request ended")
		return
	}
	cl.c.debug().Str("request", string(cl.id)).Str("tool", cl.tool).Msg("request ended: its tool's timeout passed")
	cl.span.result(resp)
	cl.taskStatus("failed")
	cl.cancel(errTimeout)
}

// timeoutError is the answer of a call that ran past its tool's timeout d
// (0: a request run again, whose record kept the deadline only).
func timeoutError(d time.Duration) *spec.Error {
	msg := "the call ran past its tool's timeout"
	if d > 0 {
		msg += " of " + d.String()
	}
	return spec.NewError(spec.CodeInternalError, spec.ReasonTimeout, msg+"; its tool was cancelled")
}

// checkLocked panics when the call's life breaks an invariant: a bug of the
// code that changed it, found at the change.
func (cl *call) checkLocked() {
	l := &cl.life
	at := l.at()
	var bad string
	switch {
	case l.phase.request() && l.req == nil:
		bad = "a request without its request"
	case l.phase.early() && l.req != nil:
		bad = "an early call with a request"
	case l.phase == phaseLost && l.req != nil:
		bad = "a lost call with a request"
	case l.phase == phaseDeferred && cl.kind.task():
		bad = "a deferred task"
	case at.eager && !l.phase.early():
		bad = "eager past its early phases"
	case l.held && l.phase != phaseStarting:
		bad = "a priming event held after the call started"
	case !at.promoteAt.IsZero() && !l.phase.early():
		bad = "a promotion scheduled for a request"
	case at.timer != nil && at.promoteAt.IsZero() && at.deferAt.IsZero() && at.deadline.IsZero():
		bad = "a timer with no deadline"
	case l.sched != nil && *l.sched == callSchedule{}:
		bad = "a schedule with nothing in it"
	case !at.deadline.IsZero() && (l.phase == phaseDone || l.phase == phaseLost):
		bad = "a deadline for a call that has ended"
	}
	if bad != "" {
		panic(fmt.Sprintf("mcp: call %s (%s): %s", cl.id, l.phase, bad))
	}
}

// promoteLocked makes the call a request of the engine, when it is early and
// its context alive: registers it, tells its client (the policy
// notification, before any other message of the request; a task's
// creation), and attaches it to its stream. running says the tool already
// runs on the call's context, which must then end when the request does.
// Whether the request may run again after a restart is the applied policy's
// (restartable), whatever made the call a request now.
func (cl *call) promoteLocked(running bool) *resume.Request {
	l := &cl.life
	if !l.phase.early() || cl.ctx.Err() != nil {
		return nil
	}
	l.unpromote()
	so, rd, askedTTL := cl.startOptionsLocked(false)
	if running { // its context ends with the request's
		so.Cancel = cl.cancel
	}
	r, tok, err := cl.c.s.eng.Start(cl.id, &so)
	if err != nil {
		cl.notStartedLocked(err)
		return nil
	}
	if !l.at().deferAt.IsZero() {
		l.token = tok // for the handle of the deferred answer it may get (deferLocked); no secret kept otherwise
	}
	// On the span before anything tells the client: a task's creation, once
	// answered, may be cancelled at once, and an ended span takes no event.
	if cl.span != nil { // the attribute's slice is not made for nobody
		cl.span.event(eventResumable, attrTask.Bool(cl.kind.task()))
	}
	if !cl.announceLocked(r, tok, so, rd, askedTTL) {
		return nil
	}
	cl.becomeLocked(r, so.Sink, phaseRequest)
	return r
}

// update runs f on the call's life, under its lock, and checks the life's
// invariants after: a change of what the call holds that no event makes
// (what its answer becomes, its latest progress), or a decision that must not
// cross a step (where a message of the call goes: f may then write it to the
// call's stream). f must not call step, update or read.
func (cl *call) update(f func(l *callLife)) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	f(&cl.life)
	cl.checkLocked()
}

// read returns what f reads of the call's life, under its lock.
func read[T any](cl *call, f func(l *callLife) T) T {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return f(&cl.life)
}

// request returns the call's request once it is one, or nil.
func (cl *call) request() *resume.Request {
	return read(cl, func(l *callLife) *resume.Request { return l.req })
}
