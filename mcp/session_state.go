package mcp

import (
	"fmt"
	"time"

	"github.com/mcp-resume/mcp-resume/internal/invariant"
)

// sessionState is what a session's goroutines share: its default stream and
// pump, whether it has ended, the requests it delivered, the calls it runs,
// the 2026 rounds its retries attached and the task streams it serves. It is
// read and changed only through connState.update, under one lock (the only
// one of the session), which re-checks its invariants after each change; the
// session's parts (attachments, sessionCalls, sessionTasks) keep none of it.
type sessionState struct {
	def      Stream        // for messages of no request (list changes); may be nil
	closed   bool          // shutdown has run: nothing is added any more
	pumpStop chan struct{} // closed to stop the session's pump; nil when none runs

	// attached: the requests delivered here, by id text; onStream (replay
	// mode only) lists the requests attached to each open stream, so that a
	// closing stream detaches its own without a scan of every request the
	// session carried; attachSweepAt: the size of attached at which gone
	// requests are swept out.
	attached      map[string]tracked
	onStream      map[Stream][]tracked
	attachSweepAt int

	// running: calls started here whose handler runs, by id text; retries:
	// 2026 rounds attached by retries here, by the retry's id text, swept out
	// once answered at retrySweepAt.
	running      map[string]*call
	retries      map[string]retried
	retrySweepAt int

	// taskStreams: tasks/stream requests running here, by the request's id
	// text.
	taskStreams map[string]taskStreamRef

	// early: ids of requests the client cancelled before they came (on
	// Streamable HTTP a cancel is a POST of its own, which may overtake the
	// POST of its call), with when: such a call is born cancelled. At most
	// maxEarlyCancels, each for earlyCancelFor.
	early map[string]time.Time
}

// Bounds of sessionState.early: what a client can make a session hold with
// cancels of requests it never sends.
const (
	maxEarlyCancels = 64
	earlyCancelFor  = time.Minute
)

// noteEarlyCancel records that the client cancelled request id before it came.
func (st *sessionState) noteEarlyCancel(id string, now time.Time) {
	if st.early == nil {
		st.early = make(map[string]time.Time)
	}
	if len(st.early) >= maxEarlyCancels {
		oldest, at := "", now
		for k, t := range st.early {
			if now.Sub(t) > earlyCancelFor {
				delete(st.early, k)
			} else if t.Before(at) {
				oldest, at = k, t
			}
		}
		if len(st.early) >= maxEarlyCancels {
			delete(st.early, oldest)
		}
	}
	st.early[id] = now
}

// takeEarlyCancel reports whether the client cancelled request id before it
// came (within earlyCancelFor), and forgets it.
func (st *sessionState) takeEarlyCancel(id string, now time.Time) bool {
	t, ok := st.early[id]
	if ok {
		delete(st.early, id)
	}
	return ok && now.Sub(t) <= earlyCancelFor
}

// update runs f on the session's state, under the session's lock, and checks
// the state's invariants after it. f must not block, nor call update.
func (c *connState) update(f func(st *sessionState)) { c.st.Update(f) }

// Check panics when the state breaks an invariant: a bug of the code that
// changed it, found at the change. Checks that visit every entry run in test
// binaries only.
func (st *sessionState) Check() {
	if len(st.early) > maxEarlyCancels {
		panic("mcp: more early cancels than maxEarlyCancels")
	}
	if st.closed && (st.running != nil || st.attached != nil || st.retries != nil || st.pumpStop != nil) {
		panic("mcp: a closed session still holds calls, requests, rounds or its pump")
	}
	if st.attachSweepAt < minSweep || st.retrySweepAt < minSweep {
		panic("mcp: a sweep threshold under minSweep")
	}
	if !invariant.Thorough() {
		return
	}
	for k, cl := range st.running {
		if k != string(cl.id) {
			panic(fmt.Sprintf("mcp: call %s is running under id %s", cl.id, k))
		}
	}
	for k, t := range st.attached {
		if id := string(t.r.ID()); k != id {
			panic(fmt.Sprintf("mcp: request %s is attached under id %s", id, k))
		}
	}
	for s, ts := range st.onStream {
		if _, closed := s.(closedStream); closed || len(ts) == 0 {
			panic("mcp: an empty or closed stream listed among the open ones")
		}
	}
}
