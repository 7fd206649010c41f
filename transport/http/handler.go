package http

import (
	"bytes"
	"errors"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"

	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/spec"
	"github.com/mcp-resume/mcp-resume/transport"
)

// Header names of Streamable HTTP.
const (
	HeaderSessionID       = "Mcp-Session-Id"
	HeaderProtocolVersion = "Mcp-Protocol-Version"
	HeaderLastEventID     = "Last-Event-Id"
	// HeaderKeepAlive, on an event stream's response, is the stream's keepalive
	// interval in seconds: the stream carries at least a comment that often. A
	// client takes a stream silent for much longer (ClientOptions.Silence) for a
	// dead connection. On a request, it asks for that interval on the request's
	// stream (ClientOptions.KeepAlive): the server takes it when it is shorter
	// than its own (Options.KeepAlive), down to MinKeepAlive.
	HeaderKeepAlive = "Mcp-Resume-Keepalive"
)

// Versions are the protocol versions served (spec.Versions). A request without
// an MCP-Protocol-Version header and without a 2026-07-28 envelope is taken as
// 2025-03-26, as the specification says.
var Versions = spec.Versions

// Options configure a Handler. The zero value of each field means its default.
type Options struct {
	// AllowedHosts lists the accepted Host header values: a host name or IP,
	// matched on any port, or "*" for any. Default: localhost, 127.0.0.1 and ::1.
	AllowedHosts []string
	// AllowedOrigins lists the accepted Origin header values ("https://app.example")
	// or "*" for any. A request without Origin (not from a browser) passes. Default:
	// http and https origins whose host is allowed by AllowedHosts' default (the
	// loopback names), on any port.
	AllowedOrigins []string
	// Keys, when set, requires every request to carry one of its API keys
	// ("Authorization: Bearer <key>"); others get 401 unauthorized. A session
	// belongs to the principal that opened it, and its resumable requests are
	// bound to that principal. Nil: no authentication.
	Keys *transport.KeySet
	// Auth, when set, authenticates every request instead of Keys (an
	// oauth.ResourceServer): its answer names the principal, and a tools/call
	// its credentials do not allow is refused with its Refusal (403 and a
	// step-up challenge).
	Auth transport.Authenticator
	// MaxMessageBytes bounds a POST body. Default transport.DefaultMaxMessageBytes.
	MaxMessageBytes int
	// BodyTimeout bounds the reading of a POST body, from the end of the
	// request's head: a body that has not fully arrived by then is answered
	// 408 with reason request_timeout (when the client still reads) and its
	// connection closed. It covers the body only, not the event stream that
	// may follow (unlike http.Server.ReadTimeout, which would cut every stream
	// it outlived). Default 30s; negative: no bound.
	BodyTimeout time.Duration
	// EmptySessionIdle: a session without an open stream is checked this long
	// after its last stream ended, and again as often while it has work
	// (mcp.Session.Busy: a call running, a delivered request not ended). Once
	// it has none it is parked: let go but for what its client may come back
	// with (mcp.Parked, a few hundred bytes), taken up again by the client's
	// next request, ended SessionIdle after its last use. Default 1 minute, and
	// never longer than SessionIdle.
	EmptySessionIdle time.Duration
	// MaxSessions bounds the sessions open at once; MaxSessionsPerPrincipal
	// those of one principal (API keys); MaxSessionsPerAddress those
	// initialized from one remote address. At a bound, a new session takes the
	// place of the one in its scope with no open stream that was used least
	// recently, which ends as an expired one does; when every one has a stream,
	// initialize is refused: HTTP 503, reason too_many_sessions. Defaults
	// 10,000, 1,000 and 1,000; negative: no bound.
	MaxSessions, MaxSessionsPerPrincipal, MaxSessionsPerAddress int
	// SessionIdle ends a session, parked or not, that has had no open stream for
	// this long, and one whose only open stream is its standalone GET stream
	// when its client has sent nothing (no request, no new stream) for this
	// long: keepalive comments keep the connection up but say nothing of the
	// client. Its resumable requests stay resumable from another session.
	// Default 10 minutes.
	SessionIdle time.Duration
	// KeepAlive: an open event stream quiet this long (nothing flushed) gets an SSE
	// comment, which keeps proxies from cutting it and notices a dead client.
	// Default 20s. A request may ask for a shorter interval on its own stream
	// (HeaderKeepAlive): the clients of this project do, to notice a silent
	// connection within ClientKeepAlive's window.
	KeepAlive time.Duration
	// StreamIdle, when set, closes a request's event stream after that long without
	// an event; the client reconnects with Last-Event-ID (SEP-1699 polling). Default
	// 0: streams stay open.
	StreamIdle time.Duration
	// Retry is the reconnection delay advertised in priming events. Default 1s.
	Retry time.Duration
	// Coalesce is how long an event waits in the response's buffer for others
	// before it is flushed to the client, so that a burst of events, or a quick
	// call's priming event, policy and response, share one write. A response is
	// never held: it goes out with everything before it. Default 200µs; negative
	// flushes every event at once.
	Coalesce time.Duration
	// FirstFlush is how long the first events of a stream wait for others
	// instead of Coalesce: a call's priming event and policy wait for its
	// response, so that a quick call is answered in one write even when its
	// answer takes longer than Coalesce (a durable call's waits for its final
	// state to be stored). Events after the first flush wait Coalesce.
	// Default 1ms (Coalesce when that is negative); negative: Coalesce.
	FirstFlush time.Duration
	// WriteTimeout bounds one write to a client; a client that does not read for
	// that long loses its stream (its requests are detached). Default 30s.
	WriteTimeout time.Duration
	// Logger receives the transport's logs. Nil means none.
	Logger *zerolog.Logger
}

func (o *Options) withDefaults() Options {
	var v Options
	if o != nil {
		v = *o
	}
	if len(v.AllowedHosts) == 0 {
		v.AllowedHosts = transport.LoopbackHosts
	}
	if v.MaxMessageBytes <= 0 {
		v.MaxMessageBytes = transport.DefaultMaxMessageBytes
	}
	def := func(d *time.Duration, val time.Duration) {
		if *d <= 0 {
			*d = val
		}
	}
	if v.BodyTimeout == 0 {
		v.BodyTimeout = 30 * time.Second
	}
	def(&v.SessionIdle, 10*time.Minute)
	def(&v.EmptySessionIdle, time.Minute)
	v.EmptySessionIdle = min(v.EmptySessionIdle, v.SessionIdle)
	defInt := func(n *int, val int) {
		if *n == 0 {
			*n = val
		}
	}
	defInt(&v.MaxSessions, 10000)
	defInt(&v.MaxSessionsPerPrincipal, 1000)
	defInt(&v.MaxSessionsPerAddress, 1000)
	def(&v.KeepAlive, 20*time.Second)
	def(&v.Retry, time.Second)
	def(&v.WriteTimeout, 30*time.Second)
	if v.Coalesce == 0 {
		v.Coalesce = 200 * time.Microsecond
	}
	switch {
	case v.FirstFlush < 0, v.FirstFlush == 0 && v.Coalesce < 0:
		v.FirstFlush = v.Coalesce
	case v.FirstFlush == 0:
		v.FirstFlush = time.Millisecond
	}
	if v.Logger == nil {
		nop := zerolog.Nop()
		v.Logger = &nop
	}
	return v
}

// Handler serves the Streamable HTTP endpoint of a Server. Mount it at one path
// (conventionally /mcp). It is safe for concurrent use.
type Handler struct {
	core *mcp.Server
	opts Options
	log  zerolog.Logger
	// keepAliveHeader is opts.KeepAlive in seconds, as HeaderKeepAlive says it.
	keepAliveHeader string

	mu          sync.Mutex // guards the fields below
	sessions    map[string]*session
	parked      map[string]*parkedSession // sessions let go for having nothing, until SessionIdle
	sweep       *time.Timer               // ends parked sessions past SessionIdle; nil while none is parked
	byPrincipal map[string]int            // sessions in sessions, by principal
	byAddress   map[string]int            // ... by remote address
	closed      bool
}

var _ http.Handler = (*Handler)(nil)

// NewHandler returns a Handler serving core.
func NewHandler(core *mcp.Server, opts *Options) *Handler {
	o := opts.withDefaults()
	return &Handler{core: core, opts: o, log: *o.Logger, sessions: make(map[string]*session), parked: map[string]*parkedSession{},
		byPrincipal: map[string]int{}, byAddress: map[string]int{},
		keepAliveHeader: strconv.FormatFloat(o.KeepAlive.Seconds(), 'f', -1, 64)}
}

// Close ends every session as a server shutdown does: their streams close, their
// resumable requests stay resumable (by the next process, with a durable store),
// the rest are cancelled. Requests arriving later get 503 shutting_down (with a
// session id or without: initialize too). Call it before
// http.Server.Shutdown, which waits for open streams.
func (h *Handler) Close() {
	h.mu.Lock()
	h.closed = true
	all := make([]*session, 0, len(h.sessions))
	for _, s := range h.sessions {
		all = append(all, s)
	}
	h.sessions = map[string]*session{}
	h.parked = map[string]*parkedSession{}
	if h.sweep != nil {
		h.sweep.Stop()
	}
	h.mu.Unlock()
	for _, s := range all {
		s.end(false)
	}
}

// Sessions returns the number of sessions, parked ones included.
func (h *Handler) Sessions() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.sessions) + len(h.parked)
}

// Parked returns the number of parked sessions.
func (h *Handler) Parked() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.parked)
}

// parkedSession is a session let go after EmptySessionIdle for having no stream
// and no work: what its client may come back with (mcp.Parked) and what the
// session bounds count. It is taken up again by the next request with its id,
// and ends SessionIdle after it was last used.
type parkedSession struct {
	p      *mcp.Parked
	remote string
	used   time.Time
}

// park replaces live session s by its parked form p.
func (h *Handler) park(s *session, p *mcp.Parked) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.sessions[s.id] != s || h.closed {
		return
	}
	delete(h.sessions, s.id)
	h.parked[s.id] = &parkedSession{p: p, remote: s.remote, used: s.used}
	if h.sweep == nil {
		h.sweep = time.AfterFunc(h.sweepEvery(), h.sweepParked)
	}
}

func (h *Handler) sweepEvery() time.Duration { return max(h.opts.SessionIdle/4, time.Second) }

// sweepParked ends the parked sessions unused for SessionIdle.
func (h *Handler) sweepParked() {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := time.Now()
	for id, ps := range h.parked {
		if now.Sub(ps.used) >= h.opts.SessionIdle {
			h.forgetParkedLocked(id, ps)
		}
	}
	if len(h.parked) == 0 || h.closed {
		h.sweep = nil
		return
	}
	h.sweep.Reset(h.sweepEvery())
}

func (h *Handler) forgetParkedLocked(id string, ps *parkedSession) {
	delete(h.parked, id)
	h.countLocked(ps.p.Principal(), ps.remote, -1)
}

// countLocked adds d to the session counts of principal and remote.
func (h *Handler) countLocked(principal, remote string, d int) {
	if h.byPrincipal[principal] += d; h.byPrincipal[principal] <= 0 {
		delete(h.byPrincipal, principal)
	}
	if h.byAddress[remote] += d; h.byAddress[remote] <= 0 {
		delete(h.byAddress, remote)
	}
}

// unparkLocked takes parked session id up again as a live session.
func (h *Handler) unparkLocked(id string, ps *parkedSession) *session {
	delete(h.parked, id)
	now := time.Now()
	s := &session{h: h, id: id, streams: make(map[*stream]struct{}), principal: ps.p.Principal(), remote: ps.remote,
		core: h.core.Unpark(ps.p), used: now, heard: now}
	h.sessions[id] = s
	s.idle = time.AfterFunc(h.opts.SessionIdle, s.expire)
	return s
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// [2025-11-25 transports §Security Warning] Servers MUST validate the
	// Origin header on all incoming connections ... If the Origin header is
	// present and invalid, servers MUST respond with HTTP 403 Forbidden.
	if !transport.AllowedRequest(r, h.opts.AllowedHosts, h.opts.AllowedOrigins) {
		h.log.Warn().Str("host", r.Host).Str("origin", r.Header.Get("Origin")).Msg("forbidden host or origin")
		fail(w, http.StatusForbidden, spec.NewError(spec.CodeInvalidRequest, spec.ReasonForbidden, "host or origin not allowed"))
		return
	}
	id, ok := h.authenticate(w, r)
	if !ok {
		return
	}
	principal := id.Principal
	v := r.Header.Get(HeaderProtocolVersion)
	// [2025-11-25 transports §Protocol Version Header] If the server receives
	// a request with an invalid or unsupported MCP-Protocol-Version, it MUST
	// respond with 400 Bad Request.
	if v != "" && !slices.Contains(Versions, v) && r.Method != http.MethodPost {
		fail(w, http.StatusBadRequest, spec.UnsupportedVersion(v)) // a POST's answer names its request (post)
		return
	}
	if spec.IsModern(v) && r.Method != http.MethodPost {
		// 2026-07-28 has no sessions and no GET stream: POST only.
		w.Header().Set("Allow", "POST")
		fail(w, http.StatusMethodNotAllowed, spec.NewError(spec.CodeInvalidRequest, "",
			"method "+r.Method+" is not part of protocol version "+v+"; send each request as a POST"))
		return
	}
	switch r.Method {
	case http.MethodPost:
		h.post(w, r, id)
	case http.MethodGet:
		h.get(w, r, principal)
	case http.MethodDelete:
		h.delete(w, r, principal)
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		fail(w, http.StatusMethodNotAllowed, spec.NewError(spec.CodeInvalidRequest, "", "method "+r.Method+" not allowed"))
	}
}

// post handles one JSON-RPC message.
func (h *Handler) post(w http.ResponseWriter, r *http.Request, id transport.Identity) {
	principal := id.Principal
	if !strings.EqualFold(mediaType(r.Header.Get("Content-Type")), "application/json") {
		fail(w, http.StatusUnsupportedMediaType, spec.NewError(spec.CodeInvalidRequest, spec.ReasonUnsupportedMediaType,
			"Content-Type must be application/json"))
		return
	}
	acceptJSON, acceptSSE := accepts(r, "application/json"), accepts(r, "text/event-stream")
	if !acceptJSON || !acceptSSE {
		fail(w, http.StatusNotAcceptable, spec.NewError(spec.CodeInvalidRequest, spec.ReasonNotAcceptable,
			"Accept must include application/json and text/event-stream"))
		return
	}
	raw, err := h.readBody(w, r)
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			fail(w, http.StatusRequestEntityTooLarge, spec.NewError(spec.CodeInvalidRequest, spec.ReasonMessageTooLarge,
				(&transport.TooLargeError{Limit: h.opts.MaxMessageBytes}).Error()))
			return
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			h.log.Info().Str("remote", r.RemoteAddr).Stringer("bodyTimeout", h.opts.BodyTimeout).Msg("POST body not received in time; connection closed")
			fail(w, http.StatusRequestTimeout, spec.NewError(spec.CodeInvalidRequest, spec.ReasonRequestTimeout,
				"the request body did not arrive within "+h.opts.BodyTimeout.String()))
			return
		}
		fail(w, http.StatusBadRequest, spec.NewError(spec.CodeParseError, spec.ReasonParseError, "reading the body: "+err.Error()))
		return
	}
	if t := strings.TrimLeft(string(raw[:min(len(raw), 64)]), " \t\r\n"); strings.HasPrefix(t, "[") {
		fail(w, http.StatusBadRequest, spec.NewError(spec.CodeInvalidRequest, spec.ReasonInvalidRequest,
			"JSON-RPC batches are not supported; send one message per POST"))
		return
	}
	m, derr := spec.Decode(raw)
	if derr != nil {
		failID(w, http.StatusBadRequest, derr.ID, derr)
		return
	}
	class := mcp.Classify(m)
	if v := r.Header.Get(HeaderProtocolVersion); spec.IsModern(v) || class.Modern {
		h.postModern(w, r, m, raw, id)
		return
	} else if v != "" && !slices.Contains(Versions, v) {
		failID(w, http.StatusBadRequest, m.ID, spec.UnsupportedVersion(v))
		return
	}

	var s *session
	if class.Opens && r.Header.Get(HeaderSessionID) == "" {
		var refused *spec.Error
		if s, refused = h.newSession(principal, transport.RemoteIP(r)); s == nil {
			failID(w, http.StatusServiceUnavailable, m.ID, refused)
			return
		}
		w.Header().Set(HeaderSessionID, s.id)
	} else if s = h.session(w, r, m.ID, principal); s == nil {
		return
	}

	if m.Kind != spec.KindRequest {
		// [2025-11-25 transports §Sending Messages] If the server accepts
		// the input [a response or notification], the server MUST return
		// HTTP status code 202 Accepted with no body.
		s.core.Handle(m, raw, nil)
		w.WriteHeader(http.StatusAccepted)
		return
	}
	st := s.newStream(w, idKey(m.ID))
	if st == nil {
		failID(w, http.StatusNotFound, m.ID, errUnknownSession)
		return
	}
	st.gate = id.ToolRefusal
	st.traceFrom(r)
	st.keepAliveFrom(r)
	// A call streams from its first flush: the priming event gives the client an
	// event id to reconnect with before anything else reaches it; a quick call's
	// answer comes first, as a JSON body. A resume streams once it is accepted
	// (its errors come as a JSON body, in order with other answers).
	if class.Streams {
		st.startSSELater()
	}
	if class.Resume && r.Header.Get(HeaderLastEventID) != "" {
		// Last-Event-ID on a resume: the client has that request's stream up to it.
		id, seq, ok := parseEventID(r.Header.Get(HeaderLastEventID))
		if !ok || !bytes.Equal(id, m.ID) {
			s.streamDone(st)
			failID(w, http.StatusBadRequest, m.ID, spec.NewError(spec.CodeInvalidRequest, spec.ReasonInvalidEventID,
				"Last-Event-ID does not name an event of the request being resumed"))
			return
		}
		s.core.HandleResume(m, st, seq)
	} else {
		s.core.Handle(m, raw, st)
	}
	if class.Resume {
		st.startSSE()
	}
	st.serve(r)
}

// readBody reads a POST body of at most MaxMessageBytes within BodyTimeout.
// The read deadline is lifted once the body is in: the connection goes on to
// carry the answer's event stream, and the read net/http keeps pending on it
// (to notice the client go away) must not fail at the deadline. (net/http
// lifts it too as it starts that read, at the body's end; TestBodyTimeout
// checks a stream that outlives the deadline.)
func (h *Handler) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if h.opts.BodyTimeout <= 0 {
		return transport.ReadAll(http.MaxBytesReader(w, r.Body, int64(h.opts.MaxMessageBytes)))
	}
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(h.opts.BodyTimeout))
	raw, err := transport.ReadAll(http.MaxBytesReader(w, r.Body, int64(h.opts.MaxMessageBytes)))
	if err == nil {
		_ = rc.SetReadDeadline(time.Time{})
	}
	return raw, err
}

// postModern handles a POST of the 2026-07-28 era: one request, on a session of
// its own that ends with its response stream. Mcp-Session-Id and Last-Event-ID
// are ignored, as the specification says.
func (h *Handler) postModern(w http.ResponseWriter, r *http.Request, m *spec.Message, raw []byte, id transport.Identity) {
	principal := id.Principal
	switch m.Kind {
	case spec.KindResponse:
		failID(w, http.StatusBadRequest, m.ID, spec.NewError(spec.CodeInvalidRequest, spec.ReasonInvalidRequest,
			"a 2026-07-28 client sends no responses: input is given by retrying the request (inputResponses)"))
		return
	case spec.KindNotification:
		w.WriteHeader(http.StatusAccepted) // none is defined over HTTP in this era; accepted and dropped
		return
	}
	if e := h.core.CheckHeaders(m, func(name string) (string, bool) {
		v, ok := r.Header[http.CanonicalHeaderKey(name)]
		if !ok || len(v) == 0 {
			return "", false
		}
		return v[0], true
	}); e != nil {
		failID(w, http.StatusBadRequest, m.ID, e)
		return
	}
	s := h.statelessSession(principal, transport.RemoteIP(r))
	if s == nil {
		failID(w, http.StatusServiceUnavailable, m.ID, spec.ShuttingDown())
		return
	}
	st := s.newStream(w, idKey(m.ID))
	st.modern, st.gate = true, id.ToolRefusal
	st.traceFrom(r)
	st.keepAliveFrom(r)
	s.core.Handle(m, raw, st)
	st.serve(r)
}

// get opens the session's standalone stream, or reconnects a request's stream.
func (h *Handler) get(w http.ResponseWriter, r *http.Request, principal string) {
	if !accepts(r, "text/event-stream") {
		fail(w, http.StatusNotAcceptable, spec.NewError(spec.CodeInvalidRequest, spec.ReasonNotAcceptable,
			"Accept must include text/event-stream"))
		return
	}
	s := h.session(w, r, nil, principal)
	if s == nil {
		return
	}
	last := r.Header.Get(HeaderLastEventID)
	if last == "" {
		st := s.openDefault(w)
		if st == nil {
			fail(w, http.StatusConflict, spec.NewError(spec.CodeInvalidRequest, spec.ReasonStreamConflict,
				"this session already has a GET stream"))
			return
		}
		st.keepAliveFrom(r)
		st.startSSE()
		st.serve(r)
		return
	}
	// [2025-11-25 transports §Resumability] The server MUST NOT replay
	// messages that would have been delivered on a different stream: the
	// event id names its request (the stream), and only that request's
	// messages after it are replayed.
	id, seq, ok := parseEventID(last)
	if !ok {
		fail(w, http.StatusBadRequest, spec.NewError(spec.CodeInvalidRequest, spec.ReasonInvalidEventID,
			"Last-Event-ID is not an event id of this server"))
		return
	}
	st := s.newStream(w, idKey(id))
	if st == nil {
		fail(w, http.StatusNotFound, errUnknownSession)
		return
	}
	st.json, st.prime = false, seq
	st.keepAliveFrom(r)
	// Reconnect writes what is queued before it returns; on an error nothing was
	// written and the request gets the error instead.
	if e := s.core.Reconnect(id, seq, st); e != nil {
		s.streamDone(st)
		switch e.Reason {
		case spec.ReasonInvalidAck: // a number the request never gave out
			fail(w, http.StatusBadRequest, spec.NewError(spec.CodeInvalidRequest, spec.ReasonInvalidEventID,
				"Last-Event-ID names an event this server has not sent"))
			return
		case spec.ReasonRateLimited: // too many ids this session did not deliver
			w.Header().Set("Retry-After", strconv.FormatInt(e.RetryAfter, 10))
			fail(w, http.StatusTooManyRequests, e)
			return
		}
		fail(w, http.StatusGone, e) // unknown, or ended: expired, cancelled, or acknowledged by this very id
		return
	}
	st.startSSE()
	st.serve(r)
}

// delete ends a session at the client's request: its requests are cancelled.
func (h *Handler) delete(w http.ResponseWriter, r *http.Request, principal string) {
	s := h.session(w, r, nil, principal)
	if s == nil {
		return
	}
	h.forget(s)
	s.end(true)
	h.core.Unshare(r.Context(), s.id)
	w.WriteHeader(http.StatusOK)
}

var errUnknownSession = spec.NewError(spec.CodeInvalidRequest, spec.ReasonUnknownSession,
	"unknown or ended session; initialize a new one")

// authenticate returns who the request's credentials name (Options.Auth, or
// the API keys; "" without either). A request they do not admit is answered
// (401, 403, 503) and false.
func (h *Handler) authenticate(w http.ResponseWriter, r *http.Request) (transport.Identity, bool) {
	var auth transport.Authenticator = h.opts.Keys
	if h.opts.Auth != nil {
		auth = h.opts.Auth
	}
	id, ok := auth.Authenticate(w, r)
	if !ok {
		h.log.Warn().Str("remote", r.RemoteAddr).Bool("authorization", r.Header.Get("Authorization") != "").Msg("unauthorized request")
	}
	return id, ok
}

// session returns the session named by the request's header, or answers the
// request with the error and returns nil. A session of another principal is
// answered as an unknown one.
func (h *Handler) session(w http.ResponseWriter, r *http.Request, id spec.ID, principal string) *session {
	sid := r.Header.Get(HeaderSessionID)
	if sid == "" {
		failID(w, http.StatusBadRequest, id, spec.NewError(spec.CodeInvalidRequest, spec.ReasonSessionRequired,
			"missing Mcp-Session-Id header; initialize first"))
		return nil
	}
	h.mu.Lock()
	s, closed := h.sessions[sid], h.closed
	if ps := h.parked[sid]; s == nil && ps != nil && !closed && ps.p.Principal() == principal {
		s = h.unparkLocked(sid, ps)
	}
	h.mu.Unlock()
	if closed { // every session ended with Close: not one the client should re-initialize
		failID(w, http.StatusServiceUnavailable, id, spec.ShuttingDown())
		return nil
	}
	if s == nil {
		s = h.adopt(r, sid, principal)
	}
	if s == nil || s.core.Principal() != principal {
		// [2025-11-25 transports §Session Management] The server MAY
		// terminate the session at any time, after which it MUST respond to
		// requests containing that session ID with HTTP 404 Not Found.
		failID(w, http.StatusNotFound, id, errUnknownSession)
		return nil
	}
	s.touch()
	return s
}

// adopt takes up session sid of principal that another instance of the
// cluster started (mcp.Server.Shared), as a parked one is; nil when there is
// none, or the session bounds are reached (the client then initializes a
// new session, which may end another).
func (h *Handler) adopt(r *http.Request, sid, principal string) *session {
	remote := transport.RemoteIP(r)
	p := h.core.Shared(r.Context(), sid, principal, remote)
	if p == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if s := h.sessions[sid]; s != nil || h.closed { // taken up meanwhile by another request
		return s
	}
	for _, b := range []struct{ n, max int }{
		{len(h.sessions) + len(h.parked), h.opts.MaxSessions},
		{h.byPrincipal[principal], h.opts.MaxSessionsPerPrincipal},
		{h.byAddress[remote], h.opts.MaxSessionsPerAddress},
	} {
		if b.max >= 0 && b.n >= b.max {
			return nil
		}
	}
	h.countLocked(principal, remote, 1)
	h.parked[sid] = &parkedSession{p: p, remote: remote}
	s := h.unparkLocked(sid, h.parked[sid])
	h.log.Debug().Str("session", sid).Msg("took up a session another instance started")
	return s
}

// newSession starts a session for principal; remote is the address of the client
// that initialized it (its requests' limit on failed token checks, and its
// scope in MaxSessionsPerAddress). It returns nil and the error to answer when
// the handler is closed or the session bounds are reached with every session
// in use.
func (h *Handler) newSession(principal, remote string) (*session, *spec.Error) {
	// [2025-11-25 transports §Session Management] The session ID SHOULD be
	// globally unique and cryptographically secure ... MUST only contain
	// visible ASCII characters: a random (version 4) UUID.
	s := &session{h: h, id: uuid.NewString(), streams: make(map[*stream]struct{}), principal: principal, remote: remote}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, spec.ShuttingDown()
	}
	var evicted []*session
	for _, scope := range []struct {
		n, max int
		in     func(principal, remote string) bool
	}{
		{len(h.sessions) + len(h.parked), h.opts.MaxSessions, func(string, string) bool { return true }},
		{h.byPrincipal[principal], h.opts.MaxSessionsPerPrincipal, func(p, _ string) bool { return p == principal }},
		{h.byAddress[remote], h.opts.MaxSessionsPerAddress, func(_, r string) bool { return r == remote }},
	} {
		if scope.max < 0 || scope.n < scope.max {
			continue
		}
		if id, ps := h.parkedVictimLocked(scope.in); ps != nil {
			h.forgetParkedLocked(id, ps)
			continue
		}
		v := h.victimLocked(scope.in)
		if v == nil {
			h.mu.Unlock()
			for _, e := range evicted {
				e.end(false)
			}
			h.log.Warn().Str("principal", principal).Str("remote", remote).Msg("initialize refused: too many sessions, all in use")
			return nil, spec.NewError(spec.CodeInternalError, spec.ReasonTooManySessions, "too many sessions, all in use; try again later")
		}
		h.forgetLocked(v)
		evicted = append(evicted, v)
	}
	s.core = h.core.NewSession(&mcp.SessionOptions{Principal: principal, Remote: remote, Transport: mcp.TransportHTTP, ID: s.id})
	h.sessions[s.id] = s
	h.countLocked(principal, remote, 1)
	s.used = time.Now()
	s.heard = s.used
	s.idle = time.AfterFunc(h.opts.SessionIdle, s.expire)
	h.mu.Unlock()
	for _, e := range evicted {
		e.h.log.Debug().Str("session", e.id).Msg("session ended to make room for a new one")
		e.end(false)
	}
	return s, nil
}

// victimLocked is the session in scope to end for a new one: the one with no
// open stream that was used least recently (a client that was cut off, not
// one between two of its requests); nil when every one has a stream. h.mu is
// held; it scans every session, which happens only at a bound.
func (h *Handler) victimLocked(in func(principal, remote string) bool) *session {
	var victim *session
	var at time.Time
	for _, o := range h.sessions {
		if !in(o.principal, o.remote) {
			continue
		}
		used, streaming := o.lastUsed()
		if streaming {
			continue
		}
		if victim == nil || used.Before(at) {
			victim, at = o, used
		}
	}
	return victim
}

// parkedVictimLocked is the parked session in scope used least recently (a
// parked session goes before any live one); nil when none is parked.
func (h *Handler) parkedVictimLocked(in func(principal, remote string) bool) (string, *parkedSession) {
	var vid string
	var victim *parkedSession
	for id, ps := range h.parked {
		if in(ps.p.Principal(), ps.remote) && (victim == nil || ps.used.Before(victim.used)) {
			vid, victim = id, ps
		}
	}
	return vid, victim
}

// forget removes s from the handler's tables, if it is still there.
func (h *Handler) forget(s *session) {
	h.mu.Lock()
	h.forgetLocked(s)
	h.mu.Unlock()
}

func (h *Handler) forgetLocked(s *session) {
	if h.sessions[s.id] != s {
		return
	}
	delete(h.sessions, s.id)
	h.countLocked(s.principal, s.remote, -1)
}

// statelessSession returns a session for one 2026-era request: in no table, it
// ends with the request's stream. nil when the handler is closed.
func (h *Handler) statelessSession(principal, remote string) *session {
	h.mu.Lock()
	closed := h.closed
	h.mu.Unlock()
	if closed {
		return nil
	}
	return &session{h: h, stateless: true, streams: make(map[*stream]struct{}, 1),
		core: h.core.NewSession(&mcp.SessionOptions{Principal: principal, Remote: remote, Transport: mcp.TransportHTTP, Stateless: true})}
}

// accepts reports whether the request's Accept header admits media type mt. No
// Accept header admits everything.
func accepts(r *http.Request, mt string) bool {
	vals := r.Header.Values("Accept")
	if len(vals) == 0 {
		return true
	}
	major := mt[:strings.IndexByte(mt, '/')]
	for _, v := range vals {
		for part := range strings.SplitSeq(v, ",") {
			t := mediaType(part)
			if strings.EqualFold(t, mt) || t == "*/*" || (len(t) == len(major)+2 && strings.EqualFold(t[:len(major)], major) && t[len(major):] == "/*") {
				return true
			}
		}
	}
	return false
}

// mediaType returns the media type of a Content-Type or Accept element: what comes
// before its parameters, without spaces around it. (mime.ParseMediaType also
// validates and lowercases, at the price of allocations on every request; a type
// that is not valid simply matches nothing.)
func mediaType(s string) string {
	if i := strings.IndexByte(s, ';'); i >= 0 {
		s = s[:i]
	}
	return strings.TrimSpace(s)
}

// fail answers an HTTP request with status and a JSON-RPC error without an id.
func fail(w http.ResponseWriter, status int, e *spec.Error) { failID(w, status, nil, e) }

func failID(w http.ResponseWriter, status int, id spec.ID, e *spec.Error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(spec.EncodeError(id, e))
}
