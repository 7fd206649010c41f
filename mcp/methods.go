package mcp

import (
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"

	"github.com/mcp-resume/mcp-resume/resume"
	"github.com/mcp-resume/mcp-resume/spec"
)

// adopt attaches r to st, one of this session's streams: it takes r over from any
// other stream and writes r's pending messages there.
// acked: the client sent an acknowledgement (0 included), so what the request's
// replay window holds after ack is written again.
func (c *connState) adopt(r resume.Handle, st Stream, snk Stream, ack uint64, acked bool) error {
	attach := r.Attach
	if acked {
		attach = r.AttachAcked
	}
	if err := attach(snk, ack); err != nil {
		return err
	}
	c.track(r, false, st, snk)
	return nil
}

// track records that r, attached to st (as snk), is delivered by this session:
// for its detach or cancel when the session (or st) ends, for cancellation by
// id, and for stream reconnects.
func (c *connState) track(r resume.Handle, hidden bool, st Stream, snk Stream) {
	c.trackAs(tracked{r: r, hidden: hidden, sink: snk}, st)
}

// trackAs is track for t, attached to st.
func (c *connState) trackAs(t tracked, st Stream) {
	r, hidden, snk := t.r, t.hidden, t.sink
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		if hidden && !t.task {
			r.Cancel()
		} else {
			r.Detach(snk)
		}
		return
	}
	if c.attached == nil {
		c.attached = make(map[string]tracked)
	}
	c.attached[string(r.ID())] = t
	if c.onStream != nil {
		c.onStream[st] = append(c.onStream[st], t)
	}
	// Requests that are gone leave the map in amortized sweeps, so a long-lived
	// session does not keep every request it ever carried.
	if len(c.attached) >= c.sweepAt {
		for k, a := range c.attached {
			if a.r.Gone() {
				delete(c.attached, k)
			}
		}
		c.sweepAt = max(minSweep, 2*len(c.attached))
	}
	c.mu.Unlock()
}

func ackOf(m *spec.RequestMeta) uint64 {
	if m == nil || m.Ack == nil {
		return 0
	}
	return *m.Ack
}

// getStatus answers requests/getStatus. It resets the request's timers and never
// delivers messages.
func (c *connState) getStatus(m *spec.Message, st Stream) {
	p, perr := spec.DecodeGetStatusParams(m.Params)
	if perr != nil {
		c.replyError(st, m.ID, perr)
		return
	}
	r, wait, err := c.lookup(p.ResumeToken, p.RequestID)
	if c.rateLimited(st, m.ID, wait) {
		return
	}
	if err == nil {
		err = r.Touch(ackOf(p.Meta))
	}
	if err != nil {
		c.replyError(st, m.ID, wireError(err))
		return
	}
	rs := r.Status()
	res := spec.GetStatusResult{RequestID: p.RequestID, HasPendingMessage: rs.HasPending, HasInputRequest: rs.HasInput}
	switch rs.State {
	case resume.StateProcessing:
		res.Status = spec.StatusProcessing
	case resume.StateCompleted:
		res.Status = spec.StatusCompleted
	case resume.StateFailed:
		res.Status = spec.StatusFailed
	case resume.StateCancelled:
		c.replyError(st, m.ID, wireError(resume.ErrCancelled))
		return
	default:
		c.replyError(st, m.ID, wireError(resume.ErrExpired))
		return
	}
	if rs.Dropped > 0 {
		res.Meta = map[string]any{spec.MetaDropped: rs.Dropped}
	}
	b, _ := json.Marshal(res)
	c.reply(st, spec.EncodeResponse(m.ID, b))
}

// resume answers requests/resume: the request named by the message's id and token is
// attached to st; its pending messages follow, then live ones, then its final
// response under the same id.
// after, when not 0, is what the transport knows the client has (Last-Event-ID
// on HTTP); the larger of it and the params' ack applies.
//
// A 2026-era resume (modern) gets its messages through a round, as its request's
// rounds do: a question the tool asks meanwhile answers it input_required.
func (c *connState) resume(m *spec.Message, st Stream, after uint64, modern bool) {
	p, perr := spec.DecodeResumeParams(m.Params)
	if perr != nil {
		c.replyError(st, m.ID, perr)
		return
	}
	r, wait, err := c.lookup(p.ResumeToken, m.ID)
	if c.rateLimited(st, m.ID, wait) {
		return
	}
	if err != nil {
		c.replyError(st, m.ID, wireError(err))
		return
	}
	snk := st
	if modern {
		rs := requestState{ID: m.ID, Token: p.ResumeToken}
		rd := &round{st: st, id: m.ID, orig: m.ID, state: rs.encode()}
		rd.gatherOn(c.s, r)
		snk = rd
	}
	// Validation and lookup answer in order with the connection's other messages;
	// the replay, which may be long, runs on its own goroutine.
	c.s.wg.Add(1)
	go func() {
		defer c.s.wg.Done()
		acked := p.Meta != nil && p.Meta.Ack != nil
		if err := c.adopt(r, st, snk, max(ackOf(p.Meta), after), acked); err != nil {
			c.replyError(st, m.ID, wireError(err))
			return
		}
		c.debug().Str("request", string(m.ID)).Msg("resumed")
	}()
}

// rejoin answers a tools/call sent again with the key of a call that is known
// (spec.MetaKey): the client lost the first one's connection, maybe before its
// resume policy came. The policy is written again, then everything the request
// holds (Request.AttachAll), as a resume would, but from its first message.
func (c *connState) rejoin(r resume.Handle, id spec.ID, key string, st Stream, modern bool) {
	snk := st
	if modern {
		rs := requestState{ID: id, Token: key}
		rd := &round{st: st, id: id, orig: id, state: rs.encode()}
		rd.gatherOn(c.s, r)
		snk = rd
	}
	p := spec.ResumePolicyParams{RequestID: id, ResumeToken: key, MaxWait: &c.s.caps.MaxWait, MinWait: &c.s.caps.MinWait}
	if err := st.Write(c.ctx, Message{Kind: KindNotification, Data: spec.AppendResumePolicy(make([]byte, 0, 192), &p)}); err != nil {
		return
	}
	c.s.wg.Add(1)
	go func() {
		defer c.s.wg.Done()
		if err := r.AttachAll(snk); err != nil {
			c.replyError(st, id, wireError(err))
			return
		}
		c.track(r, false, st, snk)
		c.debug().Str("request", string(id)).Msg("call sent again; attached")
	}()
}

// cancelled handles notifications/cancelled. A request attached to this connection,
// or one named with its resume token (our extension), is cancelled; anything else
// is ignored, as JSON-RPC allows no answer to a notification.
func (c *connState) cancelled(m *spec.Message) {
	p, err := spec.DecodeCancelledParams(m.Params)
	if err != nil {
		c.debug().Err(err).Msg("malformed notifications/cancelled; ignored")
		return
	}
	key := string(p.RequestID)
	if c.stopTaskStream(key) {
		return // the stream ends; its task runs on
	}
	c.mu.Lock()
	cl, r := c.running[key], c.attached[key].r
	c.mu.Unlock()
	if r == nil && cl != nil {
		cl.mu.Lock()
		req := cl.req
		cl.mu.Unlock()
		if req == nil {
			cl.cancel(errClientCancel)
			return
		}
		r = req
	}
	if r != nil {
		// Delivered by this session. (A request another session took over since
		// may still be named here; its client is the one that held the token.)
		r.Cancel()
		return
	}
	if p.ResumeToken != "" {
		r, wait, err := c.lookup(p.ResumeToken, p.RequestID)
		if wait > 0 {
			c.debug().Str("request", key).Msg("cancel by token while rate limited; ignored")
			return
		}
		if err == nil {
			r.Cancel()
			return
		}
	}
	c.debug().Str("request", key).Msg("cancel for a request not attached here; ignored")
}

// outgoing is a server-to-client request waiting for its answer.
type outgoing struct {
	req    *resume.Request // nil when sent directly (not resumable)
	seq    atomic.Uint64   // its number in req's outbox
	answer chan answer     // buffered, one answer
}

type answer struct {
	result json.RawMessage
	err    *spec.Error
}

// routeResponse hands a client's response (raw, as received) to the
// server-to-client request it answers, whichever connection it arrived on, or to
// the instance of the cluster that asked.
func (s *Server) routeResponse(c *connState, m *spec.Message, raw []byte) {
	if s.answer(m) {
		return
	}
	if inst := s.askedBy(m.ID); inst != "" {
		// A call to the instance that asked: not on the connection's read loop,
		// which must not wait for another instance (up to its call timeout).
		c.mu.Lock()
		closed := c.closed
		if !closed {
			c.wg.Go(func() { s.forwardAnswer(c, inst, m.ID, raw) })
		}
		c.mu.Unlock()
		if closed { // shutdown waits for c.wg already: forward here
			s.forwardAnswer(c, inst, m.ID, raw)
		}
		return
	}
	c.logger().Warn().Str("id", string(m.ID)).Msg("response to an unknown request id; dropped")
}

// answer hands m to the server-to-client request of this instance it answers,
// and reports whether there is one.
func (s *Server) answer(m *spec.Message) bool {
	v, ok := s.pending.LoadAndDelete(string(m.ID))
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
func (s *Server) askedBy(id spec.ID) string {
	if s.cluster == nil {
		return ""
	}
	var str string
	if json.Unmarshal(id, &str) != nil {
		return ""
	}
	rest, ok := strings.CutPrefix(str, "mr-")
	i := strings.LastIndexByte(rest, '-')
	if !ok || i <= 0 || rest[:i] == s.cluster.Self() {
		return ""
	}
	return rest[:i]
}

// forwardAnswer sends a client's response to the instance that asked.
func (s *Server) forwardAnswer(c *connState, inst string, id spec.ID, raw []byte) {
	if err := s.cluster.Forward(c.ctx, inst, raw); err != nil {
		c.logger().Warn().Err(err).Str("id", string(id)).Str("instance", inst).Msg("forwarding a response to the instance that asked; dropped")
		return
	}
	c.debug().Str("id", string(id)).Str("instance", inst).Msg("response forwarded to the instance that asked")
}

// peerAnswer takes a client's response that another instance forwarded
// (resume.Options.Answer).
func (s *Server) peerAnswer(data []byte) error {
	m, derr := spec.Decode(data)
	if derr != nil || m.Kind != spec.KindResponse {
		return errors.New("mcp: a forwarded answer is not a response")
	}
	if !s.answer(m) {
		return resume.ErrUnknown
	}
	return nil
}
