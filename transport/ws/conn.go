package ws

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/spec"
	"github.com/mcp-resume/mcp-resume/transport"
)

// Subprotocol is the WebSocket subprotocol both ends must agree on.
const Subprotocol = "mcp"

// ErrPeerUnresponsive is the Read error of a connection dropped because the peer
// did not answer a ping in time.
var ErrPeerUnresponsive = errors.New("ws: peer did not answer a ping")

// Options configure a Conn, on either end. The zero value of each field means its
// default.
type Options struct {
	// MaxMessageBytes bounds one message read. A longer text message is skipped
	// and reported as *transport.TooLargeError. Default
	// transport.DefaultMaxMessageBytes.
	MaxMessageBytes int
	// PingInterval is how long a connection may carry nothing from the peer
	// before a keepalive ping is sent: a connection that carries messages, or
	// the peer's own pings, gets none. Default 20s (Dial's: ClientPing);
	// negative disables the keepalive.
	PingInterval time.Duration
	// PingTimeout is how long a ping waits for its pong before the peer is taken
	// for dead and the connection dropped. Default 10s (Dial's: half of
	// ClientPing).
	PingTimeout time.Duration
	// WriteTimeout bounds one Write; a peer that does not read for that long loses
	// its connection. Default 30s.
	WriteTimeout time.Duration
	// CloseTimeout bounds the close handshake of Close; past it the connection is
	// dropped. Default 1s.
	CloseTimeout time.Duration
}

func (o *Options) withDefaults() Options {
	var v Options
	if o != nil {
		v = *o
	}
	if v.MaxMessageBytes <= 0 {
		v.MaxMessageBytes = transport.DefaultMaxMessageBytes
	}
	def := func(d *time.Duration, val time.Duration) {
		if *d == 0 {
			*d = val
		}
	}
	def(&v.PingInterval, 20*time.Second)
	def(&v.PingTimeout, 10*time.Second)
	def(&v.WriteTimeout, 30*time.Second)
	def(&v.CloseTimeout, time.Second)
	return v
}

// Conn is a transport.Conn over one WebSocket connection: one JSON-RPC message per
// text message. It is safe for the concurrency transport.Conn allows: one reader,
// any number of writers, Close from anywhere. A Read's or Write's ctx that ends
// while it is in progress closes the connection (coder/websocket's rule).
type Conn struct {
	ws   *websocket.Conn
	raw  *rawConn // under ws; closing it ends every operation at once
	opts Options
	// id is who the handshake's credentials name (AcceptOptions.Keys or Auth);
	// set before the connection is shared.
	id transport.Identity

	life   context.Context // ends when the connection is closed or dropped
	cancel context.CancelFunc
	wg     sync.WaitGroup // the keepalive goroutine

	closeOnce sync.Once
	closed    chan struct{} // closed by Close

	mu   sync.Mutex // guards fail
	fail error      // why we dropped the connection (keepalive), for Read

	eof bool // the peer's close frame was read; owned by the reader

	// With an init deadline (AcceptOptions.InitTimeout): opened is closed by
	// the reader at the first message that opens a session, and the watcher
	// closes the connection when the deadline comes first (noInit).
	initTimeout time.Duration
	opened      chan struct{}
	isOpen      bool // opened is closed; owned by the reader
	noInit      atomic.Bool
}

var _ transport.Conn = (*Conn)(nil)

// newConn returns a Conn over c. With initTimeout > 0 (a server's), the peer
// must open a session within that long (see AcceptOptions.InitTimeout).
func newConn(c *websocket.Conn, raw *rawConn, o Options, initTimeout time.Duration) *Conn {
	c.SetReadLimit(-1) // Read enforces the limit itself, without closing
	ctx, cancel := context.WithCancel(context.Background())
	conn := &Conn{ws: c, raw: raw, opts: o, life: ctx, cancel: cancel, closed: make(chan struct{}),
		initTimeout: initTimeout, opened: make(chan struct{})}
	if initTimeout <= 0 {
		conn.isOpen = true
		close(conn.opened)
	}
	if o.PingInterval > 0 || initTimeout > 0 {
		conn.wg.Add(1)
		go conn.watch()
	}
	return conn
}

// Read returns the next text message. A binary message is answered with a
// JSON-RPC error and skipped. After the peer's close frame Read returns io.EOF,
// after Close transport.ErrClosed, after a keepalive failure an error wrapping
// ErrPeerUnresponsive.
func (c *Conn) Read(ctx context.Context) ([]byte, error) {
	for {
		if c.isClosed() {
			return nil, transport.ErrClosed
		}
		if c.eof {
			return nil, io.EOF
		}
		typ, r, err := c.ws.Reader(ctx)
		if err != nil {
			return nil, c.readErr(err)
		}
		msg, tooLarge, err := readLimited(r, c.opts.MaxMessageBytes)
		if err == nil && c.raw.readFailed.Load() {
			err = io.ErrUnexpectedEOF // cut right before a frame's payload
		}
		if err != nil {
			return nil, c.readErr(err)
		}
		if typ == websocket.MessageBinary {
			_ = c.Write(ctx, errBinary)
			continue
		}
		if tooLarge {
			return nil, &transport.TooLargeError{Limit: c.opts.MaxMessageBytes}
		}
		if !c.isOpen && opens(msg) {
			c.isOpen = true
			close(c.opened)
		}
		return msg, nil
	}
}

// opens reports whether msg opens a session: an initialize request, or a
// request of the 2026-07-28 era, which needs none.
func opens(msg []byte) bool {
	m, err := spec.Decode(msg)
	if err != nil {
		return false
	}
	class := mcp.Classify(m)
	return class.Opens || class.Modern
}

var errBinary = spec.EncodeError(nil, spec.NewError(spec.CodeInvalidRequest, spec.ReasonBinaryFrame,
	"binary WebSocket messages are not accepted; send each JSON-RPC message as one text message"))

// readLimited reads one message of at most limit bytes. A longer one is read to its
// end and dropped: tooLarge.
func readLimited(r io.Reader, limit int) (msg []byte, tooLarge bool, err error) {
	msg, err = transport.ReadAll(io.LimitReader(r, int64(limit)+1))
	if err != nil {
		return nil, false, err
	}
	if len(msg) <= limit {
		return msg, false, nil
	}
	if _, err := io.Copy(io.Discard, r); err != nil {
		return nil, false, err
	}
	return nil, true, nil
}

// readErr turns a read error of the library into the Conn's.
func (c *Conn) readErr(err error) error {
	if c.isClosed() {
		return transport.ErrClosed
	}
	c.mu.Lock()
	fail := c.fail
	c.mu.Unlock()
	if fail != nil {
		return fail
	}
	if websocket.CloseStatus(err) != -1 {
		c.eof = true // the peer closed: every later Read says so too
		return io.EOF
	}
	return fmt.Errorf("ws: read: %w", err)
}

// Write sends msg as one text message.
func (c *Conn) Write(ctx context.Context, msg []byte) error {
	if c.isClosed() {
		return transport.ErrClosed
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.WriteTimeout)
	defer cancel()
	if err := c.ws.Write(ctx, websocket.MessageText, msg); err != nil {
		if c.isClosed() {
			return transport.ErrClosed
		}
		return fmt.Errorf("ws: write: %w", err)
	}
	return nil
}

// Principal returns who the handshake authenticated as (AcceptOptions.Keys), or
// "" without authentication.
func (c *Conn) Principal() string { return c.id.Principal }

// Close closes the connection with status 1000 (normal closure).
func (c *Conn) Close() error {
	c.closeWith(websocket.StatusNormalClosure, "")
	return nil
}

// closeWith sends a close frame with code and reason, waits for the peer's up to
// CloseTimeout, and drops the connection. Only the first call does anything;
// every call returns once the connection's watcher has stopped.
func (c *Conn) closeWith(code websocket.StatusCode, reason string) {
	c.closeOnce.Do(func() { c.shut(code, reason) })
	c.wg.Wait()
}

// shut is closeWith but for waiting for the watcher (which calls it too).
func (c *Conn) shut(code websocket.StatusCode, reason string) {
	close(c.closed)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = c.ws.Close(code, reason)
	}()
	t := time.NewTimer(c.opts.CloseTimeout)
	select {
	case <-done:
	case <-t.C:
		_ = c.raw.Close()
		<-done
	}
	t.Stop()
	_ = c.raw.Close()
	c.cancel()
}

// drop ends the connection at once, without a close handshake: Read returns err.
func (c *Conn) drop(err error) {
	c.mu.Lock()
	if c.fail == nil {
		c.fail = err
	}
	c.mu.Unlock()
	_ = c.raw.Close()
	c.cancel()
}

func (c *Conn) isClosed() bool {
	select {
	case <-c.closed:
		return true
	default:
		return false
	}
}

// rawConn is the TCP connection under a WebSocket. It remembers a failed read:
// the library takes a connection that ends right after a frame header for the end
// of the message (its payload reader turns the io.EOF of an empty read into the
// message's end), so Read checks after each message whether the connection failed
// under it. The library reads only the bytes it needs, so a complete message never
// sets the flag.
type rawConn struct {
	net.Conn
	readFailed atomic.Bool
	lastRead   atomic.Int64 // when a byte last came (unix ns): the keepalive pings only a quiet connection
}

func newRawConn(c net.Conn) *rawConn {
	r := &rawConn{Conn: c}
	r.lastRead.Store(time.Now().UnixNano())
	return r
}

func (c *rawConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.lastRead.Store(time.Now().UnixNano())
	}
	if err != nil {
		c.readFailed.Store(true)
	}
	return n, err
}

// quiet is how long the connection has carried nothing from the peer.
func (c *rawConn) quiet() time.Duration {
	return time.Since(time.Unix(0, c.lastRead.Load()))
}

// watch pings the peer once the connection has carried nothing from it for
// PingInterval, and drops the connection when a pong does not come within
// PingTimeout; with an init deadline, it closes the connection (1008, policy
// violation) when the peer has not opened a session by then. A connection
// that carries messages, or the peer's own pings (a client that pings more
// often than its server), costs no ping: a peer whose bytes keep coming is
// alive.
func (c *Conn) watch() {
	defer c.wg.Done()
	var ping, initC <-chan time.Time
	var pt *time.Timer
	if c.opts.PingInterval > 0 {
		pt = time.NewTimer(c.opts.PingInterval)
		defer pt.Stop()
		ping = pt.C
	}
	opened := c.opened
	if c.initTimeout > 0 {
		t := time.NewTimer(c.initTimeout)
		defer t.Stop()
		initC = t.C
	}
	for {
		select {
		case <-c.life.Done():
			return
		case <-opened:
			opened, initC = nil, nil
			if ping == nil {
				return
			}
			continue
		case <-initC:
			c.closeOnce.Do(func() {
				c.noInit.Store(true)
				c.shut(websocket.StatusPolicyViolation, fmt.Sprintf("no initialize within %v", c.initTimeout))
			})
			return
		case <-ping:
		}
		if q := c.raw.quiet(); q < c.opts.PingInterval {
			pt.Reset(c.opts.PingInterval - q)
			continue
		}
		ctx, cancel := context.WithTimeout(c.life, c.opts.PingTimeout)
		err := c.ws.Ping(ctx)
		cancel()
		if err != nil {
			if c.life.Err() == nil && !c.isClosed() {
				c.drop(fmt.Errorf("%w within %v", ErrPeerUnresponsive, c.opts.PingTimeout))
			}
			return
		}
		pt.Reset(c.opts.PingInterval)
	}
}
