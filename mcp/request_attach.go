package mcp

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/mcp-resume/mcp-resume/resume"
	"github.com/mcp-resume/mcp-resume/spec"
)

// attachments are the requests a session delivered, and the token checks by
// which its client finds requests (lookup, with the failed check limit): every
// way into an attachment (requests/resume, a call sent again with its key, a
// stream reconnect, a task's stream) goes through here. What it changes is the
// session's state (sessionState.attached, onStream), through connState.update;
// limitKey is set before the session serves.
type attachments struct {
	c *connState
	// limitKey names the failed token check bucket this session spends from:
	// its principal's, or without authentication its remote address's.
	limitKey string
}

// adopt attaches r, found by lookup, to st, one of this session's streams (as
// snk): it takes r over from any other stream and writes r's pending messages
// there. acked: the client sent an acknowledgement (0 included), so what the
// request's replay window holds after ack is written again. hidden: see tracked.
func (at *attachments) adopt(r resume.Handle, st Stream, snk Stream, ack uint64, acked, hidden bool) error {
	attach := r.Attach
	if acked {
		attach = r.AttachAcked
	}
	if err := attach(snk, ack); err != nil {
		return err
	}
	at.track(r, hidden, st, snk)
	return nil
}

// reconnect attaches the request with id that this session delivered to st, with
// every message after sequence number after (Session.Reconnect). The session is
// its credential, so it names no token; an id it did not deliver is a failed
// token check like any other (lookup).
func (at *attachments) reconnect(id spec.ID, after uint64, st Stream) *spec.Error {
	r, wait, err := at.lookup("", id)
	if wait > 0 {
		return rateLimitError(wait)
	}
	if err != nil {
		return wireError(err)
	}
	var hidden bool
	at.c.update(func(st *sessionState) { hidden = st.attached[string(id)].hidden })
	// An acknowledgement, 0 included (the client has the stream's priming
	// event and nothing after it): what the replay window holds after it is
	// written again.
	if err := at.adopt(r, st, st, after, true, hidden); err != nil {
		return wireError(err)
	}
	return nil
}

// track records that r, attached to st (as snk), is delivered by this session:
// for its detach or cancel when the session (or st) ends, for cancellation by
// id, and for stream reconnects.
func (at *attachments) track(r resume.Handle, hidden bool, st Stream, snk Stream) {
	at.trackAs(tracked{r: r, hidden: hidden, sink: snk}, st)
}

// trackAs is track for t, attached to st.
func (at *attachments) trackAs(t tracked, st Stream) {
	r, hidden, snk := t.r, t.hidden, t.sink
	var closed bool
	at.c.update(func(s *sessionState) {
		if closed = s.closed; closed {
			return
		}
		if s.attached == nil {
			s.attached = make(map[string]tracked)
		}
		s.attached[string(r.ID())] = t
		if s.onStream != nil {
			s.onStream[st] = append(s.onStream[st], t)
		}
		// Requests that are gone leave the map in amortized sweeps, so a
		// long-lived session does not keep every request it ever carried.
		if len(s.attached) >= s.attachSweepAt {
			for k, a := range s.attached {
				if a.r.Gone() {
					delete(s.attached, k)
				}
			}
			s.attachSweepAt = max(minSweep, 2*len(s.attached))
		}
	})
	if !closed {
		return
	}
	if hidden && !t.task {
		r.Cancel()
	} else {
		r.Detach(snk)
	}
}

func ackOf(m *spec.RequestMeta) uint64 {
	if m == nil || m.Ack == nil {
		return 0
	}
	return *m.Ack
}

// getStatus answers requests/getStatus. It resets the request's timers and never
// delivers messages.
func (at *attachments) getStatus(m *spec.Message, st Stream) {
	at.c.answerByToken(m, st, func(q *byToken) ([]byte, *spec.Error) {
		p, perr := spec.DecodeGetStatusParams(m.Params)
		if perr != nil {
			return nil, perr
		}
		r, err := q.lookup(p.ResumeToken, p.RequestID)
		if err == nil {
			err = r.Touch(ackOf(p.Meta))
		}
		if err != nil {
			return nil, wireError(err)
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
			return nil, wireError(resume.ErrCancelled)
		default:
			return nil, wireError(resume.ErrExpired)
		}
		if rs.Dropped > 0 {
			res.Meta = map[string]any{spec.MetaDropped: rs.Dropped}
		}
		b, _ := json.Marshal(res)
		return b, nil
	})
}

// resume answers requests/resume: the request named by the message's id and token is
// attached to st; its pending messages follow, then live ones, then its final
// response under the same id.
// after, when not 0, is what the transport knows the client has (Last-Event-ID
// on HTTP); the larger of it and the params' ack applies.
//
// A 2026-era resume (mr, its envelope; nil for the 2025 era) gets its messages
// through a round, as its request's rounds do: a question the tool asks
// meanwhile answers it input_required (modernReq.sink).
//
// Its span covers the lookup and the attach, which writes what the request
// had queued; what comes later is on the request's own span.
func (at *attachments) resume(m *spec.Message, st Stream, after uint64, mr *modernReq) {
	c := at.c
	c.answerByToken(m, st, func(q *byToken) ([]byte, *spec.Error) {
		p, perr := spec.DecodeResumeParams(m.Params)
		if perr != nil {
			return nil, perr
		}
		r, err := q.lookup(p.ResumeToken, m.ID)
		if err != nil {
			return nil, wireError(err)
		}
		snk := mr.sink(c.s, st, m.ID, p.ResumeToken, r)
		// Validation and lookup answer in order with the connection's other
		// messages; the replay, which may be long, runs on its own goroutine.
		q.answerLater()
		c.s.wg.Go(func() {
			acked := p.Meta != nil && p.Meta.Ack != nil
			if err := at.adopt(r, st, snk, max(ackOf(p.Meta), after), acked, false); err != nil {
				q.fail(wireError(err))
				return
			}
			q.sp.end(nil)
			c.debug().Str("request", string(m.ID)).Msg("resumed")
		})
		return nil, nil
	})
}

// rejoin answers a tools/call sent again with the key of a call that is known
// (spec.MetaKey): the client lost the first one's connection, maybe before its
// resume policy came. The policy is written again, then everything the request
// holds (Request.AttachAll), as a resume would, but from its first message.
func (at *attachments) rejoin(r resume.Handle, id spec.ID, key string, st Stream, mr *modernReq) {
	c := at.c
	snk := mr.sink(c.s, st, id, key, r)
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
		at.track(r, false, st, snk)
		c.debug().Str("request", string(id)).Msg("call sent again; attached")
	}()
}

// limitKeys returns the buckets this session's failed token checks spend from:
// its own (none for a stateless session, which carries one request) and its
// principal's or remote address's.
func (at *attachments) limitKeys() (session, address string) {
	c := at.c
	if !c.stateless {
		session = c.sess.id
	}
	return session, at.limitKey
}

// lookup is a token check: it finds the request of token and id for this
// session's principal; with token "", the request with id that this session
// delivered (a stream reconnect). While the session is rate limited (failLimiter), the
// check is refused, with wait > 0 how long until it may check again, unless it
// names a request this session carries (it started it, and its handler runs, or
// has it attached): the session evidently holds that token already, so the check
// tells it nothing, and no failure of another session can lock an owner out of
// its own request. A failed check (not_found) is charged to the session and its
// address.
func (at *attachments) lookup(token string, id []byte) (r resume.Handle, wait time.Duration, err error) {
	c := at.c
	session, address := at.limitKeys()
	if token == "" {
		var t tracked
		var ok bool
		c.update(func(st *sessionState) { t, ok = st.attached[string(id)] })
		if ok {
			return t.r, 0, nil
		}
		if wait = c.s.fail.wait(session, address); wait > 0 {
			return nil, wait, nil
		}
		c.s.fail.fail(session, address)
		return nil, 0, resume.ErrUnknown
	}
	if wait = c.s.fail.wait(session, address); wait > 0 {
		if a, b := at.carried(id); a != nil || b != nil {
			if r, err := c.s.eng.LookupAs(token, id, c.principal); err == nil && (r == a || b != nil && r == resume.Handle(b)) {
				return r, 0, nil
			}
		}
		return nil, wait, nil
	}
	r, err = c.s.eng.LookupAs(token, id, c.principal)
	if errors.Is(err, resume.ErrUnknown) {
		c.s.fail.fail(session, address)
	}
	return r, 0, err
}

// badToken is a token check of something that is no token this server handed
// out (a malformed request state or task id): refused, with the wait, while the
// session is rate limited; otherwise charged as a failure (0).
func (at *attachments) badToken() time.Duration {
	c := at.c
	session, address := at.limitKeys()
	if w := c.s.fail.wait(session, address); w > 0 {
		return w
	}
	c.s.fail.fail(session, address)
	return 0
}

// carried returns the requests with id that this session carries: the one
// attached here and the one started here whose handler runs (nil when none).
func (at *attachments) carried(id []byte) (attached resume.Handle, running *resume.Request) {
	var cl *call
	var t tracked
	at.c.update(func(st *sessionState) { cl, t = st.running[string(id)], st.attached[string(id)] })
	if cl != nil {
		running = cl.request()
	}
	return t.r, running
}

// rateLimitError is the answer to a token check refused for wait.
func rateLimitError(wait time.Duration) *spec.Error {
	return spec.RateLimited(spec.ReasonRateLimited, "too many failed token checks; retry later", wait)
}
