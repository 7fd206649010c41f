package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-resume/mcp-resume/internal/mcptrace"
	"github.com/mcp-resume/mcp-resume/spec"
)

// read is a link's reader: the one goroutine that handles what the server sends
// on it. Callbacks run here, so they are ordered; the next link's reader starts
// only after this one returned.
func (c *Client) read(l *link) {
	defer c.wg.Done()
	defer close(l.done)
	for {
		raw, err := l.conn.Read(c.ctx)
		if err != nil {
			l.err = err
			return
		}
		if err := c.handle(l, raw); err != nil {
			l.err = err
			_ = l.conn.Close()
			return
		}
	}
}

// handle dispatches one message; an error is a protocol violation that ends the
// link.
func (c *Client) handle(l *link, raw []byte) error {
	m, derr := spec.Decode(raw)
	if derr != nil {
		return &ProtocolError{Problem: derr.Message, Raw: raw}
	}
	switch m.Kind {
	case spec.KindResponse:
		c.response(l, m)
	case spec.KindNotification:
		c.notification(l, m)
	case spec.KindRequest:
		c.serverRequest(l, m)
	}
	return nil
}

// response completes the call it answers; a response to no call in flight (a
// duplicate after a resume, an abandoned call) is dropped.
func (c *Client) response(l *link, m *spec.Message) {
	c.mu.Lock()
	cl := c.calls[string(m.ID)]
	if cl == nil || cl.finished {
		c.mu.Unlock()
		return
	}
	if !cl.internal && cl.link == l {
		l.heard = true
	}
	if m.Error == nil {
		if f := acceptedLocked(cl, l); f != nil {
			c.mu.Unlock()
			f()
			c.mu.Lock()
		}
		c.finishLocked(cl, m.Result, nil)
		c.mu.Unlock()
		return
	}
	var e spec.Error
	if err := json.Unmarshal(m.Error, &e); err != nil {
		e = spec.Error{Code: spec.CodeInternalError, Message: fmt.Sprintf("undecodable error object %.200s", m.Error)}
	}
	e.ID = cl.id
	var err error = &e
	switch resume := cl.resuming && cl.link == l; {
	case resume && c.retryLaterLocked(cl, l, &e):
		c.mu.Unlock()
		return
	case resume && resumeReasons[e.Reason]:
		err = &ResumeError{ID: cl.id, Err: &e}
	case resume && e.Reason == spec.ReasonRateLimited:
		// The server did not check the token, again and again: the resume was
		// not taken up.
	default:
		if f := acceptedLocked(cl, l); f != nil {
			c.mu.Unlock()
			f()
			c.mu.Lock()
		}
	}
	c.finishLocked(cl, nil, err)
	c.mu.Unlock()
}

func (c *Client) notification(l *link, m *spec.Message) {
	switch m.Method {
	case spec.MethodResumePolicy:
		c.policy(m.Params)
	case spec.MethodProgress:
		c.progress(l, m)
	case spec.MethodTaskEvent:
		c.taskEvent(m.Params)
	case "notifications/message":
		if seq := spec.ReadSeq(m.Params); seq > 0 {
			c.mu.Lock()
			dup := !c.logs.add(string(m.Params))
			c.mu.Unlock()
			if dup {
				return
			}
		}
		if c.opts.OnLog != nil {
			var p mcpgo.LoggingMessageNotificationParams
			if json.Unmarshal(m.Params, &p) == nil {
				c.opts.OnLog(p)
			}
		}
	default:
		c.other(m)
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
	c.mu.Lock()
	cl := c.calls[string(head.RequestID)]
	if cl == nil || cl.finished || cl.internal {
		c.mu.Unlock()
		return
	}
	if problem != "" {
		c.finishLocked(cl, nil, &PolicyError{ID: cl.id, Problem: problem})
		c.mu.Unlock()
		c.wg.Go(func() { c.cancelCall(cl, errors.New("invalid resume policy")) }) // the reader holds a count: Close waits
		return
	}
	pol := Policy{RequestID: cl.id, Token: *p.ResumeToken}
	if p.MinWait != nil {
		pol.MinWait = time.Duration(*p.MinWait) * time.Second
	}
	if p.MaxWait != nil {
		pol.MaxWait = time.Duration(*p.MaxWait) * time.Second
	}
	cl.policy = &pol
	cl.heard = time.Now()
	if cl.span != nil {
		cl.span.AddEvent(mcptrace.EventResumable)
	}
	f := cl.opts.Policy
	c.mu.Unlock()
	if f != nil {
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
	c.mu.Lock()
	cl := c.calls[string(p.ProgressToken)]
	if cl == nil {
		c.mu.Unlock()
		c.other(m)
		return
	}
	if cl.finished {
		c.mu.Unlock()
		return
	}
	if cl.policy == nil {
		cl.plain = true // the server runs it without a policy (so far)
	}
	if cl.link == l {
		l.heard = true
	}
	accepted := acceptedLocked(cl, l)
	if seq > 0 && seq <= cl.lastSeq {
		c.mu.Unlock()
		if accepted != nil {
			accepted()
		}
		return // a message sent again after a resume
	}
	if seq > 0 {
		cl.lastSeq = seq
	}
	cl.heard = time.Now()
	f := cl.opts.Progress
	c.mu.Unlock()
	if accepted != nil {
		accepted()
	}
	if f != nil {
		f(Progress{Progress: p.Progress, Total: p.Total, Message: p.Message, Seq: seq})
	}
}
