// Package stdio is the stdio transport: newline-delimited JSON-RPC messages on a
// reader and a writer (a server's stdin and stdout, or a child process's pipes).
// Messages must not contain raw newlines (JSON never needs one). Logs never go here:
// they go to stderr.
package stdio

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"syscall"
	"time"

	"github.com/mcp-resume/mcp-resume/transport"
)

// Options configure a Conn. Nil means defaults.
type Options struct {
	// MaxMessageBytes bounds one message; longer lines are skipped and reported as
	// *transport.TooLargeError. Default transport.DefaultMaxMessageBytes.
	MaxMessageBytes int
}

// Conn is a transport.Conn over a reader and a writer. Write and Drain are
// safe for concurrent use, Read is not (one reader); neither Read nor Write
// looks at its ctx: Close unblocks them by closing the reader and the writer,
// so a Read of a reader that is no io.Closer (or whose Close does not end a
// read in progress) blocks until its input ends.
type Conn struct {
	r     *bufio.Reader
	max   int
	close func() error

	wmu sync.Mutex // guards w and serializes writes
	w   *bufio.Writer
	raw syscall.RawConn // w's file descriptor when w is a pipe (Drain); nil otherwise

	closeOnce sync.Once
	closed    chan struct{}
}

var (
	_ transport.Conn    = (*Conn)(nil)
	_ transport.Drainer = (*Conn)(nil)
)

// New returns a Conn reading r and writing w. Close closes r and w when they are
// io.Closers; that is what unblocks a Read in progress.
func New(r io.Reader, w io.Writer, opts *Options) *Conn {
	max := transport.DefaultMaxMessageBytes
	if opts != nil && opts.MaxMessageBytes > 0 {
		max = opts.MaxMessageBytes
	}
	c := &Conn{r: bufio.NewReaderSize(r, 64<<10), w: bufio.NewWriterSize(w, 64<<10), max: max, closed: make(chan struct{})}
	// Through SyscallConn, not Fd, which would switch the file to blocking mode
	// (a blocked Write could then no longer be ended by Close).
	if sc, ok := w.(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil && pending(raw) >= 0 {
			c.raw = raw
		}
	}
	c.close = func() error {
		var errs []error
		if rc, ok := r.(io.Closer); ok {
			errs = append(errs, rc.Close())
		}
		if wc, ok := w.(io.Closer); ok && any(w) != any(r) {
			errs = append(errs, wc.Close())
		}
		return errors.Join(errs...)
	}
	return c
}

// Read returns the next non-empty line.
func (c *Conn) Read(ctx context.Context) ([]byte, error) {
	for {
		line, err := c.readLine()
		if c.isClosed() {
			return nil, transport.ErrClosed
		}
		line = bytes.TrimSpace(line)
		if err != nil {
			if errors.Is(err, io.EOF) && len(line) > 0 {
				return line, nil // a last message without its newline
			}
			return nil, err
		}
		if len(line) > 0 {
			return line, nil
		}
	}
}

// readLine reads up to the next newline, keeping at most c.max bytes; a longer line
// is consumed to its end and reported as too large.
func (c *Conn) readLine() ([]byte, error) {
	var buf []byte
	tooLarge := false
	for {
		chunk, err := c.r.ReadSlice('\n')
		if !tooLarge {
			if len(buf)+len(chunk) > c.max+1 { // +1: the newline itself
				tooLarge, buf = true, nil
			} else {
				buf = append(buf, chunk...)
			}
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err != nil:
			// At EOF there is no newline to allow for.
			if tooLarge || len(buf) > c.max {
				return nil, &transport.TooLargeError{Limit: c.max}
			}
			return buf, err
		case tooLarge:
			return nil, &transport.TooLargeError{Limit: c.max}
		default:
			return buf, nil
		}
	}
}

// Write writes msg and a newline, and flushes.
func (c *Conn) Write(_ context.Context, msg []byte) error {
	if c.isClosed() {
		return transport.ErrClosed
	}
	// [2025-11-25 transports §stdio] Messages are delimited by newlines, and
	// MUST NOT contain embedded newlines: a message indented by whoever made
	// it (an upstream's, passed on) is compacted; a newline can only be
	// whitespace between JSON tokens.
	if bytes.IndexByte(msg, '\n') >= 0 {
		var b bytes.Buffer
		if err := json.Compact(&b, msg); err != nil {
			return fmt.Errorf("stdio: a message with a newline that is not JSON: %w", err)
		}
		msg = b.Bytes()
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if _, err := c.w.Write(msg); err != nil {
		return err
	}
	if err := c.w.WriteByte('\n'); err != nil {
		return err
	}
	return c.w.Flush()
}

// Drain waits until the reader of the writer's pipe has read everything written
// (transport.Drainer), polling, up to max; at once when the writer is not a pipe.
func (c *Conn) Drain(ctx context.Context, max time.Duration) {
	if c.raw == nil {
		return
	}
	deadline := time.Now().Add(max)
	for wait := 50 * time.Microsecond; ; wait = min(2*wait, time.Millisecond) {
		if pending(c.raw) <= 0 || c.isClosed() || ctx.Err() != nil || time.Now().After(deadline) {
			return
		}
		time.Sleep(wait)
	}
}

// pending returns the bytes written to raw that its reader has not read yet, or
// -1 when raw cannot tell (a file, a terminal).
func pending(raw syscall.RawConn) int {
	n := -1
	_ = raw.Control(func(fd uintptr) {
		if v, ok := unread(fd); ok {
			n = v
		}
	})
	return n
}

// Close closes the underlying reader and writer.
func (c *Conn) Close() error {
	err := transport.ErrClosed
	c.closeOnce.Do(func() {
		close(c.closed)
		err = c.close()
	})
	if errors.Is(err, transport.ErrClosed) {
		return nil
	}
	return err
}

func (c *Conn) isClosed() bool {
	select {
	case <-c.closed:
		return true
	default:
		return false
	}
}
