package client

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-resume/mcp-resume/internal/backoff"
	"github.com/mcp-resume/mcp-resume/internal/mcptrace"
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

	// modern: the server of the current link speaks the 2026-07-28 era (the
	// client's era, or what Options.Discover learned of it).
	modern atomic.Bool

	mu     sync.Mutex    // guards the fields below
	closed bool          //
	link   *link         // the current connection, nil while there is none
	ready  chan struct{} // closed while link is set; replaced when it is lost
	demand chan struct{} // a call waits for a connection (capacity 1)
	calls  map[string]*call
	// ops are the Calls in flight with handlers of their own, which the
	// server's messages of no known request may belong to (owner); tokens
	// are the progress tokens of Calls that follow their task, by the key
	// of the request whose id the token is.
	ops    map[*operation]struct{}
	tokens map[string]*operation
	served *answers // server-to-client requests seen, by id
	logs   *recent  // sequenced log messages delivered
	// streams receive the events of the tasks streamed (StreamTask), by task id.
	streams map[string]*taskStream
	init    *mcpgo.InitializeResult // initialize's answer, or server/discover's in its form
	caps    *spec.ServerCapability
	tools   tools // as ListTools listed them last
	headers bool  // the latest link carries HTTP headers (a headerWriter)
	lastErr error // why the last connection attempt failed
	// quiet is signalled (under mu) when a call's progress callbacks under
	// way drop to none (call.callbacks).
	quiet *sync.Cond
}

// link is one connection with its reader.
type link struct {
	conn transport.Conn
	done chan struct{} // closed when the reader returned
	err  error         // why the reader returned; read after done

	since time.Time // when it was installed; guarded by Client.mu
	// heard: a progress notification or a response of one of the client's calls
	// arrived on it, so the server is there (with a kept Streamable HTTP
	// session, initialize is answered without it); guarded by Client.mu.
	heard bool
	// modern: its server speaks the 2026-07-28 era (Options.Discover); set
	// before it is installed.
	modern bool
}

// liveLink is how long a link must have lived for its end to count as the start
// of its requests' maxWait: the server held their streams, and detached them
// only now. A link that dies sooner (a server that drops every resume) does not
// extend the wait.
const liveLink = time.Second

// Connect dials, initializes and returns a Client. The first connection is not
// retried: an error here is the dialer's or the server's answer to initialize.
func Connect(ctx context.Context, dial Dialer, opts *Options) (*Client, error) {
	var p [6]byte
	_, _ = crand.Read(p[:])
	c := &Client{
		dial: dial, opts: opts.withDefaults(),
		prefix: "c-" + hex.EncodeToString(p[:]) + "-",
		ready:  make(chan struct{}), demand: make(chan struct{}, 1),
		calls: map[string]*call{}, ops: map[*operation]struct{}{}, tokens: map[string]*operation{},
		served: newAnswers(4096), logs: newRecent(4096),
	}
	c.quiet = sync.NewCond(&c.mu)
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
func (c *Client) InitializeResult() *mcpgo.InitializeResult {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.init
}

// Resumable returns the server's resumableRequests advertisement (maxWait,
// minWait, extensions), or nil when the server did not advertise one. A server may
// make requests resumable without advertising: the client resumes whatever got a
// policy.
func (c *Client) Resumable() *spec.ServerCapability {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.caps
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
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	for _, cl := range c.calls {
		c.finishLocked(cl, nil, ErrClosed)
	}
	l := c.link
	c.mu.Unlock()
	c.cancel()
	if l != nil {
		_ = l.conn.Close()
	}
	c.wg.Wait()
	return nil
}

// connect dials a new link and opens it with open (negotiate for the first,
// reopen for the others); the link's reader runs already.
func (c *Client) connect(ctx context.Context, open func(context.Context, *link) error) (*link, error) {
	ctx, cancel := context.WithTimeout(ctx, c.opts.ReconnectTimeout)
	defer cancel()
	conn, err := c.dial(ctx)
	if err != nil {
		return nil, fmt.Errorf("client: dial: %w", err)
	}
	l := &link{conn: conn, done: make(chan struct{})}
	c.wg.Add(1)
	go c.read(l)
	if err := open(ctx, l); err != nil {
		_ = conn.Close()
		<-l.done
		return nil, err
	}
	return l, nil
}

// reopen opens a link after the first in the era Connect negotiated:
// initialize again, or server/discover (which tells the server is there).
func (c *Client) reopen(ctx context.Context, l *link) error {
	if !c.era.modern {
		return c.initialize(ctx, l)
	}
	res, err := c.discover(ctx, l)
	if err != nil {
		return err
	}
	if !slices.Contains(res.SupportedVersions, c.era.version) {
		return fmt.Errorf("client: the server no longer speaks %s: it speaks %v", c.era.version, res.SupportedVersions)
	}
	c.discovered(c.era.version, res)
	return nil
}

// listener is a connection whose server may send what belongs to no request
// of the client's on a stream of its own (Streamable HTTP's GET stream of a
// 2025 session: questions a tool asks outside any request's stream, list
// changes).
type listener interface {
	Listen(ctx context.Context) error
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
	c.mu.Lock()
	c.calls[cl.key] = cl
	cl.sent, cl.link = true, l
	c.mu.Unlock()
	defer c.forget(cl)
	var res *mcpgo.InitializeResult
	raw, err := exchange(ctx, l, cl, params)
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
	c.mu.Lock()
	c.init = res
	c.caps = advertisement(res)
	c.mu.Unlock()
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
// server/discover) with params, on l and returns the server's answer.
func exchange(ctx context.Context, l *link, cl *call, params json.RawMessage) (json.RawMessage, error) {
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

// install makes l the current link and resumes every resumable call waiting for
// one, with its original id, its token and the last sequence number it holds.
func (c *Client) install(l *link) {
	c.mu.Lock()
	c.link = l
	_, c.headers = l.conn.(headerWriter)
	c.modern.Store(c.era.modern || l.modern)
	l.since = time.Now()
	close(c.ready)
	select {
	case <-c.demand:
	default:
	}
	var msgs [][]byte
	var resumed []func()
	for _, cl := range c.calls {
		if cl.finished || !cl.sent || cl.link != nil || cl.policy == nil {
			continue
		}
		cl.link, cl.resuming, cl.unconfirmed = l, true, true
		cl.retries = 0
		msgs = append(msgs, c.resumeLocked(cl))
		if cl.span != nil {
			cl.span.AddEvent(mcptrace.EventResumeSent, trace.WithAttributes(mcptrace.Ack.Int64(int64(cl.lastSeq))))
		}
		if cl.opts.Resumed != nil {
			resumed = append(resumed, cl.opts.Resumed)
		}
	}
	msgs = append(msgs, c.served.unsentLocked()...)
	c.mu.Unlock()
	// Before the resumes go out, so before anything the server kept for them.
	for _, f := range resumed {
		f()
	}
	for _, m := range msgs {
		if !c.write(l, m) {
			return
		}
	}
}

// resumeLocked returns cl's requests/resume: its id, its token, the last
// sequence number it holds and the trace context of its span. c.mu is held.
func (c *Client) resumeLocked(cl *call) []byte {
	type meta struct {
		spec.RequestMeta
		TraceParent string `json:"traceparent,omitempty"`
		TraceState  string `json:"tracestate,omitempty"`
	}
	ack := cl.lastSeq
	b, _ := json.Marshal(struct {
		ResumeToken string `json:"resumeToken"`
		Meta        meta   `json:"_meta"`
	}{cl.policy.Token, meta{spec.RequestMeta{Ack: &ack}, cl.traceparent, cl.tracestate}})
	if cl.env != nil {
		// A request of the 2026-07-28 era is resumed in it.
		fields, _ := paramFields(json.RawMessage(b))
		b, _ = encodeParams(fields, &call{}, false, cl.env)
	}
	return spec.EncodeRequest(cl.id, spec.MethodResume, b)
}

// maxResumeRetries bounds how many times one resume the server did not take
// up (retryLaterLocked) is sent again on the same link.
const maxResumeRetries = 30

// retryLaterLocked takes up a resume of cl on l that the server answered e
// without taking it up, and with a retryAfter: the instance of a cluster that
// runs the request did not answer (owner_unreachable: it is claimed once its
// lease runs out), or the session spent its failed token checks
// (rate_limited). The resume is sent again on l after retryAfter, unless the
// call ends or moves to another link meanwhile. It reports false, and the
// call ends with e, for any other error, or once the retries are spent.
// c.mu is held.
func (c *Client) retryLaterLocked(cl *call, l *link, e *spec.Error) bool {
	if e.Reason != spec.ReasonOwnerUnreachable && e.Reason != spec.ReasonRateLimited || cl.retries >= maxResumeRetries {
		return false
	}
	cl.retries++
	wait := max(time.Duration(e.RetryAfter)*time.Second, time.Second)
	c.wg.Go(func() {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-t.C:
		case <-l.done:
			return // the next link resumes the call
		case <-c.ctx.Done():
			return
		}
		c.mu.Lock()
		if cl.finished || cl.link != l || c.link != l {
			c.mu.Unlock()
			return
		}
		msg := c.resumeLocked(cl)
		c.mu.Unlock()
		c.write(l, msg)
	})
	return true
}

// write writes m on l; a failed write drops l (its reader then ends, and the loop
// reconnects). It reports whether the write succeeded.
func (c *Client) write(l *link, m []byte) bool {
	return c.writeWith(l, m, nil)
}

// headerWriter is a connection that sends a message with HTTP headers of the
// client's (Streamable HTTP): the Mcp-Param-* headers of a tools/call.
type headerWriter interface {
	WriteWith(ctx context.Context, msg []byte, h http.Header) error
}

// writeWith is write with the HTTP headers h (nil for none), on a connection
// that carries them; other connections get m alone.
func (c *Client) writeWith(l *link, m []byte, h http.Header) bool {
	var err error
	if hw, ok := l.conn.(headerWriter); ok && h != nil {
		err = hw.WriteWith(c.ctx, m, h)
	} else {
		err = l.conn.Write(c.ctx, m)
	}
	if err != nil {
		_ = l.conn.Close()
		return false
	}
	return true
}

// current returns the link to send on, waiting up to ReconnectTimeout for one.
func (c *Client) current(ctx context.Context) (*link, error) {
	c.mu.Lock()
	l, closed := c.link, c.closed
	c.mu.Unlock()
	if l != nil && !closed {
		return l, nil
	}
	deadline := time.NewTimer(c.opts.ReconnectTimeout)
	defer deadline.Stop()
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return nil, ErrClosed
		}
		l, ready := c.link, c.ready
		if l == nil {
			select {
			case c.demand <- struct{}{}:
			default:
			}
		}
		lastErr := c.lastErr
		c.mu.Unlock()
		if l != nil {
			return l, nil
		}
		select {
		case <-ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-c.ctx.Done():
			return nil, ErrClosed
		case <-deadline.C:
			return nil, fmt.Errorf("%w: %w within %v: %v", ErrGaveUp, ErrNoConnection, c.opts.ReconnectTimeout, lastErr)
		}
	}
}

// loop owns the connections: it waits for the current one to end, settles the
// calls it carried, and reconnects.
func (c *Client) loop(l *link) {
	defer c.wg.Done()
	// Attempts since the last link that proved alive: a link that ends before it
	// lived liveLink, nothing of its calls heard, counts as a failed attempt
	// (a Streamable HTTP client with a kept session "connects" without a word
	// to the server, and finds out with its first request), so the backoff and
	// the count go on.
	dials := 0
	var lastErr error
	for {
		select {
		case <-l.done:
		case <-c.ctx.Done():
			// Close closes the link it saw; this one may have come after it
			// looked (a reconnect racing Close).
			_ = l.conn.Close()
			return
		}
		minWait := c.lost(l)
		c.mu.Lock()
		alive := l.heard || time.Since(l.since) >= liveLink
		c.mu.Unlock()
		if alive {
			dials, lastErr = 0, nil
		} else {
			lastErr = l.err
		}
		if f := c.opts.OnConnectionLost; f != nil {
			f(l.err)
		}
		if l, dials = c.reconnect(minWait, dials, lastErr); l == nil {
			return
		}
	}
}

// lost settles the calls of a link that ended: a call without a policy fails
// (ErrNotResumable), a resumable one waits for the next link. A protocol error
// fails every call of the link. It returns the longest minWait of the calls to
// resume.
func (c *Client) lost(l *link) time.Duration {
	_ = l.conn.Close()
	var perr *ProtocolError
	errors.As(l.err, &perr)
	var resent []func() // called once c.mu is released
	defer func() {
		for _, f := range resent {
			f()
		}
	}()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.link == l {
		c.link = nil
		c.ready = make(chan struct{})
	}
	var minWait time.Duration
	for _, cl := range c.calls {
		if cl.finished || cl.link != l {
			continue
		}
		if cl.span != nil && perr == nil && !cl.internal {
			cl.span.AddEvent(mcptrace.EventConnectionLost)
		}
		if perr != nil {
			c.finishLocked(cl, nil, perr)
			continue
		}
		switch c.strandLocked(cl, l.err) {
		case strandResent:
			if f := cl.opts.Resent; f != nil {
				resent = append(resent, f)
			}
		case strandResumable:
			if time.Since(l.since) >= liveLink {
				cl.heard = time.Now()
			}
			minWait = max(minWait, cl.policy.MinWait)
		}
	}
	return minWait
}

// strand is what became of a call whose stream or connection was lost
// (strandLocked).
type strand int

const (
	strandFailed    strand = iota // ended: ErrNotResumable
	strandResent                  // to be sent again (run sends it)
	strandResumable               // waits to be resumed (requests/resume)
)

// maxUnsent bounds how often one request whose write failed (the server
// never got it) is sent again.
const maxUnsent = 3

// strandLocked settles a call whose link, or whose stream on it, was lost
// (why) before its answer: a call the server made resumable waits to be
// resumed; one with a key but no policy yet is sent again with its key (the
// server attaches it to the call it runs, whose messages, numbered as
// before, it sends from the first); one the server never got (its write
// failed, or the server refused it: a session it forgot), an Idempotent
// one, are sent again; any other ends with ErrNotResumable: its outcome is
// unknown, and a tool call may not be safe to run twice. c.mu is held.
func (c *Client) strandLocked(cl *call, why error) strand {
	resend := func() strand {
		cl.sent, cl.link = false, nil
		select {
		case cl.resend <- struct{}{}:
		default:
		}
		return strandResent
	}
	switch {
	case cl.policy != nil:
		cl.link, cl.resuming, cl.unconfirmed = nil, false, false
		return strandResumable
	case cl.internal:
	case cl.callKey != "" && !cl.plain:
		return resend()
	case cl.unsent && cl.resends < maxUnsent:
		cl.unsent = false
		cl.resends++
		cl.lastSeq = 0
		return resend()
	case cl.opts.Idempotent:
		cl.lastSeq = 0
		return resend()
	}
	c.finishLocked(cl, nil, fmt.Errorf("%w: request %s (%s): %v", ErrNotResumable, cl.id, cl.method, why))
	return strandFailed
}

// reconnect dials until a link is up, waiting minWait first and backing off
// between attempts; while no call needs a connection it waits for one that does.
// It fails calls whose maxWait passed. dials attempts failed already since the
// last link that proved alive, the last with lastErr; it returns the link (nil
// when the client closes) and the attempts including its own.
func (c *Client) reconnect(minWait time.Duration, dials int, lastErr error) (*link, int) {
	since := time.Now()
	for attempt := dials; ; attempt++ {
		wait := c.backoff(attempt)
		if d := time.Until(since.Add(minWait)); d > wait {
			wait = d
		}
		if !backoff.Sleep(c.ctx, wait) {
			return nil, dials
		}
		if !c.wanted() && !c.opts.KeepConnected {
			select {
			case <-c.demand:
				attempt, dials, lastErr = -1, 0, nil
				continue
			case <-c.ctx.Done():
				return nil, dials
			}
		}
		if dials++; c.opts.OnReconnecting != nil {
			c.opts.OnReconnecting(dials, lastErr)
		}
		l, err := c.connect(c.ctx, c.reopen)
		if err != nil {
			lastErr = err
			c.mu.Lock()
			c.lastErr = err
			c.mu.Unlock()
			continue
		}
		c.mu.Lock()
		closed := c.closed
		c.mu.Unlock()
		if closed {
			_ = l.conn.Close()
			<-l.done
			return nil, dials
		}
		// Counted before the calls are resumed on it: a call's result may come
		// back on l before this goroutine runs again.
		c.reconnects.Add(1)
		c.install(l)
		if f := c.opts.OnReconnected; f != nil {
			f()
		}
		return l, dials
	}
}

// wanted expires resumable calls past their maxWait and reports whether any call
// still needs a connection.
func (c *Client) wanted() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	want := len(c.demand) > 0
	for _, cl := range c.calls {
		if cl.finished || cl.link != nil {
			continue
		}
		if !cl.sent {
			want = true
			continue
		}
		maxWait := c.maxWait(cl)
		if now.After(cl.heard.Add(maxWait)) {
			c.finishLocked(cl, nil, fmt.Errorf("%w: request %s not resumed within its maxWait %v: %v", ErrGaveUp, cl.id, maxWait, c.lastErr))
			continue
		}
		want = true
	}
	return want
}

// backoff is the wait before reconnect attempt (from 0): MinBackoff doubled
// per attempt up to MaxBackoff, jittered as every retry loop's pause is
// (clients that lost one server at once do not all come back at once).
func (c *Client) backoff(attempt int) time.Duration {
	return backoff.Jitter(backoff.Delay(c.opts.MinBackoff, c.opts.MaxBackoff, attempt))
}
