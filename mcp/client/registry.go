package client

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/mcp-resume/mcp-resume/internal/mcptrace"
)

// registry is what the client has in flight, and what the server's messages
// are matched to: the requests by id, the Calls with handlers of their own
// (which the server's messages of no known request may belong to: owner),
// the Calls that follow their task by the key of the request whose progress
// token the task's progress carries, the task streams by task id, the server
// requests answered and the log messages delivered.
type registry struct {
	calls   map[string]*call
	ops     map[*operation]struct{}
	tokens  map[string]*operation
	streams map[string]*taskStream
	served  *recent[*answer]  // server-to-client requests seen, by id
	logs    *recent[struct{}] // sequenced log messages delivered
}

func newRegistry() registry {
	return registry{
		calls: map[string]*call{}, ops: map[*operation]struct{}{}, tokens: map[string]*operation{},
		streams: map[string]*taskStream{}, served: newRecent[*answer](4096), logs: newRecent[struct{}](4096),
	}
}

// add registers cl, and reports false when the client is closed: cl is
// finished then, with ErrClosed.
func (st *state) add(cl *call) bool {
	if st.closed {
		cl.finish(nil, ErrClosed)
		return false
	}
	st.reg.calls[cl.key] = cl
	return true
}

// forget ends cl (ErrClosed, when it had not ended) and removes it.
func (st *state) forget(cl *call) {
	cl.finish(nil, ErrClosed)
	delete(st.reg.calls, cl.key)
}

// owner returns the Call a message of the server that names no request
// belongs to, and its request when the connection said which one (via: the
// request whose stream carried it): else the Call whose task it names
// (_meta io.modelcontextprotocol/related-task), else the only Call in flight
// with handlers of its own. Nil when none: on a connection that does not say
// (stdio, WebSocket), a message of several Calls' belongs to none.
func (r *registry) owner(via []byte, params json.RawMessage) (*operation, *call) {
	if via != nil {
		if cl := r.calls[string(via)]; cl != nil && !cl.internal {
			return cl.op, cl
		}
		return nil, nil
	}
	if len(r.ops) == 0 {
		return nil, nil
	}
	if task := relatedTask(params); task != "" {
		for op := range r.ops {
			if op.task == task {
				return op, nil
			}
		}
	}
	if len(r.ops) == 1 {
		for op := range r.ops {
			return op, nil
		}
	}
	return nil, nil
}

// install makes l the current link, and resumes on it every resumable call
// waiting for one, with its original id, its token and the last sequence
// number it holds. It returns the messages to write on l (the resumes, then
// the answers to server requests never written) and the calls' Resumed
// callbacks, to call before the resumes go out.
func (st *state) install(l *link, now time.Time) (msgs [][]byte, resumed []func()) {
	st.conn.link = l
	_, st.conn.headers = l.conn.(headerWriter)
	l.since = now
	close(st.conn.ready)
	for _, cl := range st.reg.calls {
		if cl.finished || !cl.sent || cl.link != nil || cl.policy == nil {
			continue
		}
		msgs = append(msgs, cl.resumeOn(l))
		if cl.opts.Resumed != nil {
			resumed = append(resumed, cl.opts.Resumed)
		}
	}
	return append(msgs, unsent(st.reg.served)...), resumed
}

// drop settles the calls of l, a link that ended: a call without a policy
// fails (ErrNotResumable), a resumable one waits for the next link (its
// maxWait counts from now when l lived liveLink), one that may be sent again
// will be. A protocol error (perr) fails every call of the link. It returns
// the longest minWait of the calls to resume, and the Resent callbacks of the
// calls to send again.
func (st *state) drop(l *link, perr *ProtocolError, now time.Time) (minWait time.Duration, resent []func()) {
	if st.conn.link == l {
		st.conn.link = nil
		st.conn.ready = make(chan struct{})
	}
	for _, cl := range st.reg.calls {
		if cl.finished || cl.link != l {
			continue
		}
		if cl.span != nil && perr == nil && !cl.internal {
			cl.span.AddEvent(mcptrace.EventConnectionLost)
		}
		if perr != nil {
			cl.finish(nil, perr)
			continue
		}
		switch cl.strand(l.err) {
		case strandResent:
			if f := cl.opts.Resent; f != nil {
				resent = append(resent, f)
			}
		case strandResumable:
			if now.Sub(l.since) >= liveLink {
				cl.heard = now
			}
			minWait = max(minWait, cl.policy.MinWait)
		}
	}
	return minWait, resent
}

// expire fails the resumable calls waiting past their maxWait (maxWait: the
// client's, for a policy that names none) and reports whether any call
// still needs a connection.
func (st *state) expire(now time.Time, maxWait time.Duration) bool {
	want := false
	for _, cl := range st.reg.calls {
		if cl.finished || cl.link != nil {
			continue
		}
		if !cl.sent {
			want = true
			continue
		}
		if wait := cl.maxWait(maxWait); now.After(cl.heard.Add(wait)) {
			cl.finish(nil, fmt.Errorf("%w: request %s not resumed within its maxWait %v: %v", ErrGaveUp, cl.id, wait, st.conn.lastErr))
			continue
		}
		want = true
	}
	return want
}

// answer is the client's answer to one server request.
type answer struct {
	msg  []byte // nil while the handler runs
	sent bool   // written on a link without error
}

// recent holds the newest max entries by key: past max, the oldest one
// added goes (server ids are never reused, so an old one will not come
// again).
type recent[V any] struct {
	max   int
	byKey map[string]V
	order []string // ring of keys, oldest at next
	next  int
}

func newRecent[V any](max int) *recent[V] {
	return &recent[V]{max: max, byKey: map[string]V{}}
}

// getOrAdd returns the entry of key, made by mk when there was none, and
// whether there was one.
func (r *recent[V]) getOrAdd(key string, mk func() V) (V, bool) {
	if v, ok := r.byKey[key]; ok {
		return v, true
	}
	v := mk()
	if len(r.order) < r.max {
		r.order = append(r.order, key)
	} else {
		delete(r.byKey, r.order[r.next])
		r.order[r.next] = key
		r.next = (r.next + 1) % r.max
	}
	r.byKey[key] = v
	return v, false
}

// unsent returns the answers that were never written, marking them sent:
// a resumed request that still waits for one asks again, and gets it again.
func unsent(answers *recent[*answer]) [][]byte {
	var out [][]byte
	for _, v := range answers.byKey {
		if v.msg != nil && !v.sent {
			v.sent = true
			out = append(out, v.msg)
		}
	}
	return out
}
