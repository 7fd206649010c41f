package client

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-resume/mcp-resume/internal/invariant"
	"github.com/mcp-resume/mcp-resume/spec"
	"github.com/mcp-resume/mcp-resume/transport"
)

// Dialer opens a new connection to the server. The Client calls it once in
// Connect and again after every connection loss; each connection is a fresh MCP
// session (initialize again), so a Dialer for stdio starts the command again.
type Dialer func(ctx context.Context) (transport.Conn, error)

// Options configure a Client. Nil means defaults.
type Options struct {
	// ClientInfo is sent in initialize. Default {Name: "mcp-resume", Version: "dev"}.
	ClientInfo mcpgo.Implementation
	// ProtocolVersion is the protocol version the client asks for. Default
	// 2025-06-18, asked for in initialize. A version of the 2026-07-28 era
	// (spec.Version2026) makes the client stateless where the server speaks
	// that era: Connect asks server/discover instead of initializing, every
	// request carries its envelope in params._meta (and over Streamable HTTP
	// the headers that mirror it), and a server's questions come as
	// input_required results, answered by Sampling and Elicitation and sent
	// again (multi round-trip requests). A server that answers -32022 with
	// the versions it speaks gets the newest of them the client speaks; a
	// server of the 2025 era (it knows no server/discover) gets initialize
	// with 2025-11-25.
	ProtocolVersion string

	// Sampling answers sampling/createMessage; nil declines the capability (such
	// requests get -32601). Elicitation answers elicitation/create likewise. Each
	// server request id is answered once: a request sent again after a resume gets
	// the same answer without a second call of the handler. Handlers run on their
	// own goroutines with a context that Close ends.
	Sampling    func(ctx context.Context, req mcpgo.CreateMessageRequest) (*mcpgo.CreateMessageResult, error)
	Elicitation func(ctx context.Context, req mcpgo.ElicitationRequest) (*mcpgo.ElicitationResult, error)

	// OnRequest answers the server's requests that no call's own
	// CallOptions.OnRequest answers (Call says which call a request belongs
	// to), with their params and result as they are on the wire:
	// sampling/createMessage, elicitation/create, roots/list or any other.
	// Nil: Sampling and Elicitation answer theirs, roots/list is answered
	// with no roots, any other method with -32601. It runs on a goroutine of
	// its own, with a context that Close ends; each server request id is
	// answered once, as for Sampling.
	OnRequest func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error)
	// Capabilities are client capabilities declared beside the client's own
	// (SEP-975, and sampling and elicitation for their handlers): roots, or
	// elicitation's modes, for a client whose OnRequest answers them.
	Capabilities map[string]any

	// OnLog receives notifications/message that no call's own
	// CallOptions.OnLog receives. A log message that belongs to a resumable
	// request and is sent again after a resume is delivered once.
	OnLog func(mcpgo.LoggingMessageNotificationParams)
	// OnNotification receives every other notification the client does not handle
	// itself (progress of no call of this client, list changes, ...).
	OnNotification func(method string, params json.RawMessage)

	// NoAckExtension leaves the ack extension out of what initialize declares:
	// the client acknowledges only when it resumes, as clients that do not know
	// the extension up front do (the server's replay window keeps such clients
	// exact). For tests of that path and peers that must not declare it.
	NoAckExtension bool
	// NoResumable declares no resumableRequests at all: for a Dialer whose
	// every connection is a new server that keeps nothing of the last one's
	// (a stdio child without a store), where a resumable request costs the
	// server and can never be resumed. Call keys are still sent to a server
	// that takes them.
	NoResumable bool
	// Discover, with a ProtocolVersion of the 2025 era, asks each
	// connection's server/discover, once it is initialized, whether the
	// server speaks the 2026-07-28 era too (Modern): a request with
	// CallOptions.Envelope then goes in that era, while the session carries
	// the rest (list changes, subscriptions, the server's requests of no
	// call).
	Discover bool
	// KeepConnected makes the client connect again after every loss, whether
	// or not a call waits for a connection: for a client that listens to its
	// server (list changes, resource updates), as a gateway does.
	KeepConnected bool
	// OnReconnected is told of each connection made after the first, once
	// the calls that waited for it were resumed on it. It runs on the
	// client's own goroutine: it must not block (a client that lists again
	// does so on a goroutine of its own).
	OnReconnected func()

	// OnConnectionLost is told why each connection ended (as its transport said:
	// a *httptransport.SilenceError when it carried nothing for too long), before
	// the client reconnects. It runs on the client's own goroutine.
	OnConnectionLost func(err error)
	// OnReconnecting is told of each attempt to connect again after a loss, just
	// before it dials: attempt counts from 1 since the loss, and err is why the
	// attempt before failed (nil for the first). It runs on the client's own
	// goroutine.
	OnReconnecting func(attempt int, err error)

	// MinBackoff and MaxBackoff bound the wait between reconnection attempts (with
	// jitter, doubling from MinBackoff). A resumable request's minWait is waited at
	// least. Defaults 100ms and 5s.
	MinBackoff, MaxBackoff time.Duration
	// MaxWait is how long a resumable request is tried when its policy named no
	// maxWait. Default 10 minutes.
	MaxWait time.Duration
	// ReconnectTimeout is how long a call waits for a connection when it has none to
	// be sent on, and bounds each dial and initialize. Default 30s.
	ReconnectTimeout time.Duration
	// StreamIdle bounds how long a request's event stream that was taken up
	// again with Last-Event-ID (on a connection that reports the loss of one
	// request's stream: httptransport's ReportStreamLoss) may carry nothing
	// before it is closed and taken up again, which also replays what a
	// server stored but did not send. Default 30s.
	StreamIdle time.Duration

	// TracerProvider, when not nil, traces the client's calls: each is a
	// CLIENT span named and attributed as the OpenTelemetry semantic
	// conventions for MCP say ("tools/call countdown"), a child of the span
	// the call's context carries, whose W3C trace context goes to the server
	// in params._meta (traceparent, tracestate: SEP-414), and again in every
	// requests/resume of the call. Nil: no span, nothing sent for one.
	TracerProvider trace.TracerProvider
	// SpanAttributes are added to every span the client makes (the gateway
	// of several upstreams names the upstream).
	SpanAttributes []attribute.KeyValue
	// PassTraceContext, without a TracerProvider, sends the W3C trace
	// context of the span a request's ctx carries, if any, in its _meta as it
	// is (a gateway that passes its server's span of a client's request on to
	// its upstream). Without it an untraced client sends none.
	PassTraceContext bool
	// Transport names the transport the Dialer's connections use, for the
	// spans' and the Operations' network.transport: "stdio", "http" or
	// "websocket"; "" when it is not known.
	Transport string
	// OnOperation, when set, is told of every request the client sent (each
	// call, each connection's initialize) once it is over, as the semantic
	// conventions' mcp.client.operation.duration measures it: a call that was
	// resumed is one Operation of its whole life. It runs on the goroutine
	// that made the call (Connect's, or the client's own for a reconnect's
	// initialize): it must not block. Nil: nothing is measured.
	OnOperation func(Operation)
}

func (o *Options) withDefaults() Options {
	var r Options
	if o != nil {
		r = *o
	}
	if r.ClientInfo.Name == "" {
		r.ClientInfo = mcpgo.Implementation{Name: "mcp-resume", Version: "dev"}
	}
	if r.ProtocolVersion == "" {
		r.ProtocolVersion = "2025-06-18"
	}
	if r.MinBackoff <= 0 {
		r.MinBackoff = 100 * time.Millisecond
	}
	if r.MaxBackoff < r.MinBackoff {
		r.MaxBackoff = max(5*time.Second, r.MinBackoff)
	}
	if r.MaxWait <= 0 {
		r.MaxWait = 10 * time.Minute
	}
	if r.ReconnectTimeout <= 0 {
		r.ReconnectTimeout = 30 * time.Second
	}
	if r.StreamIdle <= 0 {
		r.StreamIdle = 30 * time.Second
	}
	return r
}

// Client is an MCP client whose calls survive connection loss. It is safe for
// concurrent use: calls run at once from any goroutines. Close fails the calls
// in flight with ErrClosed and waits for the client's goroutines, which run
// its callbacks (the request handlers, OnLog, OnNotification and the
// connection's On* functions, a Call's own): a callback that calls Close
// never returns.
type Client struct {
	dial   Dialer
	opts   Options
	prefix string        // of every id this client sends, unique per Client
	nextID atomic.Uint64 // for ids
	nextOp atomic.Uint64 // for the keys of the server requests of a Call with handlers

	ctx    context.Context // ended by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // the loop, link readers, server request handlers

	reconnects atomic.Int64
	obs        *observer // nil: requests are neither traced nor measured
	era        era       // set by Connect's negotiation, then only read
	// modernBase is the envelope of a request of the 2026-07-28 era on a
	// client of the 2025 era (Options.Discover, CallOptions.Envelope): the
	// era's version, the client's capabilities and info.
	modernBase map[string]json.RawMessage
	// envs are the envelopes envelopeOf made, by what they were made of:
	// requests that carry the same (a gateway's calls carry their clients'
	// capabilities) share one, which nothing changes once made.
	envs envelopes

	// modern: the server of the current link speaks the 2026-07-28 era (the
	// client's era, or what Options.Discover learned of it).
	modern atomic.Bool

	demand chan struct{} // a call waits for a connection (capacity 1)

	st invariant.Guarded[state, *state] // with the calls it holds (state.go)
	// quiet is signalled (under st's lock) when a call's progress callbacks under
	// way drop to none (call.callbacks).
	quiet *sync.Cond
}

// Connect dials, initializes and returns a Client. The first connection is not
// retried: an error here is the dialer's or the server's answer to initialize.
func Connect(ctx context.Context, dial Dialer, opts *Options) (*Client, error) {
	var p [6]byte
	_, _ = crand.Read(p[:])
	c := &Client{
		dial: dial, opts: opts.withDefaults(),
		prefix: "c-" + hex.EncodeToString(p[:]) + "-",
		demand: make(chan struct{}, 1),
	}
	c.update(func(st *state) { *st = newState() })
	c.quiet = sync.NewCond(c.st.Locker())
	c.obs = newObserver(&c.opts)
	c.modernBase = c.modernEnvelope(spec.Version2026)
	c.ctx, c.cancel = context.WithCancel(context.Background())
	l, err := c.connect(ctx, c.negotiate)
	if err != nil {
		c.cancel()
		return nil, err
	}
	c.install(l)
	c.wg.Add(1)
	go c.loop(l)
	return c, nil
}

// InitializeResult returns the server's answer to the latest initialize; in
// the 2026-07-28 era, what the latest server/discover said, in that form
// (the protocol version in use, the server's capabilities, info and
// instructions).
func (c *Client) InitializeResult() (init *mcpgo.InitializeResult) {
	c.update(func(st *state) { init = st.server.init })
	return init
}

// Resumable returns the server's resumableRequests advertisement (maxWait,
// minWait, extensions), or nil when the server did not advertise one. A server may
// make requests resumable without advertising: the client resumes whatever got a
// policy.
func (c *Client) Resumable() (caps *spec.ServerCapability) {
	c.update(func(st *state) { caps = st.server.caps })
	return caps
}

// Reconnects returns how many connections the client opened after the first.
func (c *Client) Reconnects() int64 { return c.reconnects.Load() }

// Close fails every call in flight with ErrClosed, drops the connection without
// cancelling resumable requests on the server (they stay resumable until their
// maxWait), and waits for the client's goroutines, including running sampling and
// elicitation handlers (their context is cancelled). A callback of the client's
// (a handler, a progress or log callback) runs on one of those goroutines: it
// must not call Close, which would wait for it; it may start it on a goroutine
// of its own (go c.Close()).
func (c *Client) Close() error {
	var l *link
	already := false
	c.update(func(st *state) {
		if already = st.closed; already {
			return
		}
		st.closed = true
		for _, cl := range st.reg.calls {
			cl.finish(nil, ErrClosed)
		}
		l = st.conn.link
	})
	if already {
		return nil
	}
	c.cancel()
	if l != nil {
		_ = l.conn.Close()
	}
	c.wg.Wait()
	return nil
}

// extensions returns the resumableRequests extensions initialize declares.
func (c *Client) extensions() []string {
	if c.opts.NoAckExtension {
		return nil
	}
	return []string{spec.ExtensionAck}
}

// initialize performs the handshake on l, in the client's era, and records
// the server's answer: a CLIENT span of its own when the client traces (below
// the span ctx carries: Connect's caller's for the first connection, none for
// a reconnect's), an Operation when it measures. Then it opens the
// connection's stream for what belongs to no request, where it has one.
func (c *Client) initialize(ctx context.Context, l *link) error {
	caps := c.capabilities()
	if !c.opts.NoResumable {
		caps[spec.CapabilityName] = spec.ClientCapability{Extensions: c.extensions()}
	}
	cl := c.newCall(spec.MethodInitialize, nil)
	cl.internal = true
	c.obs.start(ctx, cl, "", c.era.version)
	fields := map[string]any{
		"protocolVersion": c.era.version,
		"capabilities":    caps,
		"clientInfo":      c.opts.ClientInfo,
	}
	if cl.traceparent != "" {
		meta := map[string]string{"traceparent": cl.traceparent}
		if cl.tracestate != "" {
			meta["tracestate"] = cl.tracestate
		}
		fields["_meta"] = meta
	}
	params, _ := json.Marshal(fields)
	var res *mcpgo.InitializeResult
	raw, err := c.exchange(ctx, l, cl, params)
	if err == nil {
		res = new(mcpgo.InitializeResult)
		if uerr := json.Unmarshal(raw, res); uerr != nil {
			err = &ProtocolError{Problem: "initialize result: " + uerr.Error(), Raw: raw}
		} else {
			spanVersion(cl, res.ProtocolVersion)
		}
	}
	c.obs.end(cl, nil, err)
	if err != nil {
		return err
	}
	if err := l.conn.Write(ctx, spec.EncodeRequest(nil, "notifications/initialized", nil)); err != nil {
		return fmt.Errorf("client: initialized: %w", err)
	}
	c.update(func(st *state) { st.server.init, st.server.caps = res, advertisement(res) })
	if ls, ok := l.conn.(listener); ok {
		// [2025-11-25 transports §Listening for Messages from the Server]
		// "The client MAY issue an HTTP GET to the MCP endpoint": a server
		// that offers none refuses it, which changes nothing.
		_ = ls.Listen(ctx)
	}
	if c.opts.Discover {
		l.modern = c.speaksModern(ctx, l)
	}
	return nil
}

// capabilities are the client capabilities every connection declares
// besides SEP-975: Options.Capabilities, and sampling and elicitation for
// the handlers the client has.
func (c *Client) capabilities() map[string]any {
	caps := make(map[string]any, len(c.opts.Capabilities)+3)
	maps.Copy(caps, c.opts.Capabilities)
	if _, ok := caps["sampling"]; !ok && c.opts.Sampling != nil {
		caps["sampling"] = map[string]any{}
	}
	if _, ok := caps["elicitation"]; !ok && c.opts.Elicitation != nil {
		caps["elicitation"] = map[string]any{}
	}
	return caps
}

// exchange sends cl, a request of the client's own to open l (initialize,
// server/discover) with params, on l and returns the server's answer; cl is
// in flight meanwhile.
func (c *Client) exchange(ctx context.Context, l *link, cl *call, params json.RawMessage) (json.RawMessage, error) {
	cl.done = make(chan struct{})
	var added bool
	c.update(func(st *state) {
		if added = st.add(cl); added {
			cl.sent, cl.link = true, l
		}
	})
	if !added {
		return nil, ErrClosed
	}
	defer c.forget(cl)
	if err := l.conn.Write(ctx, spec.EncodeRequest(cl.id, cl.method, params)); err != nil {
		return nil, fmt.Errorf("client: %s: %w (not sent): %w", cl.method, errNoAnswer, err)
	}
	select {
	case <-cl.done:
		if cl.err != nil {
			return nil, fmt.Errorf("client: %s: %w", cl.method, cl.err)
		}
		return cl.result, nil
	case <-l.done:
		return nil, fmt.Errorf("client: %s: %w (the connection ended first): %w", cl.method, errNoAnswer, l.err)
	case <-ctx.Done():
		return nil, fmt.Errorf("client: %s: %w", cl.method, context.Cause(ctx))
	}
}

// advertisement reads the server's experimental.resumableRequests.
func advertisement(res *mcpgo.InitializeResult) *spec.ServerCapability {
	v, ok := res.Capabilities.Experimental[spec.CapabilityName]
	if !ok {
		return nil
	}
	return decodeCapability(v)
}
