package transport

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/netip"
	"sync"
	"time"
)

// ListenOptions configure Listen. The zero value of each field means none.
type ListenOptions struct {
	// UserTimeout, when set, makes every accepted connection give up on data its
	// peer has not acknowledged for that long (TCP_USER_TIMEOUT, where the system
	// has it): a client that vanished without a FIN or RST (a laptop that slept,
	// a NAT that forgot the flow) is found when the server next writes to it (a
	// keepalive comment or ping), within UserTimeout, instead of after the
	// kernel's retransmissions give up, about 15 minutes later. Its requests are
	// then detached, and their maxWait starts.
	UserTimeout time.Duration
	// Limit, when set, bounds the connections open at once, over every listener
	// that shares it (see ConnLimit).
	Limit *ConnLimit
}

// Listen listens for TCP connections on addr for the network transports
// (Streamable HTTP and WebSocket, both HTTP/1.1 until the upgrade).
//
// With opts.Limit, a connection over one of its bounds is refused as it is
// accepted, outside the HTTP server: once its request's head has come (up to
// 8 KB of it, not parsed), it is answered with an HTTP 503 whose body is a
// JSON-RPC error with reason too_many_connections (and Connection: close),
// the rest of what it sent is read and dropped, and it is closed. A refused
// connection is held half a second at most (a client that sends no request
// within it is closed without an answer), and at most 64 per listener are held
// at once; past that a refused connection is closed without a word. Accept
// never returns a refused connection. Close waits for the refusals in flight.
func Listen(ctx context.Context, addr string, opts *ListenOptions) (net.Listener, error) {
	var o ListenOptions
	if opts != nil {
		o = *opts
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil || (o.UserTimeout <= 0 && o.Limit == nil) {
		return ln, err
	}
	return &listener{Listener: ln, opts: o, refusing: make(chan struct{}, maxRefusing)}, nil
}

const (
	// maxRefusing bounds the refused connections a listener is answering at once.
	maxRefusing = 64
	// refusalLinger bounds the time a refused connection is held to answer it.
	refusalLinger = 500 * time.Millisecond
)

type listener struct {
	net.Listener
	opts     ListenOptions
	refusing chan struct{}  // a token per refusal being answered
	wg       sync.WaitGroup // the goroutines answering refusals
}

func (l *listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.opts.Limit == nil {
			l.setUserTimeout(c)
			return c, nil
		}
		key := addrKey(c.RemoteAddr())
		if refusal := l.opts.Limit.admit(key); refusal != nil {
			l.refuse(c, refusal)
			continue
		}
		l.setUserTimeout(c)
		return &limitedConn{Conn: c, limit: l.opts.Limit, key: key}, nil
	}
}

func (l *listener) setUserTimeout(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok && l.opts.UserTimeout > 0 {
		setUserTimeout(tc, l.opts.UserTimeout)
	}
}

// Close closes the listener and waits for the refusals being answered.
func (l *listener) Close() error {
	err := l.Listener.Close()
	l.wg.Wait()
	return err
}

// refuse answers a connection over a bound with the HTTP response answer and
// closes it; without a free slot for that, it closes it at once.
func (l *listener) refuse(c net.Conn, answer []byte) {
	select {
	case l.refusing <- struct{}{}:
	default:
		_ = c.Close()
		return
	}
	l.wg.Go(func() {
		defer func() { <-l.refusing }()
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(refusalLinger))
		// The answer goes after the request's head: a client that gets an
		// answer before it has sent its request takes it for a broken
		// connection (Go's: "unsolicited response on idle HTTP channel").
		if !readHead(c) {
			return
		}
		if _, err := c.Write(answer); err != nil {
			return
		}
		// The rest of the request is read, not left unread: closing a socket
		// with unread data sends an RST, and the client could lose the answer.
		if cw, ok := c.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(c, 64<<10))
	})
}

// readHead reads from c until the end of an HTTP request's head (a blank
// line), or 8 KB of it; false when c ends or its deadline passes before.
func readHead(c net.Conn) bool {
	var buf [8 << 10]byte
	n := 0
	for n < len(buf) {
		m, err := c.Read(buf[n:])
		n += m
		if bytes.Contains(buf[max(0, n-m-3):n], []byte("\r\n\r\n")) {
			return true
		}
		if err != nil {
			return false
		}
	}
	return true
}

// limitedConn is an accepted connection counted by a ConnLimit until it is
// closed.
type limitedConn struct {
	net.Conn
	limit *ConnLimit
	key   netip.Addr
	once  sync.Once
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.limit.release(c.key) })
	return err
}

// CloseWrite shuts down the writing side, as the TCP connection under it does
// (net/http uses it to close a connection gracefully).
func (c *limitedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// NetConn returns the connection under c.
func (c *limitedConn) NetConn() net.Conn { return c.Conn }
