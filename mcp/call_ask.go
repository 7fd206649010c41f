package mcp

import (
	"context"
	"encoding/json"
	"strconv"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mcp-resume/mcp-resume/resume"
	"github.com/mcp-resume/mcp-resume/spec"
)

// asker is how a call's tool asks its client (mcp-go's SessionWithSampling,
// SessionWithElicitation and SessionWithRoots, for the callSession it is part of).
type asker struct{ cl *call }

// ask sends a server-to-client request for the call and waits for the client's
// answer or the call's end. When the call is resumable the request travels in its
// outbox: it is sent again after a resume, and getStatus reports it as input
// requested until it is answered.
func (cl *call) ask(ctx context.Context, method string, params any) (json.RawMessage, error) {
	s := cl.c.s
	if err := context.Cause(cl.ctx); err != nil {
		return nil, err // cancelled: its client is asked nothing more
	}
	p, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	if cl.modern != nil {
		// 2026-07-28 has no server-to-client requests: the question ends the
		// request's round as input_required (MRTR), which needs the call to be a
		// request of the engine, and a capability the client declared.
		if need, ok := cl.modern.allows(method); !ok {
			e := spec.NewError(spec.CodeMissingCapability, spec.ReasonMissingCapability,
				"the tool needs a client capability the request did not declare: "+method)
			e.RequiredCapabilities = need
			cl.update(func(l *callLife) { l.missing = e })
			return nil, e
		}
		if cl.step(evAsk).req == nil {
			return nil, spec.NewError(spec.CodeInternalError, "", "the request cannot wait for input")
		}
	}
	cl.due()
	id := spec.ID(strconv.Quote(s.idPrefix + strconv.FormatUint(s.nextID.Add(1), 10)))
	key := string(id)

	o := &outgoing{answer: make(chan answer, 1)}
	s.answers.pending.Store(key, o)
	defer s.answers.pending.Delete(key)
	cl.update(func(l *callLife) {
		// Where the question goes is decided under the call's lock, as for
		// its notifications: a promotion waits for the send.
		if o.req = l.req; o.req == nil {
			cl.c.send(cl.st, KindRequest, spec.EncodeRequest(id, method, p))
		}
	})
	if o.req != nil {
		_, err := o.req.Append(KindRequest, "", func(seq uint64) []byte {
			o.seq.Store(seq)
			return spec.EncodeRequestSeq(id, method, p, cl.stamp(seq))
		})
		if err != nil {
			return nil, err
		}
		if cl.kind.task() {
			keepStatus(o.req, "input_required")
			defer keepStatus(o.req, "working")
		}
		cl.taskStatus("input_required")
		defer cl.taskStatus("working")
	}
	select {
	case a := <-o.answer:
		if a.err != nil {
			return nil, a.err
		}
		return a.result, nil
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	case <-cl.ctx.Done():
		// The call ended: a question asked on a context that does not end
		// with it (mcp-go's with DetachTools, as it fulfils a 2025 client's
		// input_required after the tool) ends with it too.
		return nil, context.Cause(cl.ctx)
	}
}

// keepStatus records a task's new status among its messages, where its
// stream (tasks/stream) reads it as a status event. A task that has ended
// takes none.
func keepStatus(r *resume.Request, status string) {
	_, _ = r.Append(KindNotification, "", func(uint64) []byte {
		return spec.EncodeRequest(nil, spec.MethodTaskStatus, json.RawMessage(`{"status":"`+status+`"}`))
	})
}

// RequestSampling asks the client to sample (sampling/createMessage).
func (a asker) RequestSampling(ctx context.Context, req mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	res, err := askFor[mcp.CreateMessageResult](ctx, a.cl, string(mcp.MethodSamplingCreateMessage), req.CreateMessageParams, "sampling")
	if err != nil {
		return nil, err
	}
	if res.Content, err = mcp.ParseSamplingContent(res.Content); err != nil {
		return nil, err
	}
	return res, nil
}

// RequestElicitation asks the client for input (elicitation/create).
func (a asker) RequestElicitation(ctx context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	return askFor[mcp.ElicitationResult](ctx, a.cl, string(mcp.MethodElicitationCreate), req.Params, "elicitation")
}

// ListRoots asks the client for its roots (roots/list).
func (a asker) ListRoots(ctx context.Context, _ mcp.ListRootsRequest) (*mcp.ListRootsResult, error) {
	return askFor[mcp.ListRootsResult](ctx, a.cl, string(mcp.MethodListRoots), struct{}{}, "roots")
}

// askFor asks cl's client method with params, and decodes its answer, a T
// (what names it in the error of one that is not).
func askFor[T any](ctx context.Context, cl *call, method string, params any, what string) (*T, error) {
	raw, err := cl.ask(ctx, method, params)
	if err != nil {
		return nil, err
	}
	res := new(T)
	if err := json.Unmarshal(raw, res); err != nil {
		return nil, &spec.Error{Code: spec.CodeInvalidParams, Message: "malformed " + what + " result: " + err.Error()}
	}
	return res, nil
}
