package http

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/spec"
	"github.com/mcp-resume/mcp-resume/transport"
)

var errStreamClosed = errors.New("http: stream closed")

// stream is the response to one HTTP request of a session: a POST's answer (a JSON
// body or an event stream), or a GET's event stream. The core writes to it from
// any goroutine until it is closed; the request's own goroutine waits in serve.
type stream struct {
	s     *session
	key   string // the request's id as in event ids; "" for the standalone GET stream
	w     http.ResponseWriter
	rc    *http.ResponseController
	json  bool   // the answer may be a JSON body (a POST whose client accepts JSON)
	prime uint64 // the seq the priming event names (the client has up to it)
	// modern: the answer to a 2026-era request: no event ids (its streams are not
	// resumable), and an error answered as a JSON body gets the HTTP status the
	// specification gives its code.
	modern bool
	// traceparent and tracestate are the W3C trace context headers of the
	// POST (TraceHeaders); "" for none.
	traceparent, tracestate string
	// gate is what the POST's credentials say of a tool (ToolRefusal); nil
	// for none.
	gate func(tool string) *transport.Refusal
	// every is the stream's keepalive interval: Options.KeepAlive, or less when
	// its request asked for less (keepAliveFrom, under mu; read without it by
	// serve, which runs after).
	every time.Duration

	mu     sync.Mutex // guards the fields below and writes to w
	sse    bool       // the event stream has started
	closed bool
	last   time.Time     // when the last event was written
	done   chan struct{} // closed with closed
	buf    []byte
	// unflushed: events were written to w since the last flush. Events other
	// than a response are flushed behind, by serve, so that events written in a
	// burst share a write to the client.
	unflushed bool
	kick      chan struct{} // capacity 1: tells serve there are events to flush
	// primeDue: the answer is to become an event stream at its first flush
	// (startSSELater) unless a response that needs none comes first.
	primeDue bool
	// beforePrime runs before the priming event of a stream started at its
	// first flush (mcp.PrimingStream); nil once it let the stream start, or
	// for none.
	beforePrime func() bool
	primeAsked  bool // Prime was called since beforePrime last ran
}

var (
	_ mcp.ClosableStream = (*stream)(nil)
	_ mcp.TracedStream   = (*stream)(nil)
	_ mcp.PrimingStream  = (*stream)(nil)
	_ mcp.GatedStream    = (*stream)(nil)
)

// ToolRefusal is what the POST's credentials say of a call of tool
// (mcp.GatedStream): nil when they allow it.
func (st *stream) ToolRefusal(tool string) *transport.Refusal {
	if st.gate == nil {
		return nil
	}
	return st.gate(tool)
}

// Refuse answers request id with ref as its HTTP response (its status, its
// WWW-Authenticate challenge: a token without a tool's scope gets 403 and the
// scope to step up to), when nothing was written yet (mcp.GatedStream).
func (st *stream) Refuse(id spec.ID, ref *transport.Refusal) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed || st.sse {
		return false
	}
	st.s.h.log.Info().Str("reason", string(ref.Err.Reason)).Msg("tool call refused")
	ref.Write(st.w, id)
	st.endLocked()
	return true
}

// BeforePrime sets what runs before the stream's priming event, when its
// first flush starts it (mcp.PrimingStream).
func (st *stream) BeforePrime(f func() bool) {
	st.mu.Lock()
	st.beforePrime = f
	st.mu.Unlock()
}

// Prime lets a priming event that BeforePrime's func held back go out at the
// next flush (mcp.PrimingStream).
func (st *stream) Prime() {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.primeAsked = true
	if st.primeDue && !st.sse && !st.closed {
		st.markUnflushedLocked()
	}
}

// traceFrom keeps the W3C trace context headers of r, the POST whose answer
// the stream is. Called before the stream is handed to the core.
func (st *stream) traceFrom(r *http.Request) {
	st.traceparent, st.tracestate = r.Header.Get("traceparent"), r.Header.Get("tracestate")
}

// TraceHeaders returns the traceparent and tracestate headers of the POST
// (mcp.TracedStream): the parent of the span of a request whose params carry
// no trace context.
func (st *stream) TraceHeaders() (traceparent, tracestate string) {
	return st.traceparent, st.tracestate
}

// keepAliveFrom takes up the keepalive interval r asks for in HeaderKeepAlive:
// a client that takes a stream silent for a few intervals for a dead
// connection asks for the interval that lets it notice one in its own time
// (a laptop's sleep noticed before a client's timeout), and a stream of its
// requests carries a comment that often. The server's own interval, when
// shorter, stays; none is shorter than MinKeepAlive. Called before serve.
func (st *stream) keepAliveFrom(r *http.Request) {
	v, err := strconv.ParseFloat(r.Header.Get(HeaderKeepAlive), 64)
	st.mu.Lock()
	defer st.mu.Unlock()
	if err != nil || !(v > 0) || v >= st.every.Seconds() { // also bounds v before it is made a Duration
		return
	}
	st.every = min(st.every, max(time.Duration(v*float64(time.Second)), MinKeepAlive))
}

// MinKeepAlive bounds the keepalive interval a client may ask for
// (HeaderKeepAlive on its request): a stream's comments come no oftener.
const MinKeepAlive = time.Second

func newStream(s *session, w http.ResponseWriter, key string) *stream {
	return &stream{s: s, key: key, w: w, rc: http.NewResponseController(w), json: true, done: make(chan struct{}), kick: make(chan struct{}, 1),
		every: s.h.opts.KeepAlive}
}

// Write writes one message (mcp.Stream). A response ends a request's stream and
// is flushed at once, with whatever precedes it; other events are flushed behind
// by serve, which lets a burst of them share writes to the client. Either way, a
// successful Write means the event is in the response's buffers, not that the
// client has it: only an acknowledgement says that.
func (st *stream) Write(_ context.Context, m mcp.Message) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed {
		return errStreamClosed
	}
	// A response is the whole answer as a JSON body when nothing came before it and
	// it is not from an outbox (Seq 0): one from an outbox (a resume's replay
	// racing the stream's start) gets an event id the client can ack.
	if !st.sse && st.json && m.Kind == mcp.KindResponse && (m.Seq == 0 || st.modern) {
		st.w.Header().Set("Content-Type", "application/json")
		status := http.StatusOK
		if st.modern {
			status = errorStatus(m.Data)
		}
		if secs, ok := rateLimited(m.Data); ok { // either era (SEP-3304)
			status = http.StatusTooManyRequests
			st.w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
		}
		// With its length and flushed now, by the goroutine that wrote it (a
		// call's worker), the answer is on its way to the client before the
		// request's own goroutine has woken to take its stream down.
		st.w.Header().Set("Content-Length", strconv.Itoa(len(m.Data)))
		st.w.WriteHeader(status)
		_ = st.rc.SetWriteDeadline(time.Now().Add(st.s.h.opts.WriteTimeout))
		_, err := st.w.Write(m.Data)
		if err == nil {
			err = st.rc.Flush()
		}
		st.endLocked()
		return err
	}
	st.startSSELocked()
	b := st.buf[:0]
	if st.key != "" && m.Seq > 0 && !st.modern {
		b = append(b, "id: "...)
		b = appendEventID(b, st.key, m.Seq)
		b = append(b, '\n')
	}
	b = appendData(b, m.Data)
	st.buf = b
	st.last = time.Now() // keepalive comments do not count: they are not events
	if err := st.writeLocked(b); err != nil {
		return err
	}
	if m.Kind == mcp.KindResponse && st.key != "" {
		// The response ends the stream: net/http sends it, with what precedes it
		// and the end of the body, in one write as serve returns.
		st.endLocked()
		return nil
	}
	st.markUnflushedLocked()
	return nil
}

// errorStatus is the HTTP status of a 2026-era answer sent as a JSON body: 404
// for an unknown method, 400 for a request the server refuses as malformed
// (parse, invalid request or params, and the era's header, capability and
// version errors), 200 for the rest (results, and errors of a request that was
// understood).
func errorStatus(msg []byte) int {
	i := bytes.Index(msg, []byte(`"error":{"code":`))
	if i < 0 {
		return http.StatusOK
	}
	rest := msg[i+len(`"error":{"code":`):]
	j := bytes.IndexAny(rest, ",}")
	if j < 0 {
		return http.StatusOK
	}
	code, err := strconv.Atoi(string(bytes.TrimSpace(rest[:j])))
	if err != nil {
		return http.StatusOK
	}
	switch code {
	case spec.CodeMethodNotFound:
		return http.StatusNotFound
	case spec.CodeParseError, spec.CodeInvalidRequest, spec.CodeInvalidParams,
		spec.CodeHeaderMismatch, spec.CodeMissingCapability, spec.CodeUnsupportedVersion:
		return http.StatusBadRequest
	}
	return http.StatusOK
}

// rateLimited reports whether msg is an error response with code -32023
// (spec.CodeRateLimited), and the whole seconds its error.data.retryAfterMs
// names, rounded up (1 when it names none).
func rateLimited(msg []byte) (secs int64, ok bool) {
	if !bytes.Contains(msg, []byte(`"code":-32023`)) {
		return 0, false
	}
	var r struct {
		Error *spec.Error `json:"error"`
	}
	if json.Unmarshal(msg, &r) != nil || r.Error == nil || r.Error.Code != spec.CodeRateLimited {
		return 0, false
	}
	return max((r.Error.RetryAfterMs+999)/1000, 1), true
}

// markUnflushedLocked notes that events wait in the response's buffer and tells
// serve to flush them.
func (st *stream) markUnflushedLocked() {
	if !st.unflushed {
		st.unflushed = true
		select {
		case st.kick <- struct{}{}:
		default: // serve has been told already
		}
	}
}

// appendData appends an SSE data field (one line per line of data) and the blank
// line that ends the event.
func appendData(b, data []byte) []byte {
	for {
		line, rest, more := bytes.Cut(data, []byte{'\n'})
		b = append(b, "data: "...)
		b = append(b, line...)
		b = append(b, '\n')
		if !more {
			return append(b, '\n')
		}
		data = rest
	}
}

// startSSE starts the event stream now, with its priming event.
func (st *stream) startSSE() {
	st.mu.Lock()
	defer st.mu.Unlock()
	if !st.closed {
		st.startSSELocked()
	}
}

// startSSELater makes the stream an event stream, with its priming event, at
// its first flush (FirstFlush after now, or with the first event written),
// and not at all when a response that needs none comes first: a quick call is
// answered with a JSON body, as its priming event would have reached the
// client only with its response, of no use then. A stream that starts runs
// beforePrime first (see flush).
func (st *stream) startSSELater() {
	st.mu.Lock()
	defer st.mu.Unlock()
	if !st.closed && !st.sse {
		st.primeDue = true
		st.markUnflushedLocked()
	}
}

// startSSELocked starts the event stream unless it has started: the headers, then
// for a request's stream the priming event (an id to reconnect with, and the
// retry delay; SEP-1699).
func (st *stream) startSSELocked() {
	if st.sse {
		return
	}
	st.sse = true
	h := st.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	if st.every == st.s.h.opts.KeepAlive {
		h.Set(HeaderKeepAlive, st.s.h.keepAliveHeader)
	} else {
		h.Set(HeaderKeepAlive, strconv.FormatFloat(st.every.Seconds(), 'f', -1, 64))
	}
	st.w.WriteHeader(http.StatusOK)
	b := st.buf[:0]
	// [2025-11-25 transports §Sending Messages] The server SHOULD immediately
	// send an SSE event consisting of an event ID and an empty data field in
	// order to prime the client to reconnect; before closing the connection
	// it SHOULD send a retry field.
	if st.key != "" && !st.modern {
		b = append(b, "id: "...)
		b = appendEventID(b, st.key, st.prime)
		b = append(b, "\nretry: "...)
		b = strconv.AppendInt(b, st.s.h.opts.Retry.Milliseconds(), 10)
		b = append(b, "\ndata: \n\n"...)
	}
	st.buf = b
	// Flushed behind, like other events: at once by serve, or together with the
	// response when that comes first (a quick call costs one write, not two).
	if st.writeLocked(b) == nil {
		st.markUnflushedLocked()
	}
	st.last = time.Now()
}

// writeLocked writes b to the response under the write deadline: into net/http's
// buffer, and what does not fit to the client. A failure closes the stream.
func (st *stream) writeLocked(b []byte) error {
	_ = st.rc.SetWriteDeadline(time.Now().Add(st.s.h.opts.WriteTimeout))
	if len(b) > 0 {
		if _, err := st.w.Write(b); err != nil {
			st.endLocked()
			return err
		}
	}
	return nil
}

// flushLocked writes b, and all that was written before, to the client now. A
// failure closes the stream.
func (st *stream) flushLocked(b []byte) error {
	if err := st.writeLocked(b); err != nil {
		return err
	}
	st.unflushed = false
	if err := st.rc.Flush(); err != nil {
		st.endLocked()
		return err
	}
	return nil
}

// flush writes the events Write left in the response's buffer to the client.
// A stream that starts now runs beforePrime first, outside the lock: what it
// writes (a call's policy) follows the priming event. When beforePrime holds
// the start back, nothing waits but the priming event (Write starts the
// stream for any event): the first event or Prime brings it back.
func (st *stream) flush() {
	st.mu.Lock()
	defer st.mu.Unlock()
	for f := st.beforePrime; f != nil && st.primeDue && !st.sse && !st.closed; f = st.beforePrime {
		st.beforePrime, st.primeAsked = nil, false
		st.mu.Unlock()
		ok := f()
		st.mu.Lock()
		if ok || st.sse || st.closed {
			break // f let it start, or a Write started it meanwhile
		}
		st.beforePrime = f
		if !st.primeAsked { // else Prime came while f ran: ask again
			st.unflushed = false
			return
		}
	}
	if st.unflushed && !st.closed {
		if st.primeDue {
			st.startSSELocked() // nothing once started
		}
		_ = st.flushLocked(nil)
	}
}

// keepAlive runs when the stream has been quiet for its interval: an event stream
// gets a comment, which keeps proxies from cutting it and finds a dead client,
// or with StreamIdle a request's stream quiet that long is closed (the client
// polls back with Last-Event-ID).
func (st *stream) keepAlive() {
	st.mu.Lock()
	defer st.mu.Unlock()
	opts := &st.s.h.opts
	switch {
	case st.closed || !st.sse:
	case opts.StreamIdle > 0 && st.key != "" && !st.modern && time.Since(st.last) >= opts.StreamIdle:
		st.endLocked()
	case time.Since(st.last) < st.every:
		// An idle check that came before the stream was quiet for StreamIdle
		// (an event came meanwhile): no comment is due yet.
	default:
		_ = st.flushLocked([]byte(": keepalive\n\n"))
	}
}

// CloseStream ends the stream from the server's side (mcp.ClosableStream): the
// client reconnects with Last-Event-ID.
func (st *stream) CloseStream() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed {
		return false
	}
	if st.primeDue {
		// Closed before its first flush: the client gets the priming event,
		// the id to come back with, before the end of the stream.
		st.startSSELocked()
	}
	st.endLocked()
	return true
}

func (st *stream) end() {
	st.mu.Lock()
	st.endLocked()
	st.mu.Unlock()
}

func (st *stream) endLocked() {
	if !st.closed {
		st.closed = true
		close(st.done)
	}
}

// serve holds the HTTP request open until the stream ends: its response was
// written, the client went away, or the server closed it. Meanwhile it flushes
// the events Write leaves unflushed, keeps an event stream alive with comments,
// and closes it when idle past StreamIdle. Events still unflushed when it returns
// go out as net/http finishes the response.
func (st *stream) serve(r *http.Request) {
	defer st.s.streamDone(st)
	defer func() {
		st.mu.Lock()
		st.endLocked()
		// net/http finishes the response after serve returns (the chunked
		// terminator): not under a deadline the last event set long ago.
		_ = st.rc.SetWriteDeadline(time.Time{})
		// The request that keeps this stream as its sink for a while (a result
		// kept for --delivered-retention) must not keep the HTTP exchange too:
		// its request, headers and buffers. Nothing writes to a closed stream.
		st.w, st.rc, st.buf = nil, nil, nil
		st.mu.Unlock()
	}()
	opts := &st.s.h.opts
	// A quick call's response has often ended the stream by now: no timer then.
	select {
	case <-st.done:
		return
	default:
	}
	// The stream's one timer. Events wait up to opts.Coalesce for company before
	// they are flushed, so that events written in a burst share one write to
	// the client, and the first ones up to opts.FirstFlush, so that a quick
	// call's priming event, policy and response do; while none wait, it runs
	// to the next keepalive, the stream's interval after the last flush, or for
	// a request's stream to its idle check, StreamIdle after it, when that is
	// sooner (SEP-1699 polling: not only at the next keepalive).
	quiet := st.every
	if opts.StreamIdle > 0 && st.key != "" && !st.modern {
		quiet = min(quiet, opts.StreamIdle)
	}
	t := time.NewTimer(quiet)
	defer t.Stop()
	flushDue := false
	hold := opts.FirstFlush // of the next flush
	for {
		select {
		case <-st.done:
			return
		case <-r.Context().Done():
			return
		case <-st.kick:
			switch {
			case flushDue:
			case hold <= 0:
				st.flush()
				t.Reset(quiet)
			default:
				flushDue = true
				t.Reset(hold)
			}
			hold = opts.Coalesce
		case <-t.C:
			if flushDue {
				flushDue = false
				st.flush()
			} else {
				st.keepAlive()
			}
			t.Reset(quiet)
		}
	}
}
