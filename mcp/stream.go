package mcp

import (
	"context"
	"time"

	"github.com/mark3labs/mcp-go/server"

	"github.com/mcp-resume/mcp-resume/spec"
	"github.com/mcp-resume/mcp-resume/transport"
)

// Session is what the core serves: a stdio or WebSocket connection (Serve makes
// one, with the connection as its only stream), a Streamable HTTP session (every
// POST's response and every GET's event stream is one of its Streams), or one
// stateless 2026-07-28 request (SessionOptions.Stateless: its response stream is
// its only one). The transport decodes each message and hands it to Handle with
// the stream its answers go to; the core keeps everything else: calls, resumable
// requests, their outboxes and routing.
//
// Every call of a Session that outlives Options.QuickCall (or sends a message
// sooner) gets an outbox, also for a client that did not advertise
// resumableRequests, so that the transport can reconnect a dropped stream by
// event id (Reconnect); such a client still sees plain MCP, and its calls end
// with its session.
//
// Its methods are safe for concurrent use (a Streamable HTTP session's
// concurrent POSTs call Handle at once): Handle returns without waiting for a
// tool, and a call that comes after Close ends as one whose connection was
// lost; Close waits for the session's own goroutines, not for its calls'
// handlers (Server.Close does). Park is the exception: its check for work and
// its Close are two steps, so its caller keeps every other call out.
type Session struct{ c *connState }

// NewSession starts a session. opts may be nil.
// A Stateless session (one 2026-era request) has no stream reconnects: its
// calls get an outbox only when they need one (SEP-975 declared, or MRTR).
func (s *Server) NewSession(opts *SessionOptions) *Session {
	return &Session{c: newConnState(s, nil, opts == nil || !opts.Stateless, opts)}
}

// Principal returns the principal the session was started for.
func (ss *Session) Principal() string { return ss.c.principal }

// Handle handles one message from the client: its answer, and for a call every
// message of the call, go to st. A response or notification needs no stream (nil).
func (ss *Session) Handle(m *spec.Message, raw []byte, st Stream) { ss.c.dispatch(m, raw, st) }

// HandleResume handles a requests/resume message m whose client also says it has
// every message of the request up to sequence number after (Last-Event-ID on its
// POST): like the ack extension, the replay starts after it.
func (ss *Session) HandleResume(m *spec.Message, st Stream, after uint64) {
	if ss.c.s.closed.Load() || m.Kind != spec.KindRequest || m.Method != spec.MethodResume {
		ss.c.dispatch(m, nil, st)
		return
	}
	ss.c.att.resume(m, st, after, nil)
}

// SetDefaultStream sets the stream for messages of no request (the GET stream); nil
// means there is none and such messages are dropped.
func (ss *Session) SetDefaultStream(st Stream) {
	c := ss.c
	c.update(func(s *sessionState) {
		s.def = st
		if st != nil && !c.stateless {
			c.startPump(s)
		} else {
			stopPump(s)
		}
	})
}

// StreamClosed tells the core that st is gone: requests attached to it are detached
// (they run on, reconnectable), calls on it that nobody could reconnect to are
// cancelled, and it stops being the default stream. Call it for every stream that
// closes, after its last Write returned.
func (ss *Session) StreamClosed(st Stream) {
	ss.c.update(func(s *sessionState) {
		if s.def == st {
			s.def = nil
			stopPump(s)
		}
	})
	ss.c.streamClosed(st)
}

// Reconnect attaches the request with id, delivered by this session, to st: every
// message after sequence number after follows (the client has the ones up to it:
// an acknowledgement, which puts the request in ack mode),
// then live ones, ending with the request's response. It returns the JSON-RPC error
// to give when there is no such request here (a failed token check, which the
// session's rate limit counts), or it has ended and let go of its messages.
func (ss *Session) Reconnect(id spec.ID, after uint64, st Stream) *spec.Error {
	return ss.c.att.reconnect(id, after, st)
}

// Busy reports whether the session has work a client may come back for: a call
// whose handler runs, or a request it delivered that a stream reconnect
// (Last-Event-ID) could take up again. A session that is not busy and has no
// stream holds nothing but itself; a transport may let it go sooner.
func (ss *Session) Busy() (busy bool) {
	ss.c.update(func(st *sessionState) {
		busy = len(st.running) > 0
		for _, t := range st.attached {
			busy = busy || !t.r.Gone()
		}
	})
	return busy
}

// Parked is a session with no stream and no work, let go and kept as what its
// client may come back with: its id, principal and rate-limit bucket, and what its
// initialize said (client info, capabilities, protocol version, log level,
// resumable requests and acks). It holds no goroutine, no context and no
// mcp-go registration; Server.Unpark takes it up again. It does not change
// once Park returns it: safe for concurrent use.
type Parked struct {
	id, principal, limitKey         string
	remote, transport               string
	declared                        declared
	initialized, resumable, ackMode bool
}

// ID is the parked session's id.
func (p *Parked) ID() string { return p.id }

// Principal is whose the parked session is.
func (p *Parked) Principal() string { return p.principal }

// Park lets the session go and returns what takes it up again, when it has no
// work (Busy) and is not stateless; otherwise it returns nil and the session is
// unchanged. The caller must have closed its streams; the session is not to be
// used after a successful Park.
func (ss *Session) Park() *Parked {
	c := ss.c
	if c.stateless || ss.Busy() {
		return nil
	}
	sess := c.sess
	p := &Parked{id: sess.id, principal: c.principal, limitKey: c.att.limitKey, remote: c.remote, transport: c.transport, declared: sess.get()}
	p.initialized, p.resumable, p.ackMode = sess.initialized.Load(), c.resumable.Load(), c.ackMode.Load()
	ss.Close(false)
	return p
}

// Unpark takes a parked session up again: a session with the same id, principal
// and state, as if it had never been let go.
func (s *Server) Unpark(p *Parked) *Session {
	ss := s.NewSession(&SessionOptions{Principal: p.principal, Remote: p.remote, Transport: p.transport, ID: p.id})
	c, sess := ss.c, ss.c.sess
	c.att.limitKey = p.limitKey
	sess.set(p.declared)
	if p.initialized {
		sess.initialized.Store(true)
	}
	c.resumable.Store(p.resumable)
	c.ackMode.Store(p.ackMode)
	if s.opts.Sessions != nil && p.initialized {
		c.sharedAt.Store(time.Now().UnixNano()) // written again in use (keepShared)
	}
	return ss
}

// Close ends the session. Requests whose client holds a token of theirs (a
// resumable request's, a call key, a task id) stay resumable for maxWait from any
// session, and the rest are cancelled; with cancel (the client ended the
// session) so are calls still connection-bound that a lost connection would
// leave a moment to come back to.
func (ss *Session) Close(cancel bool) { ss.c.shutdown(cancel) }

// CloseStream asks the transport to close the stream the calling tool's messages
// travel on (an SSE response on Streamable HTTP), as a server may do with a
// long-idle stream (SEP-1699): the client reconnects with Last-Event-ID and gets
// the rest, including the result. The tool keeps running. It reports whether there
// was such a stream to close; on stdio and WebSocket there never is.
func CloseStream(ctx context.Context) bool {
	cs, ok := server.ClientSessionFromContext(ctx).(*callSession)
	if !ok {
		return false
	}
	return cs.cl.closeStream()
}

// ClosableStream is a Stream the server may close on its own (CloseStream).
type ClosableStream interface {
	Stream
	// CloseStream ends the stream as if the client had gone away; the transport
	// then reports it with Session.StreamClosed. It reports whether it was open.
	CloseStream() bool
}

// A GatedStream is a Stream whose request came with credentials that allow
// some tools only (an OAuth access token's scopes), and that answers a
// refusal its own way: the core asks it before a tools/call runs, and
// answers a refused one with Refuse (on Streamable HTTP: 403 with the
// challenge to step up), or, when Refuse cannot (the stream has started),
// with the refusal's JSON-RPC error.
type GatedStream interface {
	Stream
	// ToolRefusal returns the refusal of a call of tool by the stream's
	// credentials: nil when they allow it.
	ToolRefusal(tool string) *transport.Refusal
	// Refuse answers request id with ref, and reports whether it did.
	Refuse(id spec.ID, ref *transport.Refusal) bool
}

// A PrimingStream is a Stream that gives its client an id to reconnect with
// before any message of its request (Streamable HTTP's priming event,
// SEP-1699). A client that reconnects with that id must find the request: the
// core hands the stream, for each call, what makes the call resumable before
// the id goes out (a call in its quick window is promoted then), and holds the
// id back while nothing could make it resumable yet (its tool has not started).
type PrimingStream interface {
	Stream
	// BeforePrime sets f, which the stream runs right before it would write
	// its priming event of its own (not with a message: the core makes a call
	// resumable before its first message), outside its own lock (f may Write
	// to it). f returns false to hold the priming event back: the stream then
	// writes it with its first message, or at its first flush after Prime.
	// Set before the stream's first Write.
	BeforePrime(f func() bool)
	// Prime ends a hold of BeforePrime's f: the priming event, when still
	// due, goes out at the stream's next flush (running f again).
	Prime()
}

// closeStream closes the stream the call's messages currently go to, when its
// transport can.
func (cl *call) closeStream() bool {
	cs, ok := cl.st.(ClosableStream)
	if !ok {
		return false
	}
	cl.due() // the client comes back for it: it must be resumable first
	return cs.CloseStream()
}
