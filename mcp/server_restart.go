package mcp

import (
	"context"
	"sync"

	"github.com/mcp-resume/mcp-resume/resume"
	"github.com/mcp-resume/mcp-resume/spec"
)

// reruns runs again the restartable requests this instance recovered or
// claimed (resume.Engine.Restartable), each as a call with no connection.
type reruns struct {
	s  *Server
	mu sync.Mutex // guards restarted
	// restarted is the session of the requests run again (made on first use: a
	// claim may come at any time).
	restarted *connState
}

// run runs a restartable request again, recovered from a durable store after a
// restart (resume.Engine.Restartable): a call with no connection, on the request's
// own context, whose messages go to its outbox until a client resumes it.
func (rr *reruns) run(r *resume.Request) {
	s := rr.s
	m, derr := spec.Decode(r.Payload())
	if derr != nil || m.Kind != spec.KindRequest {
		s.log.Warn().Str("request", string(r.ID())).Msg("a restartable request's stored payload is not a request; cancelled")
		r.Cancel()
		return
	}
	c := rr.session()
	ctx, cancel := context.WithCancelCause(r.Context())
	cl := &call{c: c, id: r.ID(), raw: r.Payload(), ctx: ctx, cancel: cancel, pol: &noPolicy}
	cl.life.phase, cl.life.req = phaseRequest, r
	if d := r.Deadline(); !d.IsZero() {
		cl.life.plan().deadline = d
	}
	if r.Task() { // found by its task id: no sequence numbers in its messages
		cl.kind, cl.hidden = callTask, true
	}
	cl.sess = callSession{cl: cl, asker: asker{cl}}
	cl.span = rr.span(c, m, r)
	c.update(func(st *sessionState) { st.running[string(cl.id)] = cl })
	s.log.Info().Str("request", string(r.ID())).Msg("running a restartable request again")
	s.wg.Add(1)
	s.calls.Add(1)
	s.pool.run(func() {
		defer s.wg.Done()
		defer s.calls.Add(-1)
		cl.run(m, r.Payload())
	})
}

// session returns the session that requests run again after a restart
// belong to (they have no client until one resumes them).
func (rr *reruns) session() *connState {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	if rr.restarted == nil {
		rr.restarted = newConnState(rr.s, nil, false, nil)
		rr.restarted.sess.Initialize()
	}
	return rr.restarted
}

// all runs again the restartable requests the engine recovered or
// claimed.
func (rr *reruns) all() {
	s := rr.s
	if s.closed.Load() {
		return // the engine is closed: what it recovered was cancelled
	}
	for _, r := range s.eng.Restartable() {
		rr.run(r)
	}
}
