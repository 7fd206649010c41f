package http

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-resume/mcp-resume/spec"
	"github.com/mcp-resume/mcp-resume/transport"
)

// ClientConn is the client side of Streamable HTTP as a transport.Conn: each Write
// is one POST (with the session id once initialize has issued one; a 2026-07-28
// request, which carries its protocol version in params._meta, goes without it,
// with the headers that mirror its body) and Read returns
// what comes back, in order per stream: JSON bodies, the events of SSE responses,
// and the JSON-RPC errors of rejected POSTs. Close drops every open request without
// ending the session (a connection loss, not a DELETE), so the session's resumable
// requests can be resumed from another ClientConn.
//
// A POST's JSON answer or error is read before Write returns, so answers to
// requests sent one after the other arrive in that order. Event streams are read
// in the background. ClientConn does not reconnect dropped streams itself; with
// ClientOptions.FailOnStreamLoss it reports them (see ErrStreamLost).
//
// Write, WriteWith, Abort, SessionID and Delete are safe for concurrent use;
// Read and ReadInbound take one reader, and return when their ctx ends. A
// Write's POST runs on the connection's own context, not on Write's ctx, which
// it does not look at: Write returns once the answer's event stream starts or
// its JSON body is read, at the silence bound, or at Close, which unblocks
// every Read and Write in progress and waits for the event streams' readers.
type ClientConn struct {
	url        string
	client     *http.Client
	ctx        context.Context
	cancel     context.CancelFunc
	in         chan Inbound
	failOnLoss bool
	reportLoss bool
	silence    time.Duration // ClientOptions.Silence
	keepAsk    string        // ClientOptions.KeepAlive in seconds, as HeaderKeepAlive asks; "" for none
	// keepAlive is the longest keepalive interval the server announced (ns),
	// its own: 0 until it announced one.
	keepAlive atomic.Int64

	// initID is the id of the initialize in flight (guarded by mu), whose
	// answer names the protocol version the session's requests carry in
	// MCP-Protocol-Version; initPending is set while there is one.
	initID      []byte
	initPending atomic.Bool

	mu       sync.Mutex // guards the fields below
	err      error      // why the connection ended, when not by Close (ErrStreamLost)
	closing  bool       // Close began: no new stream readers
	session  string
	protocol string // ClientOptions.Protocol, then the one initialize agreed on
	keep     *KeptSession
	keptInit bool // the client's initialize was answered from keep: its initialized notification is not sent
	// streams: the POSTs of 2026-07-28 requests in flight, by request id, to
	// end with Abort (such a request is cancelled by closing its stream).
	streams   map[string]context.CancelFunc
	readers   sync.WaitGroup
	closeOnce sync.Once
}

var _ transport.Conn = (*ClientConn)(nil)

// ClientOptions configure a ClientConn. Nil means defaults.
type ClientOptions struct {
	// Client makes the HTTP requests. Default http.DefaultClient. A copy of
	// it is used, which follows a redirect only within the endpoint's origin
	// and never one that turns a POST into a GET (transport.CheckRedirect):
	// another is a *transport.RedirectError.
	Client *http.Client
	// Header is sent with every request (a server's API key, a proxy's
	// headers). A token that changes (an OAuth client's) comes from the
	// Client's Transport instead, which sees each request after Header is
	// added.
	Header http.Header
	// Protocol is sent as MCP-Protocol-Version after initialize until its
	// answer names the version agreed on, which is sent from then on. Default
	// 2025-06-18.
	Protocol string
	// Keep, when set, keeps the session across ClientConns that share it (the
	// connections of one client, one after the other): a ClientConn whose Keep
	// holds a session answers the client's initialize itself, with the result
	// the server gave when the session was opened, and uses that session; when
	// the server no longer knows it (404 unknown_session), the ClientConn opens a
	// new one with the client's initialize and sends the request again. So a
	// client that reconnects holds one session on the server, not one per
	// connection.
	Keep *KeptSession
	// FailOnStreamLoss makes a request's event stream that ends before the
	// request's response (a cut connection, a server that went away) the end of
	// the ClientConn: every open stream is dropped and Read returns ErrStreamLost
	// once the messages received before are read. A client that resumes its
	// requests on a new connection (requests/resume) wants this; without it a lost
	// stream goes unnoticed and its request's answer never comes. A session's
	// stream that the server ends cleanly after an event id is not lost: it is
	// polled back (SEP-1699), after the stream's retry delay, with a GET that
	// names that id in Last-Event-ID, and lost only when that fails.
	FailOnStreamLoss bool
	// ReportStreamLoss makes a request's event stream that ends before the
	// request's response an Inbound of its own (Lost, with the last event id the
	// stream carried), read with ReadInbound, and the ClientConn goes on: a client
	// that talks to a server of its own choosing (the gateway) resumes that one
	// stream (Resume) or fails that one request.
	ReportStreamLoss bool
	// Silence bounds how long a request's event stream, the GET stream, or a
	// request waiting for its answer may carry no byte at all before it is taken
	// for a dead connection (a laptop that slept, a NAT that forgot the flow: no
	// FIN, no RST, nothing): the stream is dropped and, with FailOnStreamLoss,
	// the ClientConn ends with a *SilenceError (with ReportStreamLoss, that
	// stream is reported lost). 0 means 2.5 times the keepalive interval the
	// server announces on its event streams (HeaderKeepAlive) when
	// FailOnStreamLoss or ReportStreamLoss is set (a client that resumes, or
	// takes a stream up); before it announced one, DefaultSilence with
	// FailOnStreamLoss and no bound with ReportStreamLoss alone (a server that
	// announces none may be silent while a tool runs); no bound otherwise.
	// Each event stream is bounded by its own announcement; the wait for an
	// answer's headers by no less than DefaultSilence (a server may answer a
	// request, tasks/result, only at its end). Negative means no bound.
	Silence time.Duration
	// KeepAlive is the keepalive interval the client asks for on its
	// requests' event streams (HeaderKeepAlive on each POST, and on a GET that
	// takes a request's stream up; the session's GET stream asks none, and
	// keeps the server's). A server of this project takes it when it is shorter
	// than its own, so that a silent stream is noticed within 2.5 times it: a
	// laptop's sleep before a server's deferred answer, a client's timeout.
	// 0 means ClientKeepAlive when FailOnStreamLoss or ReportStreamLoss is set
	// and Silence is not (the client watches for silence), none otherwise;
	// negative asks none.
	KeepAlive time.Duration
}

// ClientKeepAlive is ClientOptions.KeepAlive's default: a silent request's
// stream is noticed after 12.5 s, a resume within 15 s of the silence.
const ClientKeepAlive = 5 * time.Second

// Inbound is one thing ReadInbound returns: a message, with the id of the
// request whose event stream carried it (Via, nil for a JSON body or the GET
// stream); or, with ReportStreamLoss, the loss of request Via's stream (Lost),
// with its last event id (where Resume takes it up).
type Inbound = transport.Inbound

// ErrStreamLost is returned by Read of a ClientConn with FailOnStreamLoss after a
// request's event stream ended before its response.
var ErrStreamLost = errors.New("transport/http: a request's event stream ended before its response")

// Dial returns a ClientConn for the endpoint url. No request is made before the
// first Write.
func Dial(url string, opts *ClientOptions) *ClientConn {
	var o ClientOptions
	if opts != nil {
		o = *opts
	}
	// Whatever the Client, its redirects stay within the origin of url: the
	// credentials Header and the Client's round tripper add on every hop go
	// nowhere else (transport.CheckRedirect).
	o.Client = transport.SameOriginClient(o.Client)
	if len(o.Header) > 0 {
		o.Client.Transport = headerTransport{base: o.Client.Transport, header: o.Header}
	}
	if o.Protocol == "" {
		o.Protocol = "2025-06-18"
	}
	ka := o.KeepAlive
	if ka == 0 && o.Silence == 0 && (o.FailOnStreamLoss || o.ReportStreamLoss) {
		ka = ClientKeepAlive
	}
	var ask string
	if ka > 0 {
		ask = strconv.FormatFloat(ka.Seconds(), 'f', -1, 64)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &ClientConn{url: url, client: o.Client, ctx: ctx, cancel: cancel, in: make(chan Inbound, 1024), protocol: o.Protocol, failOnLoss: o.FailOnStreamLoss, reportLoss: o.ReportStreamLoss, silence: o.Silence, keepAsk: ask, keep: o.Keep}
}

// SessionID returns the session id the server issued, or "".
func (c *ClientConn) SessionID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.session
}

// Read returns the next message from the server. After a stream loss (with
// FailOnStreamLoss) it returns the messages already received, then ErrStreamLost.
func (c *ClientConn) Read(ctx context.Context) ([]byte, error) {
	for {
		in, err := c.ReadInbound(ctx)
		if err != nil || !in.Lost {
			return in.Msg, err
		}
	}
}

// ReadInbound is Read with where each message came from, and the losses of
// request streams (ReportStreamLoss).
func (c *ClientConn) ReadInbound(ctx context.Context) (Inbound, error) {
	select {
	case m := <-c.in:
		return m, nil
	case <-c.ctx.Done():
		select {
		case m := <-c.in:
			if c.lostErr() != nil {
				return m, nil
			}
		default:
		}
		if err := c.lostErr(); err != nil {
			return Inbound{}, err
		}
		return Inbound{}, transport.ErrClosed
	case <-ctx.Done():
		return Inbound{}, ctx.Err()
	}
}

func (c *ClientConn) lostErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// lose ends the connection after a stream loss (why: ErrStreamLost or a
// *SilenceError), unless it is closed already.
func (c *ClientConn) lose(why error) {
	c.mu.Lock()
	if c.ctx.Err() == nil && c.err == nil {
		c.err = why
	}
	c.mu.Unlock()
	c.cancel()
}

// Write sends one message in its own POST.
func (c *ClientConn) Write(ctx context.Context, msg []byte) error {
	return c.WriteWith(ctx, msg, nil)
}

// WriteWith is Write with HTTP headers of the caller's added to the POST: the
// Mcp-Param-* headers that mirror a 2026-07-28 tools/call's arguments
// (SEP-2243), which only the caller, who knows the tool's schema, can name.
func (c *ClientConn) WriteWith(ctx context.Context, msg []byte, h http.Header) error {
	if c.keep != nil {
		if done, err := c.fromKept(msg); done {
			return err
		}
	}
	return c.post(ctx, msg, h, true)
}

// post sends msg in its own POST, with the headers extra; with retry, a
// request refused because the server forgot the kept session is sent again in
// a new one.
func (c *ClientConn) post(ctx context.Context, msg []byte, extra http.Header, retry bool) error {
	var used string // the session the POST went with
	m, derr := spec.Decode(msg)
	// A request or a notification that carries the 2026-07-28 envelope.
	modern := derr == nil && m.Kind != spec.KindResponse && spec.EnvelopeOf(m.Params).Modern()
	pctx, done := c.ctx, func() {}
	if modern && m.Kind == spec.KindRequest {
		pctx, done = c.track(m.ID)
	}
	if derr == nil && m.Kind == spec.KindRequest && m.Method == spec.MethodInitialize {
		c.mu.Lock()
		c.initID = bytes.Clone(m.ID)
		c.mu.Unlock()
		c.initPending.Store(true)
	}
	req, err := http.NewRequestWithContext(pctx, http.MethodPost, c.url, bytes.NewReader(msg))
	if err != nil {
		done()
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	c.askKeepAlive(req)
	if modern {
		// A 2026-07-28 request stands alone: no session, and the headers that
		// mirror its body.
		v := spec.EnvelopeOf(m.Params).Version
		req.Header.Set(HeaderProtocolVersion, v)
		for k, hv := range mcpgo.StandardHeaders(v, mcpgo.MCPMethod(m.Method), m.Params) {
			req.Header.Set(k, hv)
		}
		if spec.IsTaskMethod(m.Method) { // the Tasks extension routes by task id
			if hv, ok := mcpgo.EncodeHeaderValue(m.Target()); ok {
				req.Header.Set(mcpgo.HeaderName, hv)
			}
		}
	} else {
		c.mu.Lock()
		used = c.session
		if c.session != "" {
			req.Header.Set(HeaderSessionID, c.session)
			req.Header.Set(HeaderProtocolVersion, c.protocol)
		}
		c.mu.Unlock()
	}
	for k, v := range extra {
		req.Header[k] = v
	}
	resp, err := c.do(req)
	if err != nil {
		done()
		if c.ctx.Err() != nil {
			err = transport.ErrClosed
		}
		return sentOrNot(err)
	}
	if modern {
		// The POST's stream, once read to its end, releases its context.
		resp.Body = &doneBody{ReadCloser: resp.Body, done: done}
	}
	// A 2026-07-28 request belongs to no session: a session id on its answer
	// (a server that sets one on every response) is not taken up.
	if sid := resp.Header.Get(HeaderSessionID); sid != "" && !modern {
		c.mu.Lock()
		c.session = sid
		c.mu.Unlock()
		if c.keep != nil {
			return c.keepSession(resp, msg, sid)
		}
	}
	if retry && c.keep != nil && resp.StatusCode == http.StatusNotFound {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		if strings.Contains(string(b), string(spec.ReasonUnknownSession)) {
			var err error
			for range 3 { // the new session's own POSTs may be cut too
				if err = c.reopen(ctx, used); err == nil {
					return c.post(ctx, msg, extra, false)
				}
			}
		}
		resp.Body = io.NopCloser(bytes.NewReader(b))
	}
	return c.take(resp, msg, nil)
}

// sentOrNot is the error of a POST that failed after it began: one that never
// reached the server (no connection could be made: a refused port, a name
// that does not resolve) as it is, one answered with a redirect that was not
// followed as that redirect's, any other as an ErrMaybeSent (the request went
// out, and the server may run it).
func sentOrNot(err error) error {
	var op *net.OpError
	var dns *net.DNSError
	var redirect *transport.RedirectError
	switch {
	case errors.As(err, &op) && op.Op == "dial" || errors.As(err, &dns):
		return err
	case errors.As(err, &redirect):
		// Answered with a redirect that was not followed: refused as a
		// status is (RefusedError), the server ran nothing.
		return fmt.Errorf("transport/http: %w", redirect)
	}
	return maybeSent{err}
}

// maybeSent is the error of a request that may have reached the server: it
// says what its cause says, and matches transport.ErrMaybeSent.
type maybeSent struct{ error }

func (e maybeSent) Unwrap() error        { return e.error }
func (e maybeSent) Is(target error) bool { return target == transport.ErrMaybeSent }

// track registers the POST of 2026 request id for Abort, and returns its
// context and the function that releases it once the POST is done.
func (c *ClientConn) track(id spec.ID) (context.Context, func()) {
	ctx, cancel := context.WithCancel(c.ctx)
	key := string(id)
	c.mu.Lock()
	if c.streams == nil {
		c.streams = map[string]context.CancelFunc{}
	}
	c.streams[key] = cancel
	c.mu.Unlock()
	var once sync.Once
	return ctx, func() {
		once.Do(func() {
			c.mu.Lock()
			delete(c.streams, key)
			c.mu.Unlock()
			cancel()
		})
	}
}

// Abort closes the stream of 2026-07-28 request id, which cancels the request
// at a server of that era (one whose client declared SEP-975 keeps it running,
// detached). It does nothing for a request whose stream is done, or of the 2025
// era (those are cancelled with notifications/cancelled).
func (c *ClientConn) Abort(id []byte) {
	c.mu.Lock()
	cancel := c.streams[string(id)]
	c.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// doneBody is a response body that calls done once it is closed.
type doneBody struct {
	io.ReadCloser
	done func()
}

func (b *doneBody) Close() error {
	err := b.ReadCloser.Close()
	b.done()
	return err
}

// requestID returns the id of msg when it is a request, else nil (also for a nil
// msg).
func requestID(msg []byte) []byte {
	if m, err := spec.Decode(msg); err == nil && m.Kind == spec.KindRequest {
		return m.ID
	}
	return nil
}

// answers reports whether msg is a response to id.
func answers(msg, id []byte) bool {
	m, err := spec.Decode(msg)
	return err == nil && m.Kind == spec.KindResponse && m.ID.Equal(bytes.TrimSpace(id))
}

// deliver queues m for Read; it reports false, without queueing, once the
// connection is closed. m.Msg must not be reused by the caller.
func (c *ClientConn) deliver(m Inbound) bool {
	if c.ctx.Err() != nil {
		return false
	}
	if c.initPending.Load() {
		c.agreed(m.Msg)
	}
	select {
	case c.in <- m:
		return true
	case <-c.ctx.Done():
		return false
	}
}

func (c *ClientConn) closedOr(err error) error {
	if c.ctx.Err() != nil {
		return transport.ErrClosed
	}
	return err
}

// agreed takes up the protocol version of msg when it answers the initialize
// in flight.
//
// [2025-11-25 transports §Protocol Version Header] the client MUST include
// MCP-Protocol-Version on its requests after initialization, "the protocol
// version negotiated during initialization".
func (c *ClientConn) agreed(msg []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.initID == nil || !answers(msg, c.initID) {
		return
	}
	c.initID = nil
	c.initPending.Store(false)
	var r struct {
		Result struct {
			ProtocolVersion string `json:"protocolVersion"`
		} `json:"result"`
	}
	if json.Unmarshal(msg, &r) == nil && r.Result.ProtocolVersion != "" {
		c.protocol = r.Result.ProtocolVersion
	}
}

// Close drops every open request and stream; the session stays on the server.
func (c *ClientConn) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closing = true
		c.mu.Unlock()
		c.cancel()
		c.readers.Wait()
	})
	return nil
}

// deleteSession ends session sid, best effort.
func (c *ClientConn) deleteSession(sid string) {
	req, err := http.NewRequestWithContext(c.ctx, http.MethodDelete, c.url, nil)
	if err != nil {
		return
	}
	req.Header.Set(HeaderSessionID, sid)
	if resp, err := c.client.Do(req); err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

// Delete ends the session on the server (DELETE), which cancels its requests.
func (c *ClientConn) Delete(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, c.url, nil)
	if err != nil {
		return err
	}
	req.Header.Set(HeaderSessionID, c.SessionID())
	resp, err := c.do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return errors.New("DELETE: " + resp.Status)
	}
	return nil
}

// headerTransport adds ClientOptions.Header to every request.
type headerTransport struct {
	base   http.RoundTripper
	header http.Header
}

// CloseIdleConnections closes the base's idle connections: a client that
// found its connection silent drops the pooled ones opened with it
// (http.Client's CloseIdleConnections reaches the base only through it).
func (t headerTransport) CloseIdleConnections() {
	base := t.base
	if base == nil {
		base = http.DefaultTransport
	}
	if c, ok := base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, vs := range t.header {
		r.Header[k] = vs
	}
	base := t.base
	if base == nil {
		base = http.DefaultTransport
	}
	return base.RoundTrip(r)
}
