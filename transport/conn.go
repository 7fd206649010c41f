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
type Conn interface {
	Read(ctx context.Context) ([]byte, error)
	Write(ctx context.Context, msg []byte) error
	Close() error
}

// ErrClosed is returned by Read and Write on a closed connection.
var ErrClosed = errors.New("transport: connection closed")

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
