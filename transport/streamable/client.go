package streamable

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
type ClientConn struct {
	url        string
	client     *http.Client
	ctx        context.Context
	cancel     context.CancelFunc
	in         chan Inbound
	failOnLoss bool
	reportLoss bool
	silence    time.Duration // ClientOptions.Silence
	keepAlive  atomic.Int64  // the server's announced keepalive (ns); 0 until it announced one

	mu       sync.Mutex // guards the fields below
	err      error      // why the connection ended, when not by Close (ErrStreamLost)
	closing  bool       // Close began: no new stream readers
	session  string
	protocol string
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
	// Client makes the HTTP requests. Default http.DefaultClient.
	Client *http.Client
	// Protocol is sent as MCP-Protocol-Version after initialize. Default
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
	// stream goes unnoticed and its request's answer never comes.
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
	// Negative means no bound.
	Silence time.Duration
}

// DefaultSilence is ClientOptions.Silence's window before a server announced
// its keepalive: 2.5 times this project's default keepalive (20 s).
const DefaultSilence = 50 * time.Second

// SilenceError is why a ClientConn ended when a stream carried nothing for its
// Silence window. It is an ErrStreamLost.
type SilenceError struct{ Window time.Duration }

func (e *SilenceError) Error() string {
	return fmt.Sprintf("no data for %s", e.Window.Round(time.Millisecond))
}

// Is makes a SilenceError an ErrStreamLost.
func (e *SilenceError) Is(target error) bool { return target == ErrStreamLost }

// Inbound is one thing ReadInbound returns: a message, with the id of the
// request whose event stream carried it (Via, nil for a JSON body or the GET
// stream); or, with ReportStreamLoss, the loss of request Via's stream (Lost).
type Inbound struct {
	Msg         []byte
	Via         []byte
	Lost        bool
	LastEventID string // of the lost stream: where Resume takes it up; "" when it had none
	Delivered   int    // messages the lost stream delivered
}

// KeptSession is a session shared by the ClientConns of one client
// (ClientOptions.Keep). Its zero value holds none. It is safe for concurrent use.
type KeptSession struct {
	reopen   sync.Mutex // one ClientConn at a time opens a new session
	mu       sync.Mutex
	id       string
	protocol string
	init     []byte // the client's initialize request
	result   []byte // the server's answer to it
}

// ID returns the session kept, or "".
func (k *KeptSession) ID() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.id
}

// ErrStreamLost is returned by Read of a ClientConn with FailOnStreamLoss after a
// request's event stream ended before its response.
var ErrStreamLost = errors.New("transport/streamable: a request's event stream ended before its response")

// Dial returns a ClientConn for the endpoint url. No request is made before the
// first Write.
func Dial(url string, opts *ClientOptions) *ClientConn {
	var o ClientOptions
	if opts != nil {
		o = *opts
	}
	if o.Client == nil {
		o.Client = http.DefaultClient
	}
	if o.Protocol == "" {
		o.Protocol = "2025-06-18"
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &ClientConn{url: url, client: o.Client, ctx: ctx, cancel: cancel, in: make(chan Inbound, 1024), protocol: o.Protocol, failOnLoss: o.FailOnStreamLoss, reportLoss: o.ReportStreamLoss, silence: o.Silence, keep: o.Keep}
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
	if c.keep != nil {
		if done, err := c.fromKept(msg); done {
			return err
		}
	}
	return c.post(ctx, msg, true)
}

// fromKept answers the client's initialize from the kept session, and drops the
// initialized notification that follows; it reports whether msg was handled.
func (c *ClientConn) fromKept(msg []byte) (bool, error) {
	m, derr := spec.Decode(msg)
	if derr != nil {
		return false, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case m.Kind == spec.KindNotification && m.Method == "notifications/initialized" && c.keptInit:
		c.keptInit = false
		return true, nil
	case m.Kind != spec.KindRequest || m.Method != spec.MethodInitialize || c.session != "":
		return false, nil
	}
	k := c.keep
	k.mu.Lock()
	defer k.mu.Unlock()
	k.init = bytes.Clone(msg)
	if k.id == "" || k.result == nil {
		return false, nil
	}
	c.session, c.protocol, c.keptInit = k.id, k.protocol, true
	var res []byte
	if kr, derr := spec.Decode(k.result); derr == nil && kr.Kind == spec.KindResponse {
		res = spec.ReplaceResponseID(k.result, kr.ID, m.ID)
	}
	if res == nil {
		return false, nil
	}
	select {
	case c.in <- Inbound{Msg: res}:
	default:
		return true, errors.New("transport/streamable: read buffer full")
	}
	return true, nil
}

// post sends msg in its own POST; with retry, a request refused because the
// server forgot the kept session is sent again in a new one.
func (c *ClientConn) post(ctx context.Context, msg []byte, retry bool) error {
	var used string // the session the POST went with
	m, derr := spec.Decode(msg)
	modern := derr == nil && m.Kind == spec.KindRequest && spec.EnvelopeOf(m.Params).Modern()
	pctx, done := c.ctx, func() {}
	if modern {
		pctx, done = c.track(m.ID)
	}
	req, err := http.NewRequestWithContext(pctx, http.MethodPost, c.url, bytes.NewReader(msg))
	if err != nil {
		done()
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if modern {
		// A 2026-07-28 request stands alone: no session, and the headers that
		// mirror its body.
		v := spec.EnvelopeOf(m.Params).Version
		req.Header.Set(HeaderProtocolVersion, v)
		for k, hv := range mcpgo.StandardHeaders(v, mcpgo.MCPMethod(m.Method), m.Params) {
			req.Header.Set(k, hv)
		}
		if spec.IsTaskMethod(m.Method) { // the Tasks extension routes by task id
			if hv, ok := mcpgo.EncodeHeaderValue(spec.StringMember(m.Params, "taskId")); ok {
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
	resp, err := c.do(req)
	if err != nil {
		done()
		if c.ctx.Err() != nil {
			return transport.ErrClosed
		}
		return err
	}
	if modern {
		// The POST's stream, once read to its end, releases its context.
		resp.Body = &doneBody{ReadCloser: resp.Body, done: done}
	}
	if sid := resp.Header.Get(HeaderSessionID); sid != "" {
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
					return c.post(ctx, msg, false)
				}
			}
		}
		resp.Body = io.NopCloser(bytes.NewReader(b))
	}
	return c.take(resp, msg, nil)
}

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

// keepSession records the session an initialize opened, with the server's
// answer, in the kept session, and delivers the answer.
func (c *ClientConn) keepSession(resp *http.Response, msg []byte, sid string) error {
	defer resp.Body.Close()
	b, err := readAll(resp.Body)
	if err != nil {
		return c.closedOr(err)
	}
	var r struct {
		Result struct {
			ProtocolVersion string `json:"protocolVersion"`
		} `json:"result"`
	}
	if json.Unmarshal(b, &r) == nil && r.Result.ProtocolVersion != "" {
		k := c.keep
		k.mu.Lock()
		k.id, k.protocol, k.init, k.result = sid, r.Result.ProtocolVersion, bytes.Clone(msg), bytes.Clone(b)
		k.mu.Unlock()
		c.mu.Lock()
		c.protocol = r.Result.ProtocolVersion
		c.mu.Unlock()
	}
	resp.Body = io.NopCloser(bytes.NewReader(b))
	return c.take(resp, msg, nil)
}

// reopen opens a new session with the client's initialize, after the server
// forgot the kept one (used, what the refused request went with), and makes it
// the kept session; when another request already did, it takes that one.
func (c *ClientConn) reopen(ctx context.Context, used string) error {
	k := c.keep
	k.reopen.Lock()
	defer k.reopen.Unlock()
	k.mu.Lock()
	if k.id != "" && k.id != used {
		id, protocol := k.id, k.protocol
		k.mu.Unlock()
		c.mu.Lock()
		c.session, c.protocol = id, protocol
		c.mu.Unlock()
		return nil
	}
	init := k.init
	k.id, k.result = "", nil
	k.mu.Unlock()
	if init == nil {
		return errors.New("transport/streamable: no initialize to open a new session with")
	}
	c.mu.Lock()
	c.session = ""
	c.mu.Unlock()
	req, err := http.NewRequestWithContext(c.ctx, http.MethodPost, c.url, bytes.NewReader(init))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := c.do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := readAll(resp.Body)
	sid := resp.Header.Get(HeaderSessionID)
	if err != nil || resp.StatusCode != http.StatusOK || sid == "" {
		if sid != "" { // opened, but its answer was lost: end it rather than leave it idle
			c.deleteSession(sid)
		}
		return fmt.Errorf("transport/streamable: reopening the session: %s", resp.Status)
	}
	var r struct {
		Result struct {
			ProtocolVersion string `json:"protocolVersion"`
		} `json:"result"`
	}
	_ = json.Unmarshal(b, &r)
	k.mu.Lock()
	k.id, k.protocol, k.result = sid, r.Result.ProtocolVersion, b
	k.mu.Unlock()
	c.mu.Lock()
	c.session, c.protocol = sid, r.Result.ProtocolVersion
	c.mu.Unlock()
	return c.post(ctx, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), false)
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

// Get opens a GET event stream of the session; with lastEventID, the reconnect of
// a request's stream. Its events arrive through Read. It returns the HTTP status
// and, for a status other than 200, the JSON-RPC error the server gave.
func (c *ClientConn) Get(lastEventID string) (int, error) {
	req, err := http.NewRequestWithContext(c.ctx, http.MethodGet, c.url, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Accept", "text/event-stream")
	c.mu.Lock()
	req.Header.Set(HeaderSessionID, c.session)
	req.Header.Set(HeaderProtocolVersion, c.protocol)
	c.mu.Unlock()
	if lastEventID != "" {
		req.Header.Set(HeaderLastEventID, lastEventID)
	}
	resp, err := c.do(req)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return resp.StatusCode, fmt.Errorf("GET: %s: %s", resp.Status, b)
	}
	return resp.StatusCode, c.take(resp, nil, nil)
}

// Resume takes up the event stream of request id after its loss (an Inbound
// with Lost), with a GET carrying lastEventID: what the server replays and sends
// after comes as on the stream that was lost, and its loss is reported again.
// With idle > 0, a taken-up stream that carries no event for that long is closed
// and reported lost too (so that its caller takes it up again, which replays
// what came meanwhile from a server that stored it but did not send it).
func (c *ClientConn) Resume(id []byte, lastEventID string, idle time.Duration) error {
	req, err := http.NewRequestWithContext(c.ctx, http.MethodGet, c.url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	c.mu.Lock()
	req.Header.Set(HeaderSessionID, c.session)
	req.Header.Set(HeaderProtocolVersion, c.protocol)
	c.mu.Unlock()
	req.Header.Set(HeaderLastEventID, lastEventID)
	resp, err := c.do(req)
	if err != nil {
		return c.closedOr(err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return fmt.Errorf("transport/streamable: GET %s with Last-Event-ID: %s: %s", c.url, resp.Status, bytes.TrimSpace(b))
	}
	if idle > 0 {
		resp.Body = newIdleBody(resp.Body, idle)
	}
	return c.take(resp, nil, id)
}

// take delivers what a response carries. sent is what the POST carried (nil for
// a GET); when it is a request, a refusal that does not answer it is Write's
// error, and with FailOnStreamLoss a stream that ends without its response is a
// loss. Its id is decoded only on those paths, not for every message sent.
//
// resumed is the id of the request whose stream a Resume takes up (nil
// otherwise).
func (c *ClientConn) take(resp *http.Response, sent, resumed []byte) error {
	ct := resp.Header.Get("Content-Type")
	if resp.StatusCode == http.StatusOK && strings.HasPrefix(ct, "text/event-stream") {
		c.mu.Lock()
		if c.closing { // Close is waiting for the readers: start no new one
			c.mu.Unlock()
			resp.Body.Close()
			return transport.ErrClosed
		}
		c.readers.Add(1)
		c.mu.Unlock()
		go func() {
			defer c.readers.Done()
			defer resp.Body.Close()
			id := resumed
			if id == nil && (c.failOnLoss || c.reportLoss) {
				id = requestID(sent)
			}
			answered, last, n := c.events(resp.Body, id)
			silent := silenceOf(resp.Body)
			switch {
			case silent != nil && c.failOnLoss:
				// Whatever stream it was (the GET stream too): the connection is dead.
				c.lose(silent)
			case answered || id == nil:
			case c.reportLoss:
				c.deliver(Inbound{Via: id, Lost: true, LastEventID: last, Delivered: n})
			default:
				c.lose(ErrStreamLost)
			}
		}()
		return nil
	}
	defer resp.Body.Close()
	b, err := readAll(resp.Body)
	if err != nil {
		return c.closedOr(err)
	}
	refused := resp.StatusCode == http.StatusUnauthorized
	if !refused && resp.StatusCode != http.StatusOK {
		id := requestID(sent)
		refused = id != nil && !answers(b, id)
	}
	if refused {
		// Refused before the server could tie its error to the request (no API
		// key, a forbidden origin, a wrong media type, a body too large...): the
		// error carries no id to route by, and the request will never be
		// answered. Without a key, nothing will be.
		return fmt.Errorf("transport/streamable: POST %s: %s: %s", c.url, resp.Status, bytes.TrimSpace(b))
	}
	if len(bytes.TrimSpace(b)) > 0 && strings.HasPrefix(ct, "application/json") {
		c.deliver(Inbound{Msg: b})
		return nil
	}
	if requestID(sent) != nil {
		// A request that got neither a stream nor an answer will never be answered.
		return fmt.Errorf("transport/streamable: POST %s: %s without an answer", c.url, resp.Status)
	}
	return nil
}

// events reads an SSE body and delivers each event's data, as carried by request
// id's stream; priming events (empty data) and comments are skipped. It reports
// whether a response to id came (for a nil id, always false), the last event id
// the stream carried, and how many messages it delivered.
func (c *ClientConn) events(body io.Reader, id []byte) (answered bool, last string, n int) {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), transport.DefaultMaxMessageBytes+1024)
	var data []byte
	for sc.Scan() {
		line := sc.Bytes()
		switch {
		case bytes.HasPrefix(line, []byte("id:")):
			last = string(bytes.TrimSpace(bytes.TrimPrefix(line, []byte("id:"))))
		case len(line) == 0:
			if len(data) > 0 {
				if !c.deliver(Inbound{Msg: bytes.Clone(data), Via: id}) {
					// Closed: stop here, so that what a stream delivered is always a
					// prefix of it (a resuming client acknowledges by the last one).
					return answered, last, n
				}
				n++
				if id != nil && !answered && answers(data, id) {
					answered = true
				}
			}
			data = nil
		case bytes.HasPrefix(line, []byte("data:")):
			v := bytes.TrimPrefix(bytes.TrimPrefix(line, []byte("data:")), []byte(" "))
			if data != nil {
				data = append(data, '\n')
			}
			data = append(data, v...)
		}
	}
	return answered, last, n
}

// idleBody closes an event stream's body when no event data came for idle.
type idleBody struct {
	io.ReadCloser
	idle  time.Duration
	timer *time.Timer
}

func newIdleBody(body io.ReadCloser, idle time.Duration) *idleBody {
	b := &idleBody{ReadCloser: body, idle: idle}
	b.timer = time.AfterFunc(idle, func() { _ = body.Close() })
	return b
}

func (b *idleBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if bytes.Contains(p[:n], []byte("data:")) {
		b.timer.Reset(b.idle)
	}
	return n, err
}

func (b *idleBody) Close() error {
	b.timer.Stop()
	return b.ReadCloser.Close()
}

// deliver queues m for Read; it reports false, without queueing, once the
// connection is closed. m.Msg must not be reused by the caller.
func (c *ClientConn) deliver(m Inbound) bool {
	if c.ctx.Err() != nil {
		return false
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

// readAll reads a response body; a body cut short by the Silence window says
// so.
func readAll(body io.Reader) ([]byte, error) {
	b, err := io.ReadAll(body)
	if err != nil {
		if silent := silenceOf(body); silent != nil {
			return b, silent
		}
	}
	return b, err
}

// window is the Silence bound in force now; 0 for none.
func (c *ClientConn) window() time.Duration {
	switch {
	case c.silence < 0:
		return 0
	case c.silence > 0:
		return c.silence
	case !c.failOnLoss && !c.reportLoss:
		return 0
	}
	if ka := time.Duration(c.keepAlive.Load()); ka > 0 {
		return ka * 5 / 2
	}
	if c.failOnLoss {
		return DefaultSilence
	}
	// A server that announced no keepalive may be silent for as long as a
	// tool runs (one that answers a POST with JSON sends nothing before the
	// result): a client that only reports a lost stream does not guess.
	return 0
}

// do makes an HTTP request bounded by the Silence window: its answer's headers
// must come, and then its body must carry a byte, at least that often, else the
// request is cancelled and its error (or the body's, silenceOf) says so.
func (c *ClientConn) do(req *http.Request) (*http.Response, error) {
	w := c.window()
	// With ReportStreamLoss alone the window may come with this very answer
	// (its keepalive announcement), so its body is watched from then on.
	if w <= 0 && !(c.silence == 0 && c.reportLoss) {
		return c.client.Do(req)
	}
	ctx, cancel := context.WithCancelCause(req.Context())
	silent := &SilenceError{Window: w}
	var t *time.Timer
	if w > 0 {
		t = time.AfterFunc(w, func() { c.silenced(cancel, silent) })
	}
	resp, err := c.client.Do(req.WithContext(ctx))
	if t != nil {
		t.Stop()
	}
	if err != nil {
		cancel(nil)
		if errors.Is(context.Cause(ctx), silent) {
			return nil, silent
		}
		return nil, err
	}
	if v, perr := strconv.ParseFloat(resp.Header.Get(HeaderKeepAlive), 64); perr == nil && v > 0 {
		c.keepAlive.Store(int64(v * float64(time.Second)))
		if c.silence == 0 {
			w = c.window()
			silent.Window = w
		}
	}
	body := &silentBody{ReadCloser: resp.Body, ctx: ctx, cancel: cancel, silent: silent, window: w}
	if w > 0 {
		body.timer = time.AfterFunc(w, func() { c.silenced(cancel, silent) })
	}
	resp.Body = body
	return resp, nil
}

// silenced ends a request that was silent for its window. The idle
// connections kept for reuse are closed too: what silenced one connection (a
// laptop's sleep, a NAT that forgot its flows, a network that changed) has
// most likely taken them with it, and a request sent on one of them would be
// silent in its turn.
func (c *ClientConn) silenced(cancel context.CancelCauseFunc, silent *SilenceError) {
	cancel(silent)
	c.client.CloseIdleConnections()
}

// silentBody is a response body whose request is cancelled when no byte comes
// for its window (none when it is 0: only Close cancels it).
type silentBody struct {
	io.ReadCloser
	ctx    context.Context
	cancel context.CancelCauseFunc
	silent *SilenceError
	window time.Duration
	timer  *time.Timer
}

func (b *silentBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 && b.timer != nil {
		b.timer.Reset(b.window)
	}
	return n, err
}

func (b *silentBody) Close() error {
	if b.timer != nil {
		b.timer.Stop()
	}
	err := b.ReadCloser.Close()
	b.cancel(nil)
	return err
}

// silenceOf is the SilenceError that ended body, or nil.
func silenceOf(body io.Reader) *SilenceError {
	if b, ok := body.(*silentBody); ok && errors.Is(context.Cause(b.ctx), b.silent) {
		return b.silent
	}
	return nil
}
