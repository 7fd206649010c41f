package client

import (
	"context"
	"encoding/json"
	"errors"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-resume/mcp-resume/spec"
)

// Server-to-client requests (sampling, elicitation, roots, ping). A resumable
// request's server requests are sent again after a resume while unanswered, with
// the same id; each id is answered by one call of its handler, and the answer is
// written again whenever the request comes again. The ids of a Call with
// handlers of its own are its own: another Call's request with the same id (a
// server that numbers its requests per session, on a new session) is a new
// one.

func (c *Client) serverRequest(l *link, m *spec.Message, via []byte) {
	if m.Method == "ping" {
		l.write(spec.EncodeResponse(m.ID, json.RawMessage(`{}`)))
		return
	}
	var op *operation
	var a *answer
	var seen bool
	var msg []byte // the answer given already
	c.update(func(st *state) {
		op, _ = st.reg.owner(via, m.Params)
		key := string(m.ID)
		if op != nil && op.handles() {
			key = op.seen + key
		}
		a, seen = st.reg.served.getOrAdd(key, func() *answer { return new(answer) })
		msg = a.msg
	})
	if !seen {
		c.wg.Go(func() { c.answerOn(a, op, m) }) // the reader holds a count: Close waits
		return
	}
	if msg != nil && l.write(msg) { // asked again after a resume
		c.update(func(*state) { a.sent = true })
	}
}

// answerOn runs the handler of m, a server request of op's (nil: of no
// Call), keeps its answer in a and writes it on the current link.
func (c *Client) answerOn(a *answer, op *operation, m *spec.Message) {
	msg := c.answer(op, m)
	var l *link
	c.update(func(st *state) { a.msg, l = msg, st.conn.link })
	if l != nil && l.write(msg) {
		c.update(func(*state) { a.sent = true })
	}
}

// answer runs the handler for a server request of op's (nil: of no Call)
// and returns the response.
func (c *Client) answer(op *operation, m *spec.Message) []byte {
	ctx, cancel := c.handlerContext(op)
	defer cancel()
	res, e := c.respond(ctx, op, m.Method, m.Params)
	if e != nil {
		return spec.EncodeError(m.ID, e)
	}
	return spec.EncodeResponse(m.ID, res)
}

// handlerContext is the context of a handler that answers a request of op:
// one with the Call's values that ends with the Call or Close; Close's alone
// for a request of no Call.
func (c *Client) handlerContext(op *operation) (context.Context, context.CancelFunc) {
	if op == nil {
		return c.ctx, func() {}
	}
	ctx, cancel := context.WithCancel(op.ctx)
	stop := context.AfterFunc(c.ctx, cancel)
	return ctx, func() {
		stop()
		cancel()
	}
}

// respond answers a server's request of method with params (a request of its
// own, or an input request of an input_required result or of a task) for op
// (nil: of no Call): with op's OnRequest, else Options.OnRequest, else the
// typed handlers. It returns the result, or the error to answer with. An
// accepted elicitation of a typed handler gets the defaults of the fields its
// answer left out.
func (c *Client) respond(ctx context.Context, op *operation, method string, params json.RawMessage) (json.RawMessage, *spec.Error) {
	raw := c.opts.OnRequest
	if op != nil && op.opts.OnRequest != nil {
		raw = op.opts.OnRequest
	}
	if raw != nil {
		res, err := raw(ctx, method, params)
		if err != nil {
			var e *spec.Error
			if !errors.As(err, &e) {
				e = spec.NewError(spec.CodeInternalError, "", method+": "+err.Error())
			}
			return nil, e
		}
		return res, nil
	}
	var (
		res any
		err error
	)
	switch method {
	case "sampling/createMessage":
		if c.opts.Sampling == nil {
			return nil, notSupported(method)
		}
		var req mcpgo.CreateMessageRequest
		req.Method = method
		if err := json.Unmarshal(params, &req.CreateMessageParams); err != nil {
			return nil, invalid(method, err)
		}
		res, err = c.opts.Sampling(ctx, req)
	case "elicitation/create":
		if c.opts.Elicitation == nil {
			return nil, notSupported(method)
		}
		var req mcpgo.ElicitationRequest
		req.Method = method
		if err := json.Unmarshal(params, &req.Params); err != nil {
			return nil, invalid(method, err)
		}
		var er *mcpgo.ElicitationResult
		if er, err = c.opts.Elicitation(ctx, req); err == nil && er != nil {
			withDefaults(req.Params.RequestedSchema, er)
		}
		res = er
	case "roots/list":
		res = mcpgo.ListRootsResult{Roots: []mcpgo.Root{}}
	default:
		return nil, notSupported(method)
	}
	if err != nil {
		return nil, spec.NewError(spec.CodeInternalError, "", method+": "+err.Error())
	}
	b, err := json.Marshal(res)
	if err != nil {
		return nil, spec.NewError(spec.CodeInternalError, "", method+": "+err.Error())
	}
	return b, nil
}

func notSupported(method string) *spec.Error {
	return spec.NewError(spec.CodeMethodNotFound, "", "method not supported by this client: "+method)
}

func invalid(method string, err error) *spec.Error {
	return spec.NewError(spec.CodeInvalidParams, spec.ReasonInvalidParams, method+": "+err.Error())
}
