package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-resume/mcp-resume/internal/mcptrace"
	"github.com/mcp-resume/mcp-resume/spec"
	"github.com/mcp-resume/mcp-resume/transport"
)

// read is a link's reader: the one goroutine that handles what the server sends
// on it. Callbacks run here, so they are ordered; the next link's reader starts
// only after this one returned. A message over the connection's size limit ends
// the link: what it was cannot be known, and an answer lost so would leave its
// call waiting for ever.
func (c *Client) read(l *link) {
	defer c.wg.Done()
	defer close(l.done)
	ir, tells := l.conn.(inboundReader)
	for {
		var in transport.Inbound
		var err error
		if tells {
			in, err = ir.ReadInbound(c.ctx)
		} else {
			in.Msg, err = l.conn.Read(c.ctx)
		}
		if err != nil {
			l.err = err
			return
		}
		if in.Lost {
			c.streamLost(l, in)
			continue
		}
		if err := c.handle(l, in.Msg, in.Via); err != nil {
			l.err = err
			_ = l.conn.Close()
			return
		}
	}
}

// inboundReader is a connection that says which request's stream carried
// each message, and reports the loss of one request's stream while it lives
// on (Streamable HTTP with ReportStreamLoss).
type inboundReader interface {
	ReadInbound(ctx context.Context) (transport.Inbound, error)
}

// handle dispatches one message, which the stream of request via carried
// (nil when the connection does not say); an error is a protocol violation
// that ends the link.
func (c *Client) handle(l *link, raw, via []byte) error {
	m, derr := spec.Decode(raw)
	if derr != nil {
		return &ProtocolError{Problem: derr.Message, Raw: raw}
	}
	switch m.Kind {
	case spec.KindResponse:
		c.response(l, m)
	case spec.KindNotification:
		c.notification(l, m, via)
	case spec.KindRequest:
		c.serverRequest(l, m, via)
	}
	return nil
}

// relatedTask is the task a message's params name in
// _meta["io.modelcontextprotocol/related-task"], or "".
func relatedTask(params json.RawMessage) string {
	if !bytes.Contains(params, []byte(spec.MetaRelatedTask)) {
		return ""
	}
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if json.Unmarshal(params, &p) != nil {
		return ""
	}
	var rt struct {
		TaskID string `json:"taskId"`
	}
	if raw, ok := p.Meta[spec.MetaRelatedTask]; !ok || json.Unmarshal(raw, &rt) != nil {
		return ""
	}
	return rt.TaskID
}

// response completes the call it answers; a response to no call in flight (a
// duplicate after a resume, an abandoned call) is dropped.
func (c *Client) response(l *link, m *spec.Message) {
	var e *spec.Error
	if m.Error != nil {
		e = new(spec.Error)
		if err := json.Unmarshal(m.Error, e); err != nil {
			*e = spec.Error{Code: spec.CodeInternalError, Message: fmt.Sprintf("undecodable error object %.200s", m.Error)}
		}
	}
	var cl *call
	var accepted func() // called before the call ends
	var err error       // the call's end, once accepted was called
	var refused, again bool
	var retry time.Duration
	c.update(func(st *state) {
		if cl = st.reg.calls[string(m.ID)]; cl == nil || cl.finished {
			cl = nil
			return
		}
		// A response says the server is there, and the link alive (the
		// backoff of the next reconnection starts over), unless it is the
		// refusal of a server that did not take the request (below): a link
		// whose every call is refused so is as good as one that failed.
		mine := !cl.internal && cl.link == l
		if e == nil {
			l.heard = l.heard || mine
			if accepted = cl.accepted(l); accepted == nil {
				cl.finish(m.Result, nil)
			}
			return
		}
		e.ID = cl.id
		if (e.Reason == spec.ReasonUnknownSession || e.Reason == spec.ReasonShuttingDown && !cl.resuming) && mine {
			// The server no longer knows the session (it restarted), or it
			// is stopping and takes no new call (a drain): it did not take
			// the request. The link goes; its loss settles the call with the
			// others (sent again, or resumed, on the next connection: on a
			// cluster behind a balancer, most likely another instance's).
			cl.unsent, refused = true, true
			return
		}
		l.heard = l.heard || mine
		err = e
		resume := cl.resuming && cl.link == l
		if resume {
			if wait, ok := cl.retryLater(e); ok {
				retry = wait
				return
			}
		}
		switch {
		case resume && e.Reason == spec.ReasonNotFound && cl.opts.Idempotent && cl.op != nil:
			// The server does not know the request: it started again
			// without a store, and lost it. A call that may run twice is
			// sent again, as a new one.
			cl.policy, cl.resuming, cl.unconfirmed, cl.lastSeq = nil, false, false, 0
			cl.sendAgain()
			again = true
			return
		case resume && resumeReasons[e.Reason]:
			err = &ResumeError{ID: cl.id, Err: e}
		case resume && e.Reason == spec.ReasonRateLimited:
			// The server did not check the token, again and again: the
			// resume was not taken up.
		default:
			accepted = cl.accepted(l)
		}
		if accepted == nil {
			cl.finish(nil, err)
		}
	})
	switch {
	case cl == nil:
	case refused:
		_ = l.conn.Close()
	case retry > 0:
		c.resumeAgain(cl, l, retry)
	case again:
		if f := cl.opts.Resent; f != nil {
			f()
		}
	case accepted != nil:
		accepted()
		var result json.RawMessage
		if e == nil {
			result = m.Result
		}
		c.update(func(*state) { cl.finish(result, err) })
	}
}

// resumeAgain sends cl's resume on l again after wait (retryLater), unless
// the call ends or moves to another link meanwhile (the next link resumes
// it).
func (c *Client) resumeAgain(cl *call, l *link, wait time.Duration) {
	c.wg.Go(func() { // the reader holds a count: Close waits
		if !l.pause(wait) {
			return
		}
		var msg []byte
		c.update(func(st *state) {
			if !cl.finished && cl.link == l && st.conn.link == l {
				msg = cl.resumeRequest()
			}
		})
		if msg != nil {
			l.write(msg)
		}
	})
}

func (c *Client) notification(l *link, m *spec.Message, via []byte) {
	switch m.Method {
	case spec.MethodResumePolicy:
		c.policy(m.Params)
	case spec.MethodProgress:
		c.progress(l, m)
	case spec.MethodTaskEvent:
		c.taskEvent(m.Params)
	case "notifications/message":
		c.log(l, m, via)
	default:
		c.other(m)
	}
}

// log delivers a log message once: to the handler of the Call it belongs to
// (CallOptions.OnLog), else Options.OnLog. One that belongs to a resumable
// request (it has a sequence number) and comes again after a resume is
// dropped: known by its text, within its Call or its request when the
// client can tell (another's may say the same at the same number).
func (c *Client) log(l *link, m *spec.Message, via []byte) {
	seq := spec.ReadSeq(m.Params)
	var f func(mcpgo.LoggingMessageNotificationParams)
	c.update(func(st *state) {
		op, cl := st.reg.owner(via, m.Params)
		if seq > 0 {
			key := string(m.Params)
			switch {
			case op.handles():
				key = op.seen + key
			case cl != nil:
				key = cl.key + key
			}
			if _, seen := st.reg.logs.getOrAdd(key, func() struct{} { return struct{}{} }); seen {
				return
			}
		}
		if cl != nil && cl.link == l && !cl.finished {
			cl.lastSeq = max(cl.lastSeq, seq)
			cl.heard = time.Now()
		}
		f = c.opts.OnLog
		if op != nil && op.opts.OnLog != nil {
			f = op.opts.OnLog
		}
	})
	if f != nil {
		var p mcpgo.LoggingMessageNotificationParams
		if json.Unmarshal(m.Params, &p) == nil {
			f(p)
		}
	}
}

func (c *Client) other(m *spec.Message) {
	if c.opts.OnNotification != nil {
		c.opts.OnNotification(m.Method, m.Params)
	}
}

// policy records a call's resume policy. A policy naming no call in flight is
// ignored; an unusable one fails its call.
func (c *Client) policy(params json.RawMessage) {
	var head struct {
		RequestID spec.ID `json:"requestId"`
	}
	if json.Unmarshal(params, &head) != nil || len(head.RequestID) == 0 {
		return // names no request of ours
	}
	var p struct {
		ResumeToken *string `json:"resumeToken"`
		MinWait     *int64  `json:"minWait"`
		MaxWait     *int64  `json:"maxWait"`
	}
	err := json.Unmarshal(params, &p)
	switch {
	case err != nil:
	case p.ResumeToken == nil:
		err = errors.New("no resumeToken")
	default:
		err = spec.CheckToken(*p.ResumeToken)
	}
	var problem string
	switch {
	case err != nil:
		problem = err.Error()
	case p.MinWait != nil && *p.MinWait < 0, p.MaxWait != nil && *p.MaxWait < 0:
		problem = "negative minWait or maxWait"
	case p.MinWait != nil && p.MaxWait != nil && *p.MinWait > *p.MaxWait:
		problem = "minWait above maxWait"
	}
	var pol Policy
	if problem == "" {
		pol = Policy{Token: *p.ResumeToken}
		if p.MinWait != nil {
			pol.MinWait = time.Duration(*p.MinWait) * time.Second
		}
		if p.MaxWait != nil {
			pol.MaxWait = time.Duration(*p.MaxWait) * time.Second
		}
	}
	var cl *call
	var f func(Policy)
	c.update(func(st *state) {
		if cl = st.reg.calls[string(head.RequestID)]; cl == nil || cl.finished || cl.internal {
			cl = nil
			return
		}
		if problem != "" {
			cl.finish(nil, &PolicyError{ID: cl.id, Problem: problem})
			return
		}
		pol.RequestID = cl.id
		cl.policy = &pol
		cl.heard = time.Now()
		if cl.span != nil {
			cl.span.AddEvent(mcptrace.EventResumable)
		}
		f = cl.opts.Policy
	})
	switch {
	case cl == nil:
	case problem != "":
		c.wg.Go(func() { c.cancelCall(cl, errors.New("invalid resume policy")) }) // the reader holds a count: Close waits
	case f != nil:
		f(pol)
	}
}

// progress delivers a call's progress once: by its token, which is the call's id,
// and its sequence number. The first that arrives on l after the call's resume
// there confirms it (ResumeAccepted), even one sent again.
func (c *Client) progress(l *link, m *spec.Message) {
	var p struct {
		ProgressToken json.RawMessage `json:"progressToken"`
		Progress      float64         `json:"progress"`
		Total         float64         `json:"total"`
		Message       string          `json:"message"`
	}
	if json.Unmarshal(m.Params, &p) != nil {
		c.other(m)
		return
	}
	seq := spec.ReadSeq(m.Params)
	var cl *call
	var op *operation // a Call that follows its task, whose progress this is
	var fresh bool    // a value not passed on yet
	var accepted func()
	var f func(Progress)
	c.update(func(st *state) {
		if cl = st.reg.calls[string(p.ProgressToken)]; cl == nil {
			if op = st.reg.tokens[string(p.ProgressToken)]; op != nil {
				// The progress of a Call's task, under its first request's token.
				fresh = seq == 0 || seq > op.lastSeq
				op.lastSeq = max(op.lastSeq, seq)
			}
			return
		}
		if cl.finished {
			return
		}
		if cl.policy == nil {
			cl.plain = true // the server runs it without a policy (so far)
		}
		l.heard = l.heard || cl.link == l
		accepted = cl.accepted(l)
		if fresh = seq == 0 || seq > cl.lastSeq; !fresh {
			return // a message sent again after a resume
		}
		cl.lastSeq = max(cl.lastSeq, seq)
		cl.heard = time.Now()
		if f = cl.opts.Progress; f != nil {
			cl.callbacks++
		}
	})
	switch {
	case cl == nil && op == nil:
		c.other(m)
		return
	case cl == nil:
		f = op.opts.Progress
	}
	if accepted != nil {
		accepted()
	}
	if f == nil || !fresh {
		return
	}
	f(Progress{Progress: p.Progress, Total: p.Total, Message: p.Message, Seq: seq})
	if cl != nil {
		c.update(func(*state) {
			if cl.callbacks--; cl.callbacks == 0 {
				c.quiet.Broadcast()
			}
		})
	}
}
