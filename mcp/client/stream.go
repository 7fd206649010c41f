package client

import (
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-resume/mcp-resume/internal/mcptrace"
	"github.com/mcp-resume/mcp-resume/transport"
)

// The loss of one request's stream on a connection that lives on (Streamable
// HTTP with ReportStreamLoss: a POST's event stream cut, or silent for the
// Silence window, while the session and the other requests' streams go on).
// Only that request is settled: its stream is taken up with the server's own
// means when it offered them (a GET with Last-Event-ID, 2025-11-25
// resumability), else the request is resumed on the same connection
// (requests/resume, when the server made it resumable), sent again (with its
// key, or when Idempotent), or fails with ErrNotResumable.

// takeUpDelay is waited before a lost stream is taken up or its request
// resumed on the same connection, so that a server that ends every stream at
// once is not asked in a tight loop.
const takeUpDelay = 200 * time.Millisecond

// maxEmptyTakeUps bounds the take-ups in a row of one request's stream that
// deliver nothing: a taken-up stream silent for Options.StreamIdle is closed
// and taken up again, so a quiet request survives this many idle windows
// before it is settled as lost.
const maxEmptyTakeUps = 20

// streamTaker is a connection that takes up a request's lost event stream
// with a GET carrying Last-Event-ID (Streamable HTTP): what the server replays
// and sends after comes as on the lost stream, whose loss, and that of a
// taken-up stream silent for idle, is reported again.
type streamTaker interface {
	Resume(id []byte, lastEventID string, idle time.Duration) error
}

// streamLost settles the request whose stream on l the connection reported
// lost (in.Via).
func (c *Client) streamLost(l *link, in transport.Inbound) {
	c.mu.Lock()
	cl := c.calls[string(in.Via)]
	if cl == nil || cl.finished || cl.link != l {
		c.mu.Unlock()
		return
	}
	if in.Delivered > 0 {
		cl.empty = 0
	} else {
		cl.empty++
	}
	if cl.span != nil && !cl.internal {
		cl.span.AddEvent(mcptrace.EventConnectionLost)
	}
	if st, ok := l.conn.(streamTaker); ok && in.LastEventID != "" && cl.empty <= maxEmptyTakeUps {
		c.wg.Go(func() { // the reader holds a count: Close waits
			if !c.pause(l, takeUpDelay) {
				return
			}
			if err := st.Resume(in.Via, in.LastEventID, c.opts.StreamIdle); err != nil {
				c.stranded(cl, l, fmt.Errorf("taking up its stream: %w", err))
			}
		})
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	c.stranded(cl, l, errStreamEnded)
}

// errStreamEnded: a request's event stream ended before its answer, and could
// not be taken up.
var errStreamEnded = errors.New("its event stream ended before its answer")

// stranded settles cl, whose stream on l was lost for why while l lives on:
// as strandLocked does, a resumable one resumed on l after takeUpDelay (the
// next link resumes it if l is lost meanwhile), for as long as its maxWait
// runs from the last message of it.
func (c *Client) stranded(cl *call, l *link, why error) {
	c.mu.Lock()
	if cl.finished || cl.link != l {
		c.mu.Unlock()
		return
	}
	if cl.policy != nil && time.Since(cl.heard) > c.maxWait(cl) {
		c.finishLocked(cl, nil, fmt.Errorf("%w: request %s not resumed within its maxWait %v: %v", ErrGaveUp, cl.id, c.maxWait(cl), why))
		c.mu.Unlock()
		return
	}
	s := c.strandLocked(cl, why)
	resent := cl.opts.Resent
	c.mu.Unlock()
	switch s {
	case strandResent:
		if resent != nil {
			resent()
		}
	case strandResumable:
		c.wg.Go(func() { c.resumeOn(l, cl) })
	}
}

// resumeOn sends cl's requests/resume on l after takeUpDelay, unless cl ended,
// or l was lost meanwhile (the next link resumes it).
func (c *Client) resumeOn(l *link, cl *call) {
	if !c.pause(l, takeUpDelay) {
		return
	}
	c.mu.Lock()
	if cl.finished || cl.link != nil || c.link != l {
		c.mu.Unlock()
		return
	}
	cl.link, cl.resuming, cl.unconfirmed, cl.retries = l, true, true, 0
	msg := c.resumeLocked(cl)
	if cl.span != nil {
		cl.span.AddEvent(mcptrace.EventResumeSent, trace.WithAttributes(mcptrace.Ack.Int64(int64(cl.lastSeq))))
	}
	resumed := cl.opts.Resumed
	c.mu.Unlock()
	if resumed != nil {
		resumed()
	}
	c.write(l, msg)
}

// pause waits d, and reports false when l or the client ended first.
func (c *Client) pause(l *link, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-l.done:
	case <-c.ctx.Done():
	}
	return false
}

// maxWait is how long cl, a resumable call, is tried without a message of it.
// c.mu is held.
func (c *Client) maxWait(cl *call) time.Duration {
	if cl.policy != nil && cl.policy.MaxWait > 0 {
		return cl.policy.MaxWait
	}
	return c.opts.MaxWait
}
