package mcp

import (
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/mcp-resume/mcp-resume/resume"
	"github.com/mcp-resume/mcp-resume/spec"
)

// answers are the server-to-client requests of this instance waiting for their
// answers, and the routing of each answer a client sends: to the request it
// answers here, or to the instance of the cluster that asked.
type answers struct {
	s       *Server
	pending sync.Map // server-to-client request id (JSON text) -> *outgoing
}

// outgoing is a server-to-client request waiting for its answer.
type outgoing struct {
	req    *resume.Request // nil when sent directly (not resumable)
	seq    atomic.Uint64   // its number in req's outbox
	answer chan answer     // buffered, one answer
	// relayedTo is the session an await call last asked it of (a deferred
	// call's question), so that another await of that session does not ask
	// it again.
	relayedTo atomic.Pointer[connState]
}

type answer struct {
	result json.RawMessage
	err    *spec.Error
}

// route hands a client's response (raw, as received) to the
// server-to-client request it answers, whichever connection it arrived on, or to
// the instance of the cluster that asked.
func (as *answers) route(c *connState, m *spec.Message, raw []byte) {
	if as.deliver(m) {
		return
	}
	if inst := as.askedBy(m.ID); inst != "" {
		// A call to the instance that asked: not on the connection's read loop,
		// which must not wait for another instance (up to its call timeout).
		var closed bool
		c.update(func(st *sessionState) {
			if closed = st.closed; !closed {
				c.wg.Go(func() { as.forward(c, inst, m.ID, raw) })
			}
		})
		if closed { // shutdown waits for c.wg already: forward here
			as.forward(c, inst, m.ID, raw)
		}
		return
	}
	c.logger().Warn().Str("id", string(m.ID)).Msg("response to an unknown request id; dropped")
}

// deliver hands m to the server-to-client request of this instance it answers,
// and reports whether there is one.
func (as *answers) deliver(m *spec.Message) bool {
	v, ok := as.pending.LoadAndDelete(string(m.ID))
	if !ok {
		return false
	}
	o := v.(*outgoing)
	if o.req != nil {
		o.req.Resolve(o.seq.Load())
	}
	if m.Error != nil {
		e := &spec.Error{Code: spec.CodeInternalError, Message: "malformed error from the client"}
		_ = json.Unmarshal(m.Error, e)
		o.answer <- answer{err: e}
		return true
	}
	o.answer <- answer{result: m.Result}
	return true
}

// askedBy names the instance of the cluster that sent the server-to-client request
// id answers, when it is another one: its ids are "mr-<instance>-<n>".
func (as *answers) askedBy(id spec.ID) string {
	if as.s.cluster == nil {
		return ""
	}
	var str string
	if json.Unmarshal(id, &str) != nil {
		return ""
	}
	rest, ok := strings.CutPrefix(str, "mr-")
	i := strings.LastIndexByte(rest, '-')
	if !ok || i <= 0 || rest[:i] == as.s.cluster.Self() {
		return ""
	}
	return rest[:i]
}

// forward sends a client's response to the instance that asked.
func (as *answers) forward(c *connState, inst string, id spec.ID, raw []byte) {
	if err := as.s.cluster.Forward(c.ctx, inst, raw); err != nil {
		c.logger().Warn().Err(err).Str("id", string(id)).Str("instance", inst).Msg("forwarding a response to the instance that asked; dropped")
		return
	}
	c.debug().Str("id", string(id)).Str("instance", inst).Msg("response forwarded to the instance that asked")
}

// fromPeer takes a client's response that another instance forwarded
// (resume.Options.Answer).
func (as *answers) fromPeer(data []byte) error {
	m, derr := spec.Decode(data)
	if derr != nil || m.Kind != spec.KindResponse {
		return errors.New("mcp: a forwarded answer is not a response")
	}
	if !as.deliver(m) {
		return resume.ErrUnknown
	}
	return nil
}
