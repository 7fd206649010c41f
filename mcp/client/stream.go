package client

import (
	"errors"
	"fmt"
	"time"

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
	var cl *call
	var takeUp bool
	st, taker := l.conn.(streamTaker)
	c.update(func(s *state) {
		if cl = s.reg.calls[string(in.Via)]; cl == nil || cl.finished || cl.link != l {
			cl = nil
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
		takeUp = taker && in.LastEventID != "" && cl.empty <= maxEmptyTakeUps
	})
	switch {
	case cl == nil:
	case takeUp:
		c.wg.Go(func() { // the reader holds a count: Close waits
			if !l.pause(takeUpDelay) {
				return
			}
			if err := st.Resume(in.Via, in.LastEventID, c.opts.StreamIdle); err != nil {
				c.stranded(cl, l, fmt.Errorf("taking up its stream: %w", err))
			}
		})
	default:
		c.stranded(cl, l, errStreamEnded)
	}
}

// errStreamEnded: a request's event stream ended before its answer, and could
// not be taken up.
var errStreamEnded = errors.New("its event stream ended before its answer")

// stranded settles cl, whose stream on l was lost for why while l lives on:
// as call.strand does, a resumable one resumed on l after takeUpDelay (the
// next link resumes it if l is lost meanwhile), for as long as its maxWait
// runs from the last message of it.
func (c *Client) stranded(cl *call, l *link, why error) {
	s := strandFailed
	var resent func()
	c.update(func(*state) {
		if cl.finished || cl.link != l {
			return
		}
		if wait := cl.maxWait(c.opts.MaxWait); cl.policy != nil && time.Since(cl.heard) > wait {
			cl.finish(nil, fmt.Errorf("%w: request %s not resumed within its maxWait %v: %v", ErrGaveUp, cl.id, wait, why))
			return
		}
		s, resent = cl.strand(why), cl.opts.Resent
	})
	switch {
	case s == strandResent && resent != nil:
		resent()
	case s == strandResumable:
		c.wg.Go(func() { c.resumeStranded(l, cl) })
	}
}

// resumeStranded sends cl's requests/resume on l after takeUpDelay, unless
// cl ended, or l was lost meanwhile (the next link resumes it).
func (c *Client) resumeStranded(l *link, cl *call) {
	if !l.pause(takeUpDelay) {
		return
	}
	var msg []byte
	var resumed func()
	c.update(func(st *state) {
		if cl.finished || cl.link != nil || st.conn.link != l {
			return
		}
		msg, resumed = cl.resumeOn(l), cl.opts.Resumed
	})
	if msg == nil {
		return
	}
	if resumed != nil {
		resumed()
	}
	l.write(msg)
}
