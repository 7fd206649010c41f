package ws

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/rs/zerolog"

	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/spec"
	"github.com/mcp-resume/mcp-resume/transport"
)

// AcceptOptions configure Accept and a Handler. The zero value of each field means
// its default.
type AcceptOptions struct {
	Options
	// AllowedHosts lists the accepted Host header values: a host name or IP,
	// matched on any port, or "*" for any. Default: localhost, 127.0.0.1 and ::1.
	AllowedHosts []string
	// AllowedOrigins lists the accepted Origin header values
	// ("https://app.example") or "*" for any. A handshake without Origin (not from
	// a browser) passes. Default: http and https origins on loopback names, on any
	// port.
	AllowedOrigins []string
	// Keys, when set, requires the handshake to carry one of its API keys
	// ("Authorization: Bearer <key>"); others get 401 unauthorized. The
	// connection's resumable requests are bound to the key's principal
	// (Conn.Principal). Nil: no authentication.
	Keys *transport.KeySet
	// Auth, when set, authenticates the handshake instead of Keys (an
	// oauth.ResourceServer). The connection is closed (1008, policy
	// violation) when its credentials expire or are revoked (Identity.Expiry,
	// Identity.Renew): the client connects again with fresh ones, and resumes
	// its requests there; a
	// tools/call its credentials do not allow is answered with the refusal's
	// JSON-RPC error.
	Auth transport.Authenticator
	// InitTimeout bounds the time from the upgrade to the client's first
	// message that opens a session: an initialize request, or a request of the
	// 2026-07-28 era (which needs none). A connection that has sent none by
	// then is closed with 1008 (policy violation), so that connections that
	// never initialize cannot pile up. Default 10s; negative: no bound.
	InitTimeout time.Duration
	// Logger receives the transport's logs. Nil means none.
	Logger *zerolog.Logger
}

func (o *AcceptOptions) withDefaults() AcceptOptions {
	var v AcceptOptions
	if o != nil {
		v = *o
	}
	v.Options = v.Options.withDefaults()
	if len(v.AllowedHosts) == 0 {
		v.AllowedHosts = transport.LoopbackHosts
	}
	if v.InitTimeout == 0 {
		v.InitTimeout = 10 * time.Second
	}
	if v.Logger == nil {
		nop := zerolog.Nop()
		v.Logger = &nop
	}
	return v
}

// Accept checks a WebSocket handshake and upgrades it. A handshake that is not
// allowed is answered over HTTP with a JSON-RPC error, and Accept returns an
// error: 403 forbidden (Host or Origin), 401 unauthorized (no known API key, with
// Keys set), 400 subprotocol_required (no "mcp" among
// the offered subprotocols), 426 invalid_request (not a WebSocket handshake).
func Accept(w http.ResponseWriter, r *http.Request, opts *AcceptOptions) (*Conn, error) {
	o := opts.withDefaults()
	return accept(w, r, &o)
}

func accept(w http.ResponseWriter, r *http.Request, o *AcceptOptions) (*Conn, error) {
	if !transport.AllowedRequest(r, o.AllowedHosts, o.AllowedOrigins) {
		fail(w, http.StatusForbidden, spec.NewError(spec.CodeInvalidRequest, spec.ReasonForbidden, "host or origin not allowed"))
		return nil, errors.New("ws: host or origin not allowed")
	}
	var auth transport.Authenticator = o.Keys
	if o.Auth != nil {
		auth = o.Auth
	}
	id, ok := auth.Authenticate(w, r)
	if !ok {
		return nil, errors.New("ws: the handshake's credentials were refused")
	}
	if !headerHas(r.Header, "Connection", "upgrade") || !headerHas(r.Header, "Upgrade", "websocket") {
		w.Header().Set("Upgrade", "websocket")
		w.Header().Set("Sec-WebSocket-Protocol", Subprotocol)
		fail(w, http.StatusUpgradeRequired, spec.NewError(spec.CodeInvalidRequest, spec.ReasonInvalidRequest,
			"this endpoint speaks MCP over WebSocket (subprotocol \"mcp\"); send a WebSocket handshake"))
		return nil, errors.New("ws: not a WebSocket handshake")
	}
	if !headerHas(r.Header, "Sec-WebSocket-Protocol", Subprotocol) {
		w.Header().Set("Sec-WebSocket-Protocol", Subprotocol)
		fail(w, http.StatusBadRequest, spec.NewError(spec.CodeInvalidRequest, spec.ReasonSubprotocolRequired,
			"the WebSocket subprotocol \"mcp\" is required"))
		return nil, errors.New("ws: the client did not offer subprotocol mcp")
	}
	hw := &hijackWriter{ResponseWriter: w}
	c, err := websocket.Accept(hw, r, &websocket.AcceptOptions{
		Subprotocols:       []string{Subprotocol},
		InsecureSkipVerify: true, // Origin was checked above, by our policy
		CompressionMode:    websocket.CompressionDisabled,
	})
	if err != nil {
		return nil, err
	}
	// Deadlines the HTTP server set for the handshake must not cut the connection.
	_ = hw.conn.SetDeadline(time.Time{})
	conn := newConn(c, hw.conn, o.Options, o.InitTimeout)
	conn.id = id
	return conn, nil
}

// hijackWriter keeps the connection the library hijacks, so that Close can drop
// it at once when the close handshake does not finish in time.
type hijackWriter struct {
	http.ResponseWriter
	conn *rawConn
}

func (h *hijackWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := http.NewResponseController(h.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	h.conn = newRawConn(c)
	return h.conn, brw, nil
}

// Handler serves MCP over WebSocket: each accepted connection is served by the
// core until it closes. Mount it at one path (conventionally /ws). It is safe for
// concurrent use.
type Handler struct {
	core *mcp.Server
	opts AcceptOptions
	log  zerolog.Logger
	ctx  context.Context // ends at Close
	stop context.CancelFunc

	mu     sync.Mutex // guards conns and closed
	conns  map[*Conn]struct{}
	closed bool
	wg     sync.WaitGroup // connections being served

	initTimeouts atomic.Uint64 // connections closed for sending no initialize in time
}

var _ http.Handler = (*Handler)(nil)

// NewHandler returns a Handler serving core.
func NewHandler(core *mcp.Server, opts *AcceptOptions) *Handler {
	o := opts.withDefaults()
	ctx, stop := context.WithCancel(context.Background())
	return &Handler{core: core, opts: o, log: *o.Logger, ctx: ctx, stop: stop, conns: make(map[*Conn]struct{})}
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	closed := h.closed
	if !closed {
		h.wg.Add(1)
	}
	h.mu.Unlock()
	if closed {
		fail(w, http.StatusServiceUnavailable, spec.ShuttingDown())
		return
	}
	defer h.wg.Done()
	c, err := accept(w, r, &h.opts)
	if err != nil {
		h.log.Warn().Err(err).Str("origin", r.Header.Get("Origin")).Str("remote", r.RemoteAddr).Msg("WebSocket handshake refused")
		return
	}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		c.closeWith(websocket.StatusGoingAway, "server shutting down")
		return
	}
	h.conns[c] = struct{}{}
	h.mu.Unlock()
	h.log.Debug().Str("remote", r.RemoteAddr).Msg("WebSocket connected")
	// The connection lives as long as the credentials that opened it: their
	// expiry, or as long as their authority says they are still valid.
	defer transport.Expire(c.id, func() { c.closeWith(websocket.StatusPolicyViolation, "credentials expired or revoked") })()
	so := &mcp.SessionOptions{Principal: c.id.Principal, Remote: transport.RemoteIP(r), Transport: mcp.TransportWebSocket,
		ToolRefusal: c.id.ToolRefusal}
	err = h.core.ServeWith(h.ctx, c, so)
	h.mu.Lock()
	delete(h.conns, c)
	h.mu.Unlock()
	if c.noInit.Load() {
		h.initTimeouts.Add(1)
		h.log.Debug().Str("remote", r.RemoteAddr).Stringer("initTimeout", h.opts.InitTimeout).Msg("WebSocket closed: no initialize in time")
		return
	}
	ev := h.log.Debug()
	if err != nil {
		ev = h.log.Info().Err(err)
	}
	ev.Str("remote", r.RemoteAddr).Msg("WebSocket disconnected")
}

// InitTimeouts returns the number of connections closed so far for opening
// no session within AcceptOptions.InitTimeout.
func (h *Handler) InitTimeouts() uint64 { return h.initTimeouts.Load() }

// Conns returns the number of connections being served.
func (h *Handler) Conns() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.conns)
}

// Close closes every connection with 1001 (going away) and waits until they are
// no longer served; their resumable requests stay resumable (by the next process,
// with a durable store). Handshakes arriving later get 503. Hijacked connections
// are not tracked by http.Server, so call Close besides http.Server.Shutdown.
func (h *Handler) Close() {
	h.mu.Lock()
	h.closed = true
	all := make([]*Conn, 0, len(h.conns))
	for c := range h.conns {
		all = append(all, c)
	}
	h.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range all {
		wg.Go(func() { c.closeWith(websocket.StatusGoingAway, "server shutting down") })
	}
	wg.Wait()
	h.stop()
	h.wg.Wait()
}

// headerHas reports whether a comma-separated header lists token (case-insensitive).
func headerHas(h http.Header, key, token string) bool {
	for _, v := range h.Values(key) {
		for part := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(part), token) {
				return true
			}
		}
	}
	return false
}

// fail answers a refused handshake with status and a JSON-RPC error without an id.
func fail(w http.ResponseWriter, status int, e *spec.Error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(spec.EncodeError(nil, e))
}
