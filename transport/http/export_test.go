package http

import "weak"

// OpenStreams returns the streams open now on h's sessions, weakly: a test
// checks what lets go of them.
func OpenStreams(h *Handler) []weak.Pointer[stream] {
	h.mu.Lock()
	sessions := make([]*session, 0, len(h.sessions))
	for _, s := range h.sessions {
		sessions = append(sessions, s)
	}
	h.mu.Unlock()
	var out []weak.Pointer[stream]
	for _, s := range sessions {
		s.mu.Lock()
		for st := range s.streams {
			out = append(out, weak.Make(st))
		}
		s.mu.Unlock()
	}
	return out
}

// CloseIdle closes c's idle connections, as its silence detection does.
func CloseIdle(c *ClientConn) { c.client.CloseIdleConnections() }
