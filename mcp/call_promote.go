package mcp

import (
	"bytes"
	"errors"
	"time"

	"github.com/mcp-resume/mcp-resume/resume"
	"github.com/mcp-resume/mcp-resume/spec"
)

// Promotion: a call becomes a request of the engine (resumable, or a task).
// promoteLocked (call_life.go) is the one way, whatever asks for it: its policy
// (at once, after its quick window or its After), its first message, its
// stream's priming event, a question of a 2026 request, or its tool
// (Promote); the steps are below.

// startOptionsLocked is what the engine is told of the call as it starts its
// request: where its messages go (a 2026 request's through its first round
// rd; a task's nowhere yet), its token (its key, when its client named one),
// what a restart needs to run it again, a task's ttl (and the ttl its 2025
// client asked for when that was cut, askedTTL).
func (cl *call) startOptionsLocked(deferred bool) (so resume.StartOptions, rd *round, askedTTL time.Duration) {
	c, s, l := cl.c, cl.c.s, &cl.life
	so = resume.StartOptions{AckMode: cl.ackMode && !cl.hidden, Sink: cl.st, Principal: c.principal, Task: cl.kind.task(),
		Trace: cl.span.traceContext(), Observer: toolObserver{cl}, Deadline: l.at().deadline}
	// Its client can find it: by its token, its task id, or a deferred
	// answer's handle (one it may be given later: deferAt).
	known := !cl.hidden || cl.kind.task() || deferred || !l.at().deferAt.IsZero()
	if known {
		so.Token = cl.key // "": the engine makes one
	}
	// A task is restartable too: its client polls it by id, and gets the new
	// run's result.
	if l.restartable && known {
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
	case deferred:
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
		cl.life.refusal = spec.NewError(spec.CodeInvalidParams, spec.ReasonKeyInUse, "the call key names another request: choose a new key for each call")
		return
	}
	if logged, unlogged := cl.c.s.notStarted[notStartedKind(err)].Due(time.Now(), notStartedEvery); logged {
		cl.c.logger().Warn().Err(err).Str("request", string(cl.id)).Int64("unlogged", unlogged).Msg("request runs without a resume policy")
	}
}

// Why the engine made no request of a call, for the spacing of their log: a
// server at one of its bounds (--max-live, its byte budget, short of memory)
// makes every new call plain, and a line per call would flood its log.
const (
	notStartedOther = iota // the store failed, or the engine is closed
	notStartedLive
	notStartedBytes
	notStartedMemory
	notStartedKinds
)

func notStartedKind(err error) int {
	switch {
	case errors.Is(err, resume.ErrLimit):
		return notStartedLive
	case errors.Is(err, resume.ErrFull):
		return notStartedBytes
	case errors.Is(err, resume.ErrMemory):
		return notStartedMemory
	}
	return notStartedOther
}

// notStartedEvery is how often the log of calls run plain for one cause
// writes a line at most.
const notStartedEvery = 10 * time.Second

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
			cl.life.taskID = tid
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
		cl.life.round = rd
	}
	if cl.hidden {
		return true
	}
	p := spec.ResumePolicyParams{RequestID: cl.id, ResumeToken: tok, MaxWait: &s.caps.MaxWait, MinWait: &s.caps.MinWait}
	msg := Message{Kind: KindNotification, Data: spec.AppendResumePolicy(make([]byte, 0, 192), &p)}
	switch err := cl.st.Write(c.ctx, msg); {
	case err == nil:
	case cl.key == "":
		// The client never got the token, so nobody can resume: as if the
		// connection was lost before the request became resumable.
		cl.cancel(errConnectionLost) // before the request's end passes its own cause on (StartOptions.Cancel)
		r.Cancel()
		cl.life.lose()
		return false
	default:
		// The client holds the key, which is the token: the request runs on,
		// detached, for the call sent again.
		r.Detach(so.Sink)
	}
	return true
}

// becomeLocked makes r, attached to sink, the call's request from now on, in
// phase (a request, or a deferred one): the engine holds its key (its end
// ends the call's context when the tool runs: StartOptions.Cancel), and the
// session tracks it where stream reconnects look it up.
func (cl *call) becomeLocked(r *resume.Request, sink Stream, phase callPhase) {
	c, s := cl.c, cl.c.s
	cl.life.req, cl.life.phase = r, phase
	if s.eng.Tight() {
		// Tight of memory, the worker waiting for its tool leaves even while
		// the request has a client (its stack holds mcp-go's dispatch: 16 KB).
		cl.leaveWorker()
	}
	if cl.hold != nil && (!cl.hidden || cl.kind.task()) { // the engine knows the key from now on
		s.keys.drop(c.principal, cl.key, cl.hold)
	}
	if c.replay && phase != phaseDeferred {
		// On a one-stream transport the running call stands for its request
		// (cancel by id, detach at the end); once it has ended, a result kept
		// for retention needs nothing from this connection. Only stream
		// reconnects (replay) look requests up by id after their call.
		c.att.trackAs(tracked{r: r, hidden: cl.hidden, sink: sink, task: cl.kind.task()}, cl.st)
	}
}

// beforePrime runs right before the call's stream gives its client an id to
// reconnect with (PrimingStream): a call in its quick window becomes
// resumable now, and one whose policy applies later (After) or never stays
// as it is. A call whose tool has not started holds the id back (false)
// until its policy is applied (evPolicy): a client that went away with the
// id in that gap would come back to nothing, the call gone with its
// connection. A call whose tool never runs here needs no end to the wait: a
// refusal is answered at once, and a call sent again starts its stream with
// the policy of the request it joined (attachments.rejoin).
func (cl *call) beforePrime() bool {
	if cl.step(evPrime).hold {
		cl.c.debug().Str("request", string(cl.id)).Msg("priming event held until the call's tool starts")
		return false
	}
	return true
}

// due makes an eager call resumable before its first message goes out, so that
// the message is in the request's outbox, numbered, after the policy.
func (cl *call) due() { cl.step(evMessage) }
