package mcp

import (
	"cmp"
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/google/uuid"
	"github.com/rs/zerolog"

	"github.com/mcp-resume/mcp-resume/internal/invariant"
	"github.com/mcp-resume/mcp-resume/resume"
	"github.com/mcp-resume/mcp-resume/spec"
	"github.com/mcp-resume/mcp-resume/transport"
)

// Stream is where the core writes messages for the client: the engine's
// resume.Sink, so that a request attached to a stream writes to it directly. On
// stdio and WebSocket one Stream is the whole connection; on Streamable HTTP each
// POST's response (JSON or SSE) and each GET's event stream is one. The Message it
// gets says what it carries (Kind: a KindResponse ends its request's stream), and
// its number in its request's outbox (Seq, 0 outside any outbox). A Stream's Write
// is safe for concurrent use. A Stream must be comparable (a pointer, typically):
// the core and the engine tell streams apart by equality.
type Stream = resume.Sink

// Message is one message the core writes to a Stream (resume.Message).
type Message = resume.Message

// Kind says what a Message carries (resume.Kind).
type Kind = resume.Kind

// The kinds of Message a Stream gets.
const (
	KindNotification = resume.KindNotification // a notification other than progress
	KindProgress     = resume.KindProgress     // a progress notification
	KindRequest      = resume.KindRequest      // a server-to-client request
	KindResponse     = resume.KindResponse     // the response to a request: it ends a request's stream
)

// connState is one session being served: a connection on stdio and WebSocket, an
// Mcp-Session-Id on Streamable HTTP. It holds the session's lifecycle, its
// streams and what it sends, and dispatches each message by era (session_dispatch.go).
// What its goroutines share is one sessionState, changed only through update
// (session_state.go: the session's one lock); its work is in one part per concern:
// the requests it delivered and the token checks that find them (attachments,
// request_attach.go), the calls it runs (sessionCalls, call_accept.go) and the tasks/stream
// requests it serves (sessionTasks, task.go).
type connState struct {
	s      *Server
	ctx    context.Context // values only (mcp-go session); ends when the session does
	cancel context.CancelFunc
	sess   *connSession
	// log is the session's logger, with its id and principal, made on first use
	// (logger): an idle session holds none.
	log atomic.Pointer[zerolog.Logger]
	// replay: the transport reconnects streams by event id (Streamable HTTP), so
	// every call gets an outbox, even for a client that did not ask for
	// resumability (it never sees a policy, a token or a sequence number; only its
	// own session can reconnect to the call's stream).
	replay bool
	// principal is who the client authenticated as ("" without authentication):
	// the requests started here are bound to it, and only it finds them by token.
	principal string
	// remote and transport are SessionOptions', for the requests' spans.
	remote, transport string
	// toolRefusal is SessionOptions.ToolRefusal (nil: every tool may be
	// called).
	toolRefusal func(tool string) *transport.Refusal
	// stateless: the session carries 2026-era requests only (a Streamable HTTP
	// POST of that era): it is not an mcp-go session, and a 2025-era request is
	// refused.
	stateless bool

	resumable atomic.Bool // the client advertised resumableRequests
	ackMode   atomic.Bool // ... with the ack extension
	// sharedAt is when the session was last written to Options.Sessions
	// (unix nanoseconds; 0: not shared).
	sharedAt atomic.Int64

	st invariant.Guarded[sessionState, *sessionState] // what the session's goroutines share (session_state.go)

	att   attachments
	calls sessionCalls
	tasks sessionTasks

	wg sync.WaitGroup // goroutines owned by this session (the mcp-go session's pump, forwarded answers)
}

// tracked is a request delivered by a session. hidden: made resumable only for
// this session's stream reconnects; the client holds no token.
type tracked struct {
	r      resume.Handle
	hidden bool
	sink   Stream // where it was attached
	// task: a task (started or read here); it belongs to its principal, not
	// to this session, and is never cancelled with it.
	task bool
	// span is the span of the request that attached it here (a tasks/result),
	// ended as its stream goes away if it has not ended; nil for none.
	span *reqSpan
}

// closedStream stands for a stream that closed in a tracked request's entry,
// which must not keep it (nor, through it, its transport's state): no request
// is attached to it, so detaching from it does nothing.
type closedStream struct{}

func (closedStream) Write(context.Context, Message) error { return errStreamClosed }

var errStreamClosed = errors.New("mcp: the stream closed")

// minSweep is the smallest size of a session's attached map at which requests that
// are gone are swept out of it.
const minSweep = 64

func newConnState(s *Server, def Stream, replay bool, opts *SessionOptions) *connState {
	ctx, cancel := context.WithCancel(context.Background())
	c := &connState{
		s: s, ctx: ctx, cancel: cancel, replay: replay,
	}
	c.update(func(st *sessionState) {
		*st = sessionState{def: def, running: make(map[string]*call, 1), attachSweepAt: minSweep, retrySweepAt: minSweep}
		if replay {
			st.onStream = make(map[Stream][]tracked)
		}
	})
	c.att = attachments{c: c}
	c.calls = sessionCalls{c: c}
	c.tasks = sessionTasks{c: c}
	if opts != nil {
		c.principal, c.remote, c.transport, c.stateless = opts.Principal, opts.Remote, opts.Transport, opts.Stateless
		c.toolRefusal = opts.ToolRefusal
	}
	switch {
	case c.principal != "":
		c.att.limitKey = "principal:" + c.principal
	case c.remote != "":
		c.att.limitKey = "remote:" + c.remote
	default:
		c.att.limitKey = "local"
	}
	if c.stateless {
		// One request: mcp-go keys it by this id (and the request's id), and its
		// logs name the request, not a session.
		c.sess = newConnSession(c, "r"+strconv.FormatUint(s.nextSession.Add(1), 36))
		return c
	}
	id := uuid.NewString()
	if opts != nil && opts.ID != "" {
		id = opts.ID
	}
	c.sess = newConnSession(c, id)
	if err := s.srv.RegisterSession(ctx, c.sess); err != nil {
		c.logger().Warn().Err(err).Msg("registering the session with mcp-go")
	}
	if def != nil {
		c.update(c.startPump)
	}
	return c
}

// startPump starts the goroutine that writes the session's own notifications
// to its default stream, unless it runs. Only a session with a default stream
// has one: a Streamable HTTP session costs no goroutine while it has no GET
// stream open (a notification for it meanwhile waits in the channel's buffer,
// or is dropped when that is full, as mcp-go drops them). Called within
// update.
func (c *connState) startPump(st *sessionState) {
	if st.pumpStop != nil || st.closed {
		return
	}
	stop := make(chan struct{})
	st.pumpStop = stop
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.sess.pump(c.ctx, stop)
	}()
}

// stopPump stops the pump, if one runs. Called within update.
func stopPump(st *sessionState) {
	if st.pumpStop != nil {
		close(st.pumpStop)
		st.pumpStop = nil
	}
}

// send writes a message the core produced (outside any outbox) to st. A failure
// means the stream is going away; its transport notices.
func (c *connState) send(st Stream, k Kind, msg []byte) {
	if st == nil {
		c.debug().Msg("no stream for a message; dropped")
		return
	}
	if err := st.Write(c.ctx, Message{Kind: k, Data: msg}); err != nil {
		c.debug().Err(err).Msg("write failed")
	}
}

func (c *connState) reply(st Stream, msg []byte) { c.send(st, KindResponse, msg) }

func (c *connState) replyError(st Stream, id spec.ID, e *spec.Error) {
	c.reply(st, spec.EncodeError(id, e))
}

// defaultStream returns the stream for messages of no request.
func (c *connState) defaultStream() (def Stream) {
	c.update(func(st *sessionState) { def = st.def })
	return def
}

// shutdown ends the session. Requests the client can resume (it holds their token)
// are detached and live on for maxWait, unless cancel is set (the client ended the
// session explicitly); every other call is cancelled.
func (c *connState) shutdown(cancel bool) {
	var (
		running  map[string]*call
		attached map[string]tracked
		retries  map[string]retried
		def      Stream
	)
	c.update(func(st *sessionState) {
		st.closed = true
		running, attached, retries, def = st.running, st.attached, st.retries, st.def
		st.running, st.attached, st.retries = nil, nil, nil
		stopPump(st)
	})
	for _, t := range attached {
		// The client holds a token of each of them but the hidden ones (a
		// task's id is one), and a client that ends its session (DELETE) may
		// still come back for what it holds a token of.
		if t.hidden && !t.task {
			t.r.Cancel()
			continue
		}
		// A result the client received is not kept for it once it is done.
		if cancel && !t.task {
			t.r.Release()
		}
		// A transport with one stream per session (stdio, WebSocket) has it as the
		// default stream; one with more reports each closed stream (streamClosed).
		t.r.Detach(cmp.Or(t.sink, def))
		t.span.endCause(errConnectionLost)
	}
	cancelUnanswered(retries, nil)
	for _, cl := range running {
		if cancel && !cl.outlivesSession() {
			cl.cancel(errClientCancel)
			continue
		}
		// A call made resumable here is not in attached on a one-stream
		// transport (see track); its request is detached here.
		if r := cl.request(); r != nil {
			r.Detach(def)
		}
		cl.connectionLost()
	}
	if !c.stateless {
		c.s.srv.UnregisterSession(c.ctx, c.sess.id)
	}
	c.cancel()
	c.wg.Wait()
	// The pump has stopped and mcp-go no longer has the session: its channel
	// (64 notifications deep, 3.5 KB) goes, though calls that outlive the
	// session keep the session itself.
	c.sess.ch.Store(nil)
}

// streamClosed runs when the transport closed st (the client went away, or the
// server closed an idle stream): requests attached to it are detached, calls on it
// that cannot be reconnected to are cancelled.
func (c *connState) streamClosed(st Stream) {
	var (
		calls []*call
		reqs  []tracked
	)
	c.update(func(s *sessionState) {
		for _, cl := range s.running {
			if cl.st == st {
				calls = append(calls, cl)
			}
		}
		reqs = s.onStream[st]
		delete(s.onStream, st)
		// The requests keep their entries in attached (a result kept for
		// --delivered-retention is found by id), but not the stream: nothing
		// is attached to it from now on.
		for _, t := range reqs {
			k := string(t.r.ID())
			if a, ok := s.attached[k]; ok && a.sink == st {
				a.sink, a.span = closedStream{}, nil
				s.attached[k] = a
			}
		}
	})
	for _, t := range reqs {
		t.r.Detach(t.sink)
		t.span.endCause(errConnectionLost)
	}
	for _, cl := range calls {
		cl.connectionLost()
	}
	c.calls.retriesClosed(st)
}

// logger is the session's logger: the server's, with the session's id and
// principal (a stateless session's requests are named by their own logs).
func (c *connState) logger() *zerolog.Logger {
	if l := c.log.Load(); l != nil {
		return l
	}
	l := c.s.log
	if !c.stateless {
		lc := c.s.log.With().Str("session", c.sess.id)
		if c.principal != "" {
			lc = lc.Str("principal", c.principal)
		}
		l = lc.Logger()
	}
	c.log.CompareAndSwap(nil, &l)
	return c.log.Load()
}

// debug is logger().Debug(), without making the logger while debug logs are
// off (a nil event logs nothing).
func (c *connState) debug() *zerolog.Event {
	if c.s.log.GetLevel() > zerolog.DebugLevel || zerolog.GlobalLevel() > zerolog.DebugLevel {
		return nil
	}
	return c.logger().Debug()
}
