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

// answer is the client's answer to one server request.
type answer struct {
	msg  []byte // nil while the handler runs
	sent bool   // written on a link without error
}

// answers remembers the server requests seen, the newest max of them (server ids
// are never reused, so an old one will not come again).
type answers struct {
	max   int
	byID  map[string]*answer
	order []string // ring of keys, oldest at next
	next  int
}

func newAnswers(max int) *answers {
	return &answers{max: max, byID: map[string]*answer{}}
}

// getOrAdd returns the answer for key and whether it existed.
func (a *answers) getOrAdd(key string) (*answer, bool) {
	if v, ok := a.byID[key]; ok {
		return v, true
	}
	v := &answer{}
	if len(a.order) < a.max {
		a.order = append(a.order, key)
	} else {
		delete(a.byID, a.order[a.next])
		a.order[a.next] = key
		a.next = (a.next + 1) % a.max
	}
	a.byID[key] = v
	return v, false
}

// unsentLocked returns the answers that were never written, marking them sent:
// a resumed request that still waits for one asks again, and gets it again.
func (a *answers) unsentLocked() [][]byte {
	var out [][]byte
	for _, v := range a.byID {
		if v.msg != nil && !v.sent {
			v.sent = true
			out = append(out, v.msg)
		}
	}
	return out
}

// recent is a bounded set of strings, the newest max of them.
type recent struct {
	max   int
	set   map[string]struct{}
	order []string
	next  int
}

func newRecent(max int) *recent { return &recent{max: max, set: map[string]struct{}{}} }

// add adds s and reports whether it was new.
func (r *recent) add(s string) bool {
	if _, ok := r.set[s]; ok {
		return false
	}
	if len(r.order) < r.max {
		r.order = append(r.order, s)
	} else {
		delete(r.set, r.order[r.next])
		r.order[r.next] = s
		r.next = (r.next + 1) % r.max
	}
	r.set[s] = struct{}{}
	return true
}

func (c *Client) serverRequest(l *link, m *spec.Message, via []byte) {
	if m.Method == "ping" {
		c.write(l, spec.EncodeResponse(m.ID, json.RawMessage(`{}`)))
		return
	}
	c.mu.Lock()
	op, _ := c.ownerLocked(via, m.Params)
	key := string(m.ID)
	if op != nil && op.handles() {
		key = op.seen + key
	}
	a, seen := c.served.getOrAdd(key)
	msg := a.msg
	c.mu.Unlock()
	if seen {
		if msg != nil && c.write(l, msg) { // asked again after a resume
			c.mu.Lock()
			a.sent = true
			c.mu.Unlock()
		}
		return
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		msg := c.answer(op, m)
		c.mu.Lock()
		a.msg = msg
		l := c.link
		c.mu.Unlock()
		if l != nil && c.write(l, msg) {
			c.mu.Lock()
			a.sent = true
			c.mu.Unlock()
		}
	}()
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
