package mcp

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcp-resume/mcp-resume/spec"
)

// connSession is the mcp-go session of a connection: client info, capabilities, log
// level, and the channel for notifications not tied to a request (list changes).
type connSession struct {
	c           *connState
	id          string
	initialized atomic.Bool
	// ch takes the session's own notifications (list changes) while its pump
	// runs; nil until the session first has a default stream: mcp-go's sends
	// are non-blocking, so a notification for a session with nowhere to go is
	// dropped, as it would be by the pump (an idle session does not hold a
	// 64-slot channel, about 6 KB).
	ch atomic.Pointer[chan mcp.JSONRPCNotification]

	declaredState
}

// declared is what a client declares of itself (in initialize, or in a
// 2026-era request's envelope) and the log level it asks for.
type declared struct {
	level    mcp.LoggingLevel
	info     mcp.Implementation
	caps     mcp.ClientCapabilities
	protocol string
}

// declaredState is a declared under its lock, read and written by mcp-go
// through the session interfaces' getters and setters: a connection's, or a
// 2026-era request's own.
type declaredState struct {
	mu sync.Mutex // guards d, and the fields of a struct that embeds it
	d  declared
}

func (s *declaredState) SetLogLevel(l mcp.LoggingLevel) { s.mu.Lock(); s.d.level = l; s.mu.Unlock() }
func (s *declaredState) GetLogLevel() mcp.LoggingLevel  { return s.get().level }
func (s *declaredState) GetClientInfo() mcp.Implementation {
	return s.get().info
}
func (s *declaredState) SetClientInfo(i mcp.Implementation) { s.mu.Lock(); s.d.info = i; s.mu.Unlock() }
func (s *declaredState) GetClientCapabilities() mcp.ClientCapabilities {
	return s.get().caps
}
func (s *declaredState) SetClientCapabilities(c mcp.ClientCapabilities) {
	s.mu.Lock()
	s.d.caps = c
	s.mu.Unlock()
}
func (s *declaredState) SetProtocolVersion(v string) { s.mu.Lock(); s.d.protocol = v; s.mu.Unlock() }

// get returns a copy of what is declared.
func (s *declaredState) get() declared {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.d
}

// set replaces what is declared (a parked session taken up again).
func (s *declaredState) set(d declared) {
	s.mu.Lock()
	s.d = d
	s.mu.Unlock()
}

// newConnSession returns the session of c.
func newConnSession(c *connState, id string) *connSession {
	s := &connSession{c: c, id: id}
	s.d.level = mcp.LoggingLevelInfo
	return s
}

// channel returns the session's notification channel, made on first use.
func (s *connSession) channel() chan mcp.JSONRPCNotification {
	if ch := s.ch.Load(); ch != nil {
		return *ch
	}
	ch := make(chan mcp.JSONRPCNotification, 64)
	if s.ch.CompareAndSwap(nil, &ch) {
		return ch
	}
	return *s.ch.Load()
}

var (
	_ server.ClientSession         = (*connSession)(nil)
	_ server.SessionWithLogging    = (*connSession)(nil)
	_ server.SessionWithClientInfo = (*connSession)(nil)
)

func (s *connSession) Initialize()       { s.initialized.Store(true) }
func (s *connSession) Initialized() bool { return s.initialized.Load() }

// NotificationChannel is nil (sends are dropped) until the session's pump first
// runs.
func (s *connSession) NotificationChannel() chan<- mcp.JSONRPCNotification {
	if ch := s.ch.Load(); ch != nil {
		return *ch
	}
	return nil
}
func (s *connSession) SessionID() string { return s.id }

// pump writes the session's own notifications (list changes) to its default
// stream until ctx ends or stop is closed.
func (s *connSession) pump(ctx context.Context, stop <-chan struct{}) {
	ch := s.channel()
	for {
		select {
		case n := <-ch:
			s.c.send(s.c.defaultStream(), KindNotification, encodeNotification(n, 0))
		case <-ctx.Done():
			return
		case <-stop:
			return
		}
	}
}

// callSession is the mcp-go session a single request runs with: everything is the
// connection's, except the notification channel, which belongs to the request, and
// server-to-client requests, which travel with the request. Every optional
// interface is implemented explicitly (an embedded interface would hide them).
type callSession struct {
	cl    *call
	asker // the tool's questions to its client
	// own holds what a 2026-era request declares for itself (mcp-go writes its
	// envelope into the session it runs with); nil for a 2025-era request, whose
	// session is its connection's.
	own *ownSession

	notes notifier
}

// ownSession is the session state of one 2026-era request.
type ownSession struct {
	declaredState
	id     string // SessionID's, once made
	filter mcp.SubscriptionFilter
}

var (
	_ server.ClientSession                 = (*callSession)(nil)
	_ server.SessionWithLogging            = (*callSession)(nil)
	_ server.SessionWithClientInfo         = (*callSession)(nil)
	_ server.SessionWithSampling           = (*callSession)(nil)
	_ server.SessionWithElicitation        = (*callSession)(nil)
	_ server.SessionWithRoots              = (*callSession)(nil)
	_ server.SessionWithSubscriptionFilter = (*callSession)(nil)
	// Not for Streamable HTTP: see UpgradeToSSEWhenReceiveNotification.
	_ server.SessionWithStreamableHTTPConfig = (*callSession)(nil)
)

func (s *callSession) Initialize() {
	if s.own == nil {
		s.cl.c.sess.Initialize()
	}
}

// Initialized: a 2026-era request needs no handshake.
func (s *callSession) Initialized() bool { return s.own != nil || s.cl.c.sess.Initialized() }

// SessionID is the connection's session id, and for a 2026-era request, which
// has no session, one of its own (mcp-go keys in-flight requests and
// subscriptions by it).
func (s *callSession) SessionID() string {
	if o := s.own; o != nil {
		o.mu.Lock()
		defer o.mu.Unlock()
		if o.id == "" {
			o.id = s.cl.c.sess.SessionID() + "/" + string(s.cl.id)
		}
		return o.id
	}
	return s.cl.c.sess.SessionID()
}

// SetSubscriptionFilter and SubscriptionFilter hold a subscriptions/listen's
// filter. A 2026-era request's filter is always active: what it did not ask for,
// it does not get.
func (s *callSession) SetSubscriptionFilter(f mcp.SubscriptionFilter) {
	if s.own != nil {
		s.own.mu.Lock()
		s.own.filter = f
		s.own.mu.Unlock()
	}
}

func (s *callSession) SubscriptionFilter() (mcp.SubscriptionFilter, bool) {
	if s.own == nil {
		return mcp.SubscriptionFilter{}, false
	}
	s.own.mu.Lock()
	defer s.own.mu.Unlock()
	return s.own.filter, true
}

// NotificationChannel is the request's own channel (notifier), made on first
// use; nil once the handler returned.
func (s *callSession) NotificationChannel() chan<- mcp.JSONRPCNotification {
	return s.notes.channel(s.cl)
}

// UpgradeToSSEWhenReceiveNotification is mcp-go's hook right before each send
// into NotificationChannel (server.SendNotificationToClient), on the sender's
// goroutine: the notifier counts the send, waits for room when the channel is
// full, and starts its drainer (notifier.announce). The name is mcp-go's: on its
// own Streamable HTTP transport the hook switches a response to SSE. A call
// that is to become resumable (call.due) becomes it first.
func (s *callSession) UpgradeToSSEWhenReceiveNotification() {
	s.cl.due()
	s.notes.announce(s.cl)
}

// declaredState is what the request's client declared: its own for a
// 2026-era request, else its connection's.
func (s *callSession) declaredState() *declaredState {
	if s.own != nil {
		return &s.own.declaredState
	}
	return &s.cl.c.sess.declaredState
}

func (s *callSession) SetLogLevel(l mcp.LoggingLevel) { s.declaredState().SetLogLevel(l) }
func (s *callSession) GetLogLevel() mcp.LoggingLevel  { return s.declaredState().GetLogLevel() }
func (s *callSession) GetClientInfo() mcp.Implementation {
	return s.declaredState().GetClientInfo()
}
func (s *callSession) SetClientInfo(i mcp.Implementation) { s.declaredState().SetClientInfo(i) }
func (s *callSession) GetClientCapabilities() mcp.ClientCapabilities {
	return s.declaredState().GetClientCapabilities()
}
func (s *callSession) SetClientCapabilities(c mcp.ClientCapabilities) {
	s.declaredState().SetClientCapabilities(c)
}
func (s *callSession) SetProtocolVersion(v string) { s.declaredState().SetProtocolVersion(v) }

// TakesInputRequired reports whether an input_required result (MRTR) that the
// tool running on ctx returns reaches its client as the request's answer, to
// be retried with the client's answers: a 2026-era request that is not a task,
// or not one yet (its policy's After has not come, and Promote was not
// called), and was not deferred (Options.AnswerWithin: its client awaits it
// with the await tool). Otherwise the tool asks its questions with Ask.
func TakesInputRequired(ctx context.Context) bool {
	cs, ok := server.ClientSessionFromContext(ctx).(*callSession)
	if !ok || cs.cl.modern == nil {
		return false
	}
	cl := cs.cl
	return read(cl, func(l *callLife) bool { return l.phase != phaseDeferred && (!cl.kind.task() || l.req == nil) })
}

// Promote makes the call whose tool runs on ctx resumable now, as its
// policy's After does when its time comes: a task, for a 2026 client of the
// Tasks extension (its answer is then the CreateTaskResult), a request with a
// resume policy for a client of SEP-975. It is for a tool that knows, before
// its After, that it will run long: a gateway whose upstream just made the
// call a task of its own. It reports whether the call is resumable now (it
// may have been already); a call no policy makes resumable stays as it is.
func Promote(ctx context.Context) bool {
	cs, ok := server.ClientSessionFromContext(ctx).(*callSession)
	if !ok {
		return false
	}
	cl := cs.cl
	if !read(cl, func(l *callLife) bool { return l.applied }) {
		return false
	}
	return cl.step(evPromote).req != nil
}

// Ask sends a server-to-client request (sampling/createMessage,
// elicitation/create, roots/list) for the request whose tool runs on ctx, as
// mcp-go's RequestSampling, RequestElicitation and RequestRoots do there, with
// params and result as they are on the wire: the gateway passes an upstream's
// questions on untouched. Its errors are the same as theirs.
func Ask(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	cs, ok := server.ClientSessionFromContext(ctx).(*callSession)
	if !ok {
		return nil, spec.NewError(spec.CodeInternalError, "", "mcp: Ask outside a tool call of this server")
	}
	if len(params) == 0 {
		params = json.RawMessage("{}")
	}
	return cs.cl.ask(ctx, method, params)
}
