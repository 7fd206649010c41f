package transport

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Conn carries JSON-RPC messages, one per Read and Write.
//
//   - Read returns the next message. It is called by one goroutine at a time. It
//     returns io.EOF after the peer closed cleanly and ErrClosed after Close; Close
//     unblocks a blocked Read. A message over the connection's size limit gives a
//     *TooLargeError, and the connection stays usable: the next Read returns the
//     next message.
//   - Write writes one message. It is safe for concurrent use; messages are never
//     interleaved. Close unblocks a blocked Write, which then returns an error.
//   - Close closes the connection. It is safe to call more than once.
//
// What the ctx of a Read or Write does is the implementation's: Pipe's and a
// Streamable HTTP Read return ctx.Err(), a WebSocket's close the connection (a
// frame cannot be left half read or written), stdio's and a Streamable HTTP
// Write do not look at it (Close ends them).
type Conn interface {
	Read(ctx context.Context) ([]byte, error)
	Write(ctx context.Context, msg []byte) error
	Close() error
}

// ErrClosed is returned by Read and Write on a closed connection.
var ErrClosed = errors.New("transport: connection closed")

// ErrMaybeSent is matched (errors.Is) by a Write error after which the message
// may still have reached the peer: an HTTP POST that went out and whose
// answer never came (the connection cut while the server ran the request).
// Any other Write error means the peer did not get the message (a closed
// pipe, a refused or unreachable server), so a request may be sent again.
var ErrMaybeSent = errors.New("transport: the message may have reached the peer")

// Inbound is what a connection that says where each message came from returns
// (ReadInbound, an optional ability of a client's Conn: Streamable HTTP's): a
// message, with the id of the request whose stream carried it (Via; nil when
// the connection cannot tell: a JSON body, a session's GET stream); or the
// loss of request Via's stream while the connection lives on (Lost), with the
// last event id that stream carried (where a GET with Last-Event-ID takes it
// up; "" when it had none) and how many messages it delivered.
type Inbound struct {
	Msg         []byte
	Via         []byte
	Lost        bool
	LastEventID string
	Delivered   int
}

// TooLargeError reports a message over the size limit. The message was skipped.
type TooLargeError struct{ Limit int }

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("transport: message larger than %d bytes", e.Limit)
}

// DefaultMaxMessageBytes is the default size limit of one message: 4 MiB.
const DefaultMaxMessageBytes = 4 << 20

// A Drainer is a Conn that can tell when its peer has read what was written to
// it. The core waits for that (up to a bound) before it writes a response that
// follows notifications of the same connection, so that a client reading both in
// one chunk cannot handle the response first: the TypeScript SDK dispatches a
// notification a microtask after the line it came on, by which time a response
// on the same chunk has retired the request's progress token.
type Drainer interface {
	// Drain returns once the peer has read everything written so far, or after
	// max, or when ctx ends.
	Drain(ctx context.Context, max time.Duration)
}

// RefusedError reports an HTTP request of a client transport (a Streamable
// HTTP POST or GET, a WebSocket handshake) that the server refused with a
// status before any JSON-RPC answer: a wrong path, a missing key, a proxy's
// error page. Body is the start of what the server said.
type RefusedError struct {
	Method, URL string
	Code        int
	Status      string // "405 Method Not Allowed"
	Body        []byte
}

func (e *RefusedError) Error() string {
	if len(e.Body) == 0 {
		return fmt.Sprintf("%s %s: %s", e.Method, e.URL, e.Status)
	}
	return fmt.Sprintf("%s %s: %s: %s", e.Method, e.URL, e.Status, e.Body)
}
