package http

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/mcp-resume/mcp-resume/transport"
)

// The client's event streams: a POST's SSE response, the GET stream, and a lost
// request stream taken up again (Resume), read in the background.

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
		c.askKeepAlive(req)
	}
	resp, err := c.do(req)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return resp.StatusCode, &transport.RefusedError{Method: http.MethodGet, URL: c.url, Code: resp.StatusCode, Status: resp.Status, Body: bodyStart(b)}
	}
	return resp.StatusCode, c.take(resp, nil, nil)
}

// Listen opens the session's standalone GET stream, on which a server of the
// 2025 era sends what belongs to no request of the client's: its own requests
// (an elicitation a tool asks outside any request's stream) and notifications
// (list changes). It returns once the server answered, or ctx ended first (the
// GET is then abandoned); the stream is read in the background until the
// ClientConn closes. Without a session (a stateless server, or the 2026-07-28
// era) there is nothing to listen to: it returns nil at once. The stream may
// be silent as long as the server has nothing to say: Silence applies to it
// only once the server announced its keepalive.
func (c *ClientConn) Listen(ctx context.Context) error {
	c.mu.Lock()
	sid, protocol := c.session, c.protocol
	c.mu.Unlock()
	if sid == "" {
		return nil
	}
	// The stream lives as long as the ClientConn; ctx bounds only the wait
	// for the server's answer.
	rctx, cancel := context.WithCancel(c.ctx)
	stop := context.AfterFunc(ctx, cancel)
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, c.url, nil)
	if err != nil {
		cancel()
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set(HeaderSessionID, sid)
	req.Header.Set(HeaderProtocolVersion, protocol)
	resp, err := c.watch(req, true)
	if !stop() {
		if err == nil {
			resp.Body.Close()
		}
		cancel()
		return fmt.Errorf("transport/http: GET %s: %w", c.url, context.Cause(ctx))
	}
	if err != nil {
		cancel()
		return c.closedOr(err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		defer cancel()
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return &transport.RefusedError{Method: http.MethodGet, URL: c.url, Code: resp.StatusCode, Status: resp.Status, Body: bodyStart(b)}
	}
	resp.Body = &doneBody{ReadCloser: resp.Body, done: cancel}
	return c.take(resp, nil, nil)
}

// Resume takes up the event stream of request id after its loss (an Inbound
// with Lost), with a GET carrying lastEventID: what the server replays and sends
// after comes as on the stream that was lost, and its loss is reported again.
// With idle > 0, a taken-up stream that carries no event for that long is closed
// and reported lost too (so that its caller takes it up again, which replays
// what came meanwhile from a server that stored it but did not send it).
func (c *ClientConn) Resume(id []byte, lastEventID string, idle time.Duration) error {
	resp, err := c.reconnect(lastEventID)
	if err != nil {
		return err
	}
	if idle > 0 {
		resp.Body = newIdleBody(resp.Body, idle)
	}
	return c.take(resp, nil, id)
}

// reconnect is the GET with lastEventID that takes up a request's event
// stream; it returns the new stream's response.
func (c *ClientConn) reconnect(lastEventID string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(c.ctx, http.MethodGet, c.url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	c.mu.Lock()
	req.Header.Set(HeaderSessionID, c.session)
	req.Header.Set(HeaderProtocolVersion, c.protocol)
	c.mu.Unlock()
	req.Header.Set(HeaderLastEventID, lastEventID)
	c.askKeepAlive(req)
	resp, err := c.do(req)
	if err != nil {
		return nil, c.closedOr(err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return nil, fmt.Errorf("transport/http: GET %s with Last-Event-ID: %s: %s", c.url, resp.Status, bytes.TrimSpace(b))
	}
	return resp, nil
}

// DefaultRetry is how long a client waits before it reconnects to a request's
// event stream that the server closed without a retry field of its own.
const DefaultRetry = time.Second

// maxRetry bounds the retry field a server names: a client does not wait
// longer before it reconnects.
const maxRetry = time.Minute

// poll takes up request id's event stream, which the server closed before
// the response after an event with an id (SEP-1699 polling): after the
// stream's retry delay, a GET with that lastEventID, whose stream is
// read as the one closed. It reports whether the stream was taken up; the
// caller treats a stream not taken up as lost. Only a session's streams are
// polled: a server without sessions, or a request of the 2026-07-28 era
// (whose closed stream is its end), has none to take up.
func (c *ClientConn) poll(id []byte, lastEventID string, retry time.Duration) bool {
	wait := DefaultRetry
	if retry >= 0 {
		wait = min(retry, maxRetry)
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
	case <-c.ctx.Done():
		return false
	}
	resp, err := c.reconnect(lastEventID)
	if err != nil {
		return false
	}
	return c.take(resp, nil, id) == nil
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
			sum := c.events(resp.Body, id)
			silent := silenceOf(resp.Body)
			from := sum.last // where a poll takes the stream up
			if from == "" && resp.Request != nil {
				from = resp.Request.Header.Get(HeaderLastEventID) // a stream polled back that carried no event
			}
			switch {
			case silent != nil && c.failOnLoss:
				// Whatever stream it was (the GET stream too): the connection is dead.
				c.lose(silent)
			case sum.answered || id == nil:
			case c.reportLoss:
				c.deliver(Inbound{Via: id, Lost: true, LastEventID: sum.last, Delivered: sum.n})
			case sum.closed && from != "" && c.SessionID() != "" && c.poll(id, from, sum.retry):
				// [2025-11-25 transports §Resumability and Redelivery] "the
				// server MAY close the connection ... the client SHOULD
				// 'poll' the SSE stream by attempting to reconnect" once the
				// retry delay has passed, with Last-Event-ID.
			default:
				c.lose(ErrStreamLost)
			}
		}()
		return nil
	}
	defer resp.Body.Close()
	b, err := readAll(resp.Body)
	if err != nil {
		if sent != nil {
			return maybeSent{c.closedOr(err)} // the server answered: it had the message
		}
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
		return fmt.Errorf("transport/http: %w", &transport.RefusedError{Method: http.MethodPost, URL: c.url, Code: resp.StatusCode, Status: resp.Status, Body: bodyStart(b)})
	}
	if len(bytes.TrimSpace(b)) > 0 && strings.HasPrefix(ct, "application/json") {
		c.deliver(Inbound{Msg: b})
		return nil
	}
	if requestID(sent) != nil {
		// A request that got neither a stream nor an answer will never be
		// answered; the server had it.
		return maybeSent{fmt.Errorf("transport/http: POST %s: %s without an answer", c.url, resp.Status)}
	}
	return nil
}

// streamSum is what an event stream carried, once it ended.
type streamSum struct {
	answered bool          // a response to the stream's request came (never for a nil id)
	last     string        // the last event id, "" for none
	n        int           // messages delivered
	retry    time.Duration // the last retry field, -1 for none
	closed   bool          // the server ended the body cleanly (not a cut, not Close)
}

// events reads an SSE body and delivers each event's data, as carried by request
// id's stream; priming events (empty data) and comments are skipped.
func (c *ClientConn) events(body io.Reader, id []byte) (sum streamSum) {
	sum.retry = -1
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), transport.DefaultMaxMessageBytes+1024)
	var data []byte
	for sc.Scan() {
		line := sc.Bytes()
		switch {
		case bytes.HasPrefix(line, []byte("id:")):
			sum.last = string(bytes.TrimSpace(bytes.TrimPrefix(line, []byte("id:"))))
		case bytes.HasPrefix(line, []byte("retry:")):
			if ms, err := strconv.ParseUint(string(bytes.TrimSpace(bytes.TrimPrefix(line, []byte("retry:")))), 10, 32); err == nil {
				sum.retry = time.Duration(ms) * time.Millisecond
			}
		case len(line) == 0:
			if len(data) > 0 {
				if !c.deliver(Inbound{Msg: bytes.Clone(data), Via: id}) {
					// Closed: stop here, so that what a stream delivered is always a
					// prefix of it (a resuming client acknowledges by the last one).
					return sum
				}
				sum.n++
				if id != nil && !sum.answered && answers(data, id) {
					sum.answered = true
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
	sum.closed = sc.Err() == nil && c.ctx.Err() == nil
	return sum
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

// bodyStart is the start of a refusal's body that an error quotes.
func bodyStart(b []byte) []byte {
	b = bytes.TrimSpace(b)
	if len(b) > 512 {
		b = b[:512]
	}
	return b
}
