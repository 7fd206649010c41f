package http

import (
	"net/http"
	"sync"
	"time"

	"github.com/mcp-resume/mcp-resume/mcp"
)

// session is one Mcp-Session-Id: the core's session and the streams open on it.
type session struct {
	h    *Handler
	id   string
	core *mcp.Session

	// stateless: the session of one 2026-era request; it ends with its stream.
	stateless bool
	// principal and remote: whose it is, and the address that initialized it
	// (the scopes of the session bounds).
	principal, remote string

	mu      sync.Mutex // guards the fields below
	streams map[*stream]struct{}
	def     *stream     // the standalone GET stream, if open
	idle    *time.Timer // runs expire while no request's stream is open
	used    time.Time   // when it was created or a stream of it last ended
	// heard is when the client last sent a request on the session (a
	// message, a stream); keepalive comments on its streams do not count.
	heard time.Time
	ended bool
}

// touch notes that the client sent a request on the session.
func (s *session) touch() {
	s.mu.Lock()
	s.heard = time.Now()
	s.mu.Unlock()
}

// onlyDefaultLocked reports whether the session's one open stream is its
// standalone GET stream, which carries no request of the client: the session
// is idle unless its client sends something.
func (s *session) onlyDefaultLocked() bool {
	return s.def != nil && len(s.streams) == 1
}

// quietLeftLocked is how long the client may stay silent before the session
// has heard nothing for SessionIdle.
func (s *session) quietLeftLocked() time.Duration {
	return max(s.h.opts.SessionIdle-time.Since(s.heard), 0)
}

// newStream opens a stream on the session for the request with key (see idKey);
// nil when the session has ended.
func (s *session) newStream(w http.ResponseWriter, key string) *stream {
	st := newStream(s, w, key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return nil
	}
	s.streams[st] = struct{}{}
	if s.idle != nil {
		s.idle.Stop()
	}
	return st
}

// openDefault opens the session's standalone GET stream; nil when it already has
// one, or has ended.
func (s *session) openDefault(w http.ResponseWriter) *stream {
	st := newStream(s, w, "")
	st.json = false
	s.mu.Lock()
	if s.ended || s.def != nil {
		s.mu.Unlock()
		return nil
	}
	s.def = st
	s.streams[st] = struct{}{}
	if s.onlyDefaultLocked() { // the clock of a session that only listens
		s.idle.Reset(s.quietLeftLocked())
	}
	s.mu.Unlock()
	s.core.SetDefaultStream(st)
	return st
}

// streamDone runs when a stream's HTTP request is over: the core detaches what was
// attached to it, and a session left without streams starts its idle clock.
func (s *session) streamDone(st *stream) {
	st.end()
	s.core.StreamClosed(st)
	if s.stateless {
		s.end(false)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.streams, st)
	if s.def == st {
		s.def = nil
	}
	s.used = time.Now()
	switch {
	case s.ended:
	case len(s.streams) == 0:
		s.idle.Reset(s.h.opts.EmptySessionIdle)
	case s.onlyDefaultLocked():
		s.idle.Reset(s.quietLeftLocked())
	}
}

// lastUsed is when the session was last used, and whether it has an open
// stream (in use now).
func (s *session) lastUsed() (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.used, len(s.streams) > 0
}

// expire runs EmptySessionIdle after the session's last stream ended, and
// again every EmptySessionIdle while it has work: a session with no work is
// parked (a few hundred bytes until SessionIdle, taken up again by its client's
// next request); one that still has work when SessionIdle has passed since its
// last use ends. A session whose only open stream is its standalone GET
// stream ends when its client has sent nothing for SessionIdle: the stream
// closes, and its requests are detached as when a client goes away (the
// resumable ones run on, for maxWait). While a request's stream is open, it
// does not run.
func (s *session) expire() {
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return
	}
	if s.onlyDefaultLocked() {
		if left := s.quietLeftLocked(); left > 0 {
			s.idle.Reset(left)
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		s.h.forget(s)
		s.h.log.Debug().Str("session", s.id).Msg("session expired: its client sent nothing, with only its GET stream open")
		s.end(false)
		return
	}
	if len(s.streams) > 0 {
		s.mu.Unlock()
		return
	}
	quiet := time.Since(s.used)
	if p := s.core.Park(); p != nil {
		s.ended = true
		s.mu.Unlock()
		s.h.park(s, p)
		s.h.log.Debug().Str("session", s.id).Msg("session parked")
		return
	}
	if left := s.h.opts.SessionIdle - quiet; left > 0 {
		s.idle.Reset(min(s.h.opts.EmptySessionIdle, left))
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	s.h.forget(s)
	s.h.log.Debug().Str("session", s.id).Msg("session expired")
	s.end(false)
}

// end ends the session: its streams close, then the core session (cancel: the
// client asked, so its requests are cancelled).
func (s *session) end(cancel bool) {
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return
	}
	s.ended = true
	if s.idle != nil {
		s.idle.Stop()
	}
	streams := make([]*stream, 0, len(s.streams))
	for st := range s.streams {
		streams = append(streams, st)
	}
	s.mu.Unlock()
	for _, st := range streams {
		st.end()
		s.core.StreamClosed(st) // now, not when its goroutine gets to it
	}
	s.core.Close(cancel)
}
