package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcp-resume/mcp-resume/resume"
	"github.com/mcp-resume/mcp-resume/spec"
)

var (
	errConnectionLost = errors.New("mcp: connection lost before the request became resumable")
	errClientCancel   = errors.New("mcp: cancelled by the client")
	errTimeout        = errors.New("mcp: the call ran past its tool's timeout")
	// errCancelledEarly: cancelled by the client before it came (sessionCalls.bornCancelled).
	errCancelledEarly = fmt.Errorf("%w, before the call came", errClientCancel)
)

// callKind is what becomes of a call besides its answer.
type callKind uint8

const (
	callPlain  callKind = iota // a request, resumable when its client and policy say so
	callListen                 // a 2026 subscriptions/listen: its notifications are tagged with its id
	// callTask becomes a task, not a resumable request, when its policy makes it
	// resumable (the Tasks extension; task.go).
	callTask
	callLegacyTask // a task asked for with params.task (2025-11-25): a task at once
)

// kindTraits is how a kind of call differs from a plain one: the one place
// the kinds are told apart (kinds), read through callKind's methods.
type kindTraits struct {
	// task: found by its task id, not by a token its client holds: no
	// resume policy and no sequence numbers whatever its client declared, a
	// request from its start (no quick window) that starts detached, answered
	// with its creation, and outlives its connection and its session.
	task bool
	// legacy: a task its 2025-11-25 client asked for (params.task): its
	// policy is Always, its ttl the client's, its creation and results in
	// that revision's shapes, listed by tasks/list.
	legacy bool
	// listen: a 2026 subscriptions/listen: registered with mcp-go for its
	// broadcasts, its notifications tagged with its id and drained until it
	// ends (no response closes them).
	listen bool
}

var kinds = [...]kindTraits{
	callPlain:      {},
	callListen:     {listen: true},
	callTask:       {task: true},
	callLegacyTask: {task: true, legacy: true},
}

// task reports whether a call of kind k is, or becomes, a task.
func (k callKind) task() bool { return kinds[k].task }

// legacy reports whether k is a task of the 2025-11-25 form.
func (k callKind) legacy() bool { return kinds[k].legacy }

// listen reports whether k is a subscriptions/listen.
func (k callKind) listen() bool { return kinds[k].listen }

// call is one request being handled by mcp-go. Its fields above mu are set
// before it runs and read-only after; its life (callLife) changes only
// through step, under mu.
type call struct {
	c      *connState // the session it arrived on
	st     Stream     // the stream its messages go to until it is resumable
	id     spec.ID
	raw    []byte          // the request as received
	ctx    context.Context // the handler's own context; never the connection's
	cancel context.CancelCauseFunc
	sess   callSession // the session mcp-go runs it with (&sess)
	// span is the call's span (nil when the server does not trace): ended
	// with the call's answer, or once the call is a request, by the request
	// (reqSpan.follow).
	span *reqSpan
	// modern: the request is of the 2026-07-28 era (its envelope); nil for a
	// 2025-era request, which lives in its session.
	modern *modernReq
	// resumable: the client asked for resumable requests (SEP-975), with the ack
	// extension (ackMode): in its session's initialize, or in a 2026 request's
	// own capabilities.
	resumable, ackMode bool
	kind               callKind
	// hidden: a request it becomes is one its client holds no token of: a
	// client that did not declare SEP-975 (a request only for its session's
	// stream reconnects), or a task, found by its task id: no policy, no
	// sequence numbers, whatever the client declared.
	hidden bool
	// applies: the middleware applies pol as the tool starts (its client
	// can come back for it: SEP-975, a task, or its session's stream
	// reconnects).
	applies bool
	uri     string        // a resources/read's URI, for its not-found error's data
	patch   func(any) any // edits the result before it is encoded; may be nil
	// tool and pol: a tools/call's tool, and its policy, resolved once (a
	// 2025-11-25 task's Mode is Always: its client asked for a task).
	tool string
	pol  *Policy // shared with the calls of the same policies: never changed
	// key: the call key the client named the call with (spec.MetaKey), which
	// becomes its request's token; "" for none.
	key  string
	hold *keyHold // the key's hold while the call is not a request of the engine
	// survives: the call has a key and becomes resumable as its tool starts
	// (Mode Always): a connection lost before then does not cancel it, since its
	// client can find it by the key.
	survives bool
	mu       sync.Mutex // guards life; held while deciding where a message goes
	life     callLife
	// running is its tool's run on the tools pool (call_tool.go), once it
	// started; what it holds is guarded by mu.
	running atomic.Pointer[toolRun]
}

// releaseKey lets go of the call's key among the keyed calls in flight (once
// it is a request of the engine, which knows it, or once the call ended). A
// call that ended with its connection, before it became a request, leaves its
// key's tombstone in the engine (before it lets go, so that no copy sent again
// runs meanwhile): sent again, it is answered cancelled.
func (cl *call) releaseKey() {
	if cl.hold == nil {
		return
	}
	s := cl.c.s
	lost := read(cl, func(l *callLife) bool { return l.phase == phaseLost })
	if lost && s.keys.heldBy(cl.c.principal, cl.key, cl.hold) {
		s.eng.TombstoneKey(cl.key, cl.id, cl.c.principal)
	}
	s.keys.drop(cl.c.principal, cl.key, cl.hold)
}

// run dispatches the call through mcp-go and answers it. A call whose
// worker leaves while its tool runs (runTool) is finished by the tool's
// goroutine: run does not return then.
func (cl *call) run(m *spec.Message, raw []byte) {
	s := cl.c.s
	if cl.kind.listen() {
		// Broadcasts (list changes) reach only sessions registered with mcp-go;
		// the filter the listen sets decides which of them the client gets.
		ctx := s.srv.WithContext(cl.ctx, &cl.sess)
		if err := s.srv.RegisterSession(ctx, &cl.sess); err != nil {
			cl.c.logger().Warn().Err(err).Msg("registering a subscription")
		} else {
			defer s.srv.UnregisterSession(ctx, cl.sess.SessionID())
		}
	}
	cl.finish(cl.dispatch(raw, m.Method == spec.MethodServerDiscover))
}

// dispatch runs the call through mcp-go (raw: the request as received, or
// as stored for a run after a restart; discover: a server/discover) and
// returns mcp-go's answer, in the call's era.
func (cl *call) dispatch(raw []byte, discover bool) mcp.JSONRPCMessage {
	s := cl.c.s
	base := cl.ctx
	if s.opts.DetachTools && cl.tool != "" {
		// A tools/call's tool runs on a context that ends with the call (the
		// middleware); mcp-go's for it need not: a child of the call's
		// context would stay registered in it as long as the call runs.
		base = context.WithoutCancel(cl.ctx)
	}
	ctx := s.srv.WithContext(base, &cl.sess)
	if discover { // it lists the versions served
		ctx = server.WithSupportedProtocolVersions(ctx, newestFirst)
	}
	resp := s.srv.HandleMessage(ctx, raw)
	if cl.modern == nil {
		resp = legacyResult(resp)
	}
	return resp
}

// finish answers the call with resp, its handler's answer, and ends it.
func (cl *call) finish(resp mcp.JSONRPCMessage) {
	s := cl.c.s
	defer cl.cancel(nil)
	r := cl.step(evReturned).req
	if cl.uri != "" {
		resp = withResourceURI(resp, cl.uri)
	}
	missing, failure := read(cl, func(l *callLife) *spec.Error { return l.missing }), read(cl, func(l *callLife) *spec.Error { return l.failure })
	switch {
	case missing != nil && failed(resp):
		resp = errorResponse(missing)
	case failure != nil && failed(resp):
		resp = errorResponse(failure)
	}
	cl.flush()
	cl.releaseKey()
	cl.c.update(func(st *sessionState) {
		if st.running[string(cl.id)] == cl {
			delete(st.running, string(cl.id))
		}
	})
	// Counted by admit in startCall; a call run again after a restart has no
	// principal (restartSession), so this is nothing for it.
	s.admission.release(cl.c.principal)

	cause := context.Cause(cl.ctx)
	if r != nil && cause == nil {
		cause = r.Cause()
	}
	if r == nil && errors.Is(cause, errTimeout) {
		// Timed out before it became a request: answered with the error.
		resp = errorResponse(timeoutError(cl.pol.Timeout))
		cl.c.reply(cl.st, encodeReply(cl.id, resp, cl.patch, 0))
		cl.span.endWith(resp)
		return
	}
	if cause != nil {
		// Cancelled by the client, expired, shut down, or its connection is gone:
		// no response (a cancelled request gets none, and nobody would read it).
		// A request the call became ends with it when the call was cancelled
		// on its own (its client, its connection): nothing else would end it
		// now that its handler has returned. One the engine ended (expiry, a
		// cancel by token, shutdown: its context's cause) is the engine's.
		cl.c.debug().Str("request", string(cl.id)).Str("cause", cause.Error()).Msg("request ended without a response")
		switch {
		case r == nil:
			cl.span.endCause(cause) // a request's span is the request's to end
		case r.Cause() == nil:
			r.Cancel()
		}
		// Its stream, when it is the call's own (a POST's), ends now: its
		// client waits for nothing more on it.
		if cs, ok := cl.st.(ClosableStream); ok {
			cs.CloseStream()
		}
		return
	}
	if r == nil {
		data := encodeReply(cl.id, resp, cl.patch, 0)
		cl.c.reply(cl.st, data)
		cl.span.sent(len(data))
		cl.span.endWith(resp)
		return
	}
	// The span ends when the response reaches a client (a task's: now, its
	// work done); what it says is known now. A response that waits for a
	// client says so (an attached one is delivered at once).
	cl.span.result(resp)
	if cl.span != nil && (cl.kind.task() || cl.span.detached.Load()) {
		cl.span.event(eventCompleted)
	}
	if _, err := r.Complete(failed(resp), func(seq uint64) []byte {
		data := encodeReply(cl.id, resp, nil, cl.stamp(seq))
		cl.span.sent(len(data))
		return data
	}); err != nil {
		cl.c.debug().Err(err).Str("request", string(cl.id)).Msg("completing")
	}
	if failed(resp) {
		cl.taskStatus("failed")
	} else {
		cl.taskStatus("completed")
	}
	if cl.kind.task() {
		cl.span.endWith(resp)
	}
}

// middleware is the tool middleware the core adds to the MCPServer: right before a
// tool runs (mcp-go has found it and parsed its arguments), it applies the tool's
// Policy to the call. A call to an unknown tool never becomes resumable.
//
// A tool that returns a *spec.Error fails its request with that error (code,
// message, data.reason), where mcp-go would answer -32603 with the message alone.
func (s *Server) middleware(next server.ToolHandlerFunc) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		cs, ok := server.ClientSessionFromContext(ctx).(*callSession)
		if !ok || cs.cl.c.s != s {
			return next(ctx, req)
		}
		cl := cs.cl
		if res, err, ok := cl.replayed(); ok {
			return res, err // the tool ran already, on the tools pool (call_tool.go)
		}
		cl.span.ran(req.Params.Name)
		// Its tool's rate and concurrency: a call refused, or waiting for a
		// place, is not a request yet (its client gets a plain error, HTTP
		// 429), unless its deferral came meanwhile. A task is one first (its
		// client gets its task at once), which waits for its place as a
		// working task, and fails with the refusal.
		leave, stop := func() {}, func() {}
		defer func() { leave(); stop() }()
		if s.opts.DetachTools {
			ctx, stop = cl.toolContext(ctx)
		}
		admit := func(ctx context.Context) *spec.Error {
			left, refused := s.admit(cl, ctx)
			if refused != nil {
				cl.update(func(l *callLife) { l.failure = refused })
				return refused
			}
			leave = left
			return nil
		}
		if !cl.kind.task() {
			if refused := admit(ctx); refused != nil {
				return nil, refused
			}
		}
		out := cl.step(evPolicy)
		if out.runOn != nil {
			// The tool runs on the request's own context, which ends exactly
			// when the request does, with mcp-go's values (session, server,
			// request).
			ctx = requestCtx{Context: out.runOn.Context(), values: ctx}
		}
		if out.prime {
			if ps, ok := cl.st.(PrimingStream); ok {
				ps.Prime() // the priming event held back names the request the policy made
			}
		}
		var refusal *spec.Error
		cl.update(func(l *callLife) {
			if refusal = l.refusal; refusal != nil {
				l.failure = refusal
			}
		})
		if refusal != nil {
			return nil, refusal
		}
		if cl.kind.task() {
			if refused := admit(ctx); refused != nil {
				return nil, refused
			}
		}
		var res *mcp.CallToolResult
		var err error
		if s.opts.DetachTools && cl.detachable() {
			ends := stop
			stop = func() {} // the tool's goroutine calls it: the worker may leave first
			res, err = s.runTool(ctx, ends, cl, req, next, &leave)
		} else {
			res, err = next(ctx, req)
		}
		var se *spec.Error
		if errors.As(err, &se) {
			cl.update(func(l *callLife) { l.failure = se })
		}
		return res, err
	}
}

// toolContext is the context a tool runs on, and waits for its place on, with
// DetachTools: mcp-go's context for the call does not end with it (dispatch),
// so it is the call's, with mcp-go's values (ctx's) and the deadline a
// middleware outside the core's set; stop ends what it holds.
func (cl *call) toolContext(ctx context.Context) (_ context.Context, stop func()) {
	d, limited := ctx.Deadline()
	ctx = requestCtx{Context: cl.ctx, values: ctx}
	if !limited {
		return ctx, func() {}
	}
	return context.WithDeadline(ctx, d)
}

// requestCtx is a request's context carrying the values of another context (the one
// mcp-go made for the call). Value looks in the request's context first: it holds
// no values of its own but the context package's, so contexts a tool derives from
// this one are children of the request's context, with no watcher goroutine.
type requestCtx struct {
	context.Context
	values context.Context
}

func (c requestCtx) Value(key any) any {
	if v := c.Context.Value(key); v != nil {
		return v
	}
	return c.values.Value(key)
}

// connectionLost is called when the call's connection closes: a call that is not
// resumable is cancelled; a resumable one carries on, detached.
//
// A 2026 request lives on its response stream (closing it cancels the request)
// unless its client declared SEP-975; one waiting for its client's retry (its
// round was answered input_required) waits on.
func (cl *call) connectionLost() {
	if r := cl.step(evConnLost).cancel; r != nil {
		r.Cancel()
	}
}

// outlivesSession reports whether the call stays when its client ends the
// session (DELETE): its client can come back for it from another session with a
// token it holds (a resumable request's, a call key, a task id).
func (cl *call) outlivesSession() bool {
	return read(cl, func(l *callLife) bool {
		return (l.req != nil && !cl.hidden) || cl.kind.task() || l.phase == phaseDeferred || (cl.survives && l.phase != phaseDone)
	})
}

// flush runs after the handler returned: the notifications it sent are delivered
// before its response (notifier.seal).
func (cl *call) flush() { cl.sess.notes.seal(cl) }

// deliver sends one notification of the call: through the outbox when resumable,
// straight to the connection otherwise.
//
// A call the client cancelled sends nothing more (its handler may still be
// returning).
func (cl *call) deliver(n mcp.JSONRPCNotification) {
	if errors.Is(context.Cause(cl.ctx), errClientCancel) {
		return
	}
	var r *resume.Request
	cl.update(func(l *callLife) {
		if n.Method == spec.MethodProgress && !l.at().deferAt.IsZero() {
			if note := noteOf(n.Params.AdditionalFields); note != nil {
				l.lastProgress = note
			}
		}
		if r = l.req; r == nil {
			if cl.kind.listen() {
				n = tagSubscription(n, cl.id)
			}
			cl.c.send(cl.st, KindNotification, encodeNotification(n, 0))
		}
	})
	if r == nil {
		return
	}
	if cl.kind.listen() {
		n = tagSubscription(n, cl.id)
	}
	kind, key := classify(n)
	if _, err := r.Append(kind, key, func(seq uint64) []byte { return encodeNotification(n, cl.stamp(seq)) }); err != nil {
		cl.c.debug().Err(err).Str("request", string(cl.id)).Msg("queueing a notification")
	}
}

// emit writes a message of the call (a notification of method with params,
// or, with an id, a server-to-client request) to its client now, and returns
// the write's error: to its stream while it is plain, into its request's
// outbox once it is one. (deliver is the path of the notifications its tool
// sends through mcp-go.)
func (cl *call) emit(k Kind, id spec.ID, method string, params json.RawMessage) error {
	r := cl.request()
	if r == nil {
		return cl.st.Write(cl.c.ctx, Message{Kind: k, Data: spec.EncodeRequest(id, method, params)})
	}
	key := ""
	if k == KindProgress {
		tok, _, _ := spec.Member(params, "progressToken")
		key = string(tok)
	}
	_, err := r.Append(k, key, func(seq uint64) []byte { return spec.EncodeRequestSeq(id, method, params, cl.stamp(seq)) })
	return err
}

// stamp returns the sequence number a message of the call carries in its _meta: 0
// (none) for a hidden request, whose client knows nothing of sequence numbers.
func (cl *call) stamp(seq uint64) uint64 {
	if cl.hidden {
		return 0
	}
	return seq
}

// tagSubscription marks a notification of a subscriptions/listen with the listen's
// id, as 2026-07-28 asks of every notification on a subscription.
func tagSubscription(n mcp.JSONRPCNotification, id spec.ID) mcp.JSONRPCNotification {
	if _, ok := n.Params.Meta[spec.MetaSubscriptionID]; ok {
		return n
	}
	meta := make(map[string]any, len(n.Params.Meta)+1)
	for k, v := range n.Params.Meta {
		meta[k] = v
	}
	meta[spec.MetaSubscriptionID] = json.RawMessage(id)
	n.Params.Meta = meta
	return n
}

func classify(n mcp.JSONRPCNotification) (resume.Kind, string) {
	if n.Method != spec.MethodProgress {
		return KindNotification, ""
	}
	tok, _ := json.Marshal(n.Params.AdditionalFields["progressToken"])
	return KindProgress, string(tok)
}
