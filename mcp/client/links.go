package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/mcp-resume/mcp-resume/internal/backoff"
	"github.com/mcp-resume/mcp-resume/transport"
)

// The connection and the reconnection: the link of the moment (linkState),
// the loop that replaces it when it ends, and the writes on it. What a lost
// or a new link does to the calls in flight is the registry's (state.drop,
// state.install).

// link is one connection with its reader.
type link struct {
	conn transport.Conn
	ctx  context.Context // the client's: ended by Close
	done chan struct{}   // closed when the reader returned
	err  error           // why the reader returned; read after done

	since time.Time // when it was installed; guarded by Client.st
	// heard: a progress notification or a response of one of the client's calls
	// arrived on it, so the server is there (with a kept Streamable HTTP
	// session, initialize is answered without it); guarded by Client.st.
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

// connect dials a new link and opens it with open (negotiate for the first,
// reopen for the others); the link's reader runs already.
func (c *Client) connect(ctx context.Context, open func(context.Context, *link) error) (*link, error) {
	ctx, cancel := context.WithTimeout(ctx, c.opts.ReconnectTimeout)
	defer cancel()
	conn, err := c.dial(ctx)
	if err != nil {
		return nil, fmt.Errorf("client: dial: %w", err)
	}
	l := &link{conn: conn, ctx: c.ctx, done: make(chan struct{})}
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

// install makes l the current link and resumes every resumable call waiting for
// one, with its original id, its token and the last sequence number it holds.
func (c *Client) install(l *link) {
	c.modern.Store(c.era.modern || l.modern)
	var msgs [][]byte
	var resumed []func()
	c.update(func(st *state) { msgs, resumed = st.install(l, time.Now()) })
	select {
	case <-c.demand:
	default:
	}
	// Before the resumes go out, so before anything the server kept for them.
	for _, f := range resumed {
		f()
	}
	for _, m := range msgs {
		if !l.write(m) {
			return
		}
	}
}

// write writes m on l; a failed write drops l (its reader then ends, and the loop
// reconnects). It reports whether the write succeeded.
func (l *link) write(m []byte) bool {
	if err := l.send(m, nil); err != nil {
		_ = l.conn.Close()
		return false
	}
	return true
}

// headerWriter is a connection that sends a message with HTTP headers of the
// client's (Streamable HTTP): the Mcp-Param-* headers of a tools/call.
type headerWriter interface {
	WriteWith(ctx context.Context, msg []byte, h http.Header) error
}

// send writes m on l, with the HTTP headers h (nil for none) on a
// connection that carries them; other connections get m alone.
func (l *link) send(m []byte, h http.Header) error {
	if hw, ok := l.conn.(headerWriter); ok && h != nil {
		return hw.WriteWith(l.ctx, m, h)
	}
	return l.conn.Write(l.ctx, m)
}

// pause waits d, and reports false when l or the client ended first.
func (l *link) pause(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-l.done:
	case <-l.ctx.Done():
	}
	return false
}

// current returns the link to send on, waiting up to ReconnectTimeout for one.
func (c *Client) current(ctx context.Context) (*link, error) {
	var l *link
	var ready chan struct{}
	var shut bool
	var lastErr error
	look := func(st *state) { l, ready, shut, lastErr = st.conn.link, st.conn.ready, st.closed, st.conn.lastErr }
	if c.update(look); l != nil && !shut {
		return l, nil
	}
	deadline := time.NewTimer(c.opts.ReconnectTimeout)
	defer deadline.Stop()
	for ; ; c.update(look) {
		switch {
		case shut:
			return nil, ErrClosed
		case l != nil:
			return l, nil
		}
		select {
		case c.demand <- struct{}{}:
		default:
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
		minWait, alive := c.lost(l)
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

// lost settles the calls of l, a link that ended (state.drop), and returns
// the longest minWait of the calls to resume, and whether the link proved
// alive: it lived liveLink, or something of its calls was heard on it.
func (c *Client) lost(l *link) (minWait time.Duration, alive bool) {
	_ = l.conn.Close()
	var perr *ProtocolError
	errors.As(l.err, &perr)
	var resent []func()
	c.update(func(st *state) {
		now := time.Now()
		minWait, resent = st.drop(l, perr, now)
		alive = l.heard || now.Sub(l.since) >= liveLink
	})
	for _, f := range resent {
		f()
	}
	return minWait, alive
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
			c.update(func(st *state) { st.conn.lastErr = err })
			continue
		}
		var closed bool
		if c.update(func(st *state) { closed = st.closed }); closed {
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
func (c *Client) wanted() (want bool) {
	c.update(func(st *state) { want = st.expire(time.Now(), c.opts.MaxWait) })
	return want || len(c.demand) > 0
}

// backoff is the wait before reconnect attempt (from 0): MinBackoff doubled
// per attempt up to MaxBackoff, jittered as every retry loop's pause is
// (clients that lost one server at once do not all come back at once).
func (c *Client) backoff(attempt int) time.Duration {
	return backoff.Jitter(backoff.Delay(c.opts.MinBackoff, c.opts.MaxBackoff, attempt))
}
