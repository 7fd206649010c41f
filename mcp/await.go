package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcp-resume/mcp-resume/resume"
	"github.com/mcp-resume/mcp-resume/spec"
)

// The await tool: the other half of a deferred answer (deferral.go).

// addAwaitTool adds the await tool to srv, under DefaultAwaitTool or, when
// srv has a tool of that name, the first free one with a suffix.
func (s *Server) addAwaitTool(srv *server.MCPServer) {
	name := DefaultAwaitTool
	for n := 2; srv.GetTool(name) != nil; n++ {
		name = fmt.Sprintf("%s_%d", DefaultAwaitTool, n)
	}
	s.awaitTool = name
	within := s.opts.AnswerWithin.Round(time.Second)
	srv.AddTool(mcp.NewTool(name,
		mcp.WithDescription(fmt.Sprintf("Gets the result of a tool call that was still running when it answered: its answer said so and gave a handle. "+
			"Call this with that handle: it waits up to %s and answers with the call's result, or says that the call is still running (call it again then). "+
			"A question the running tool asks comes with this call. Set cancel to true to stop the running call instead of waiting for it.", within)),
		mcp.WithTitleAnnotation("Await a tool call's result"),
		mcp.WithReadOnlyHintAnnotation(false),
		mcp.WithDestructiveHintAnnotation(false),
		mcp.WithIdempotentHintAnnotation(true),
		mcp.WithOpenWorldHintAnnotation(false),
		mcp.WithString("handle", mcp.Required(), mcp.Description("the handle the still-running call's answer gave")),
		mcp.WithBoolean("cancel", mcp.Description("stop the running call instead of waiting for its result")),
	), s.await)
	// The await call itself is never resumable nor deferred: it is a wait,
	// made again when it is lost.
	tools := maps.Clone(s.opts.Tools)
	if tools == nil {
		tools = map[string]Policy{}
	}
	tools[name] = Policy{Mode: Never}
	s.opts.Tools = tools
}

// await is the await tool's handler.
func (s *Server) await(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	cs, ok := server.ClientSessionFromContext(ctx).(*callSession)
	if !ok || cs.cl.c.s != s {
		return awaitError(spec.NewError(spec.CodeInvalidParams, spec.ReasonNotFound, "no deferred call is known here")), nil
	}
	c := cs.cl.c
	raw, _ := req.GetArguments()["handle"].(string)
	h, ok := decodeHandle(raw)
	if !ok {
		if wait := c.att.badToken(); wait > 0 {
			return awaitError(rateLimitError(wait)), nil
		}
		return awaitError(spec.NewError(spec.CodeInvalidParams, spec.ReasonInvalidHandle,
			"this is not a handle this server gave: use the handle of the deferred answer as it is")), nil
	}
	r, wait, err := c.att.lookup(h.Token, h.ID)
	switch {
	case wait > 0:
		return awaitError(rateLimitError(wait)), nil
	case err != nil:
		return awaitError(wireError(err)), nil
	}
	if req.GetBool("cancel", false) {
		r.Cancel()
		return mcp.NewToolResultText("The call was cancelled: its tool is stopped, and it has no result."), nil
	}
	var token any
	if req.Params.Meta != nil {
		token = req.Params.Meta.ProgressToken
	}
	return s.follow(ctx, cs.cl, r, h, token)
}

// follow attaches r, the deferred request h names, to the await call aw for
// up to Options.AnswerWithin: r's progress goes to aw's progress token, its
// log messages to aw's client, its questions are asked of aw's client and
// answered with what it says; its final response is the answer, and if none
// comes in time a deferred answer again.
func (s *Server) follow(ctx context.Context, aw *call, r resume.Handle, h deferHandle, progressToken any) (*mcp.CallToolResult, error) {
	sink := newAwaitSink()
	// Touched first: the await resets the request's clock, and a request of
	// another instance has its status from its owner then, not from the
	// shared store's record (which knows nothing of what is queued).
	_ = r.Touch(0)
	// A result delivered to an earlier await (the request ended, nothing is
	// queued) is written again from the request's replay window, as long as
	// the request keeps it (delivered-retention).
	again := false
	if st := r.Status(); st.State.Ended() && !st.HasPending {
		again = true
	}
	attach := r.Attach
	if again {
		attach = r.AttachAcked
	}
	if err := attach(sink, 0); err != nil {
		return awaitError(wireError(err)), nil
	}
	defer r.Detach(sink)
	defer sink.close()
	t := time.NewTimer(s.opts.AnswerWithin)
	defer t.Stop()
	var last *progressNote
	for {
		timeUp := false
		select {
		case <-sink.ready:
		case <-t.C:
			// Closed first: a write still under way fails, and the request
			// keeps its message for the next await; what was written is
			// taken below (a result written before the time came is this
			// answer).
			sink.close()
			r.Detach(sink)
			timeUp = true
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
		for _, m := range sink.take() {
			if again && m.Kind != KindResponse {
				continue // what was written before: only the result is wanted
			}
			switch m.Kind {
			case KindResponse:
				return resultOf(m.Data), nil
			case KindProgress:
				if n := s.forwardProgress(ctx, m.Data, progressToken); n != nil {
					last = n
				}
			case KindNotification:
				s.forwardNote(ctx, m.Data)
			case KindRequest:
				if timeUp {
					continue // kept until answered: the next await asks it
				}
				if err := s.relayQuestion(ctx, aw, m.Data); err != nil {
					return nil, err
				}
			}
		}
		if timeUp {
			_ = r.Touch(0) // the status of a request of another instance is its owner's now
			return s.deferredResult(h.Tool, h.encode(), time.Since(time.UnixMilli(h.Started)), last, r.Status().HasInput), nil
		}
	}
}

// forwardProgress sends the progress notification data (the deferred call's)
// to the await call's client under token (none: not sent), and returns what
// it said.
func (s *Server) forwardProgress(ctx context.Context, data []byte, token any) *progressNote {
	var n struct {
		Params map[string]any `json:"params"`
	}
	if json.Unmarshal(data, &n) != nil {
		return nil
	}
	note := noteOf(n.Params)
	if note == nil || token == nil {
		return note
	}
	params := map[string]any{"progressToken": token, "progress": note.Progress}
	if note.Total != nil {
		params["total"] = *note.Total
	}
	if note.Message != "" {
		params["message"] = note.Message
	}
	_ = s.srv.SendNotificationToClient(ctx, spec.MethodProgress, params)
	return note
}

// forwardNote sends a log message of the deferred call to the await call's
// client; other notifications stay with the call.
func (s *Server) forwardNote(ctx context.Context, data []byte) {
	var n struct {
		Method string         `json:"method"`
		Params map[string]any `json:"params"`
	}
	if json.Unmarshal(data, &n) != nil || n.Method != "notifications/message" {
		return
	}
	if meta, ok := n.Params["_meta"].(map[string]any); ok {
		delete(meta, spec.MetaSeq)
		if len(meta) == 0 {
			delete(n.Params, "_meta")
		}
	}
	_ = s.srv.SendNotificationToClient(ctx, n.Method, n.Params)
}

// relayQuestion asks the await call aw's client the deferred call's question
// data (a server-to-client request) and hands its answer, or its refusal, to
// the tool waiting for it (here, or on the instance that asked).
func (s *Server) relayQuestion(ctx context.Context, aw *call, data []byte) error {
	q, derr := spec.Decode(data)
	if derr != nil || q.Kind != spec.KindRequest {
		return nil
	}
	params := withoutSeq(q.Params)
	res, err := aw.ask(ctx, q.Method, params)
	if ctx.Err() != nil {
		return context.Cause(ctx) // the question stays, for the next await
	}
	var answer []byte
	if err != nil {
		e, ok := err.(*spec.Error)
		if !ok {
			e = spec.NewError(spec.CodeInternalError, "", err.Error())
		}
		answer = spec.EncodeError(q.ID, e)
	} else {
		answer = spec.EncodeResponse(q.ID, res)
	}
	m, derr := spec.Decode(answer)
	if derr != nil {
		return nil
	}
	s.answers.route(aw.c, m, answer)
	return nil
}

// withoutSeq returns params without the io.mcp-resume/seq of its _meta (the
// deferred request's numbering, not the await call's).
func withoutSeq(params json.RawMessage) json.RawMessage {
	var p map[string]json.RawMessage
	if json.Unmarshal(params, &p) != nil {
		return params
	}
	var meta map[string]json.RawMessage
	if json.Unmarshal(p["_meta"], &meta) != nil {
		return params
	}
	if _, ok := meta[spec.MetaSeq]; !ok {
		return params
	}
	delete(meta, spec.MetaSeq)
	if len(meta) == 0 {
		delete(p, "_meta")
	} else {
		p["_meta"], _ = json.Marshal(meta)
	}
	b, err := json.Marshal(p)
	if err != nil {
		return params
	}
	return b
}

// resultOf is the await call's answer for data, the deferred call's final
// response: its result as the tool gave it (content, structuredContent,
// isError), or its error as a tool error with its reason.
func resultOf(data []byte) *mcp.CallToolResult {
	var m struct {
		Result json.RawMessage `json:"result"`
		Error  *spec.Error     `json:"error"`
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return awaitError(spec.NewError(spec.CodeInternalError, "", "the call's result could not be read"))
	}
	if m.Error != nil {
		return awaitError(m.Error)
	}
	res, err := mcp.ParseCallToolResult(&m.Result)
	if err != nil {
		return awaitError(spec.NewError(spec.CodeInternalError, "", "the call's result could not be read: "+err.Error()))
	}
	if res.Meta != nil {
		delete(res.Meta.AdditionalFields, spec.MetaSeq)
		if res.Meta.ProgressToken == nil && len(res.Meta.AdditionalFields) == 0 {
			res.Meta = nil
		}
	}
	res.ResultType = ""
	return res
}

// awaitError is the await tool's answer for e: a tool error (isError) whose
// text says what happened, and its reason in _meta.
func awaitError(e *spec.Error) *mcp.CallToolResult {
	text := e.Message
	switch e.Reason {
	case spec.ReasonNotFound:
		text = "No running or finished call has this handle here (a wrong handle, another user's, or a call that is long gone): " + e.Message
	case spec.ReasonAcknowledged:
		text = "This call's result was already delivered by an earlier call of this tool, and is no longer kept."
	case spec.ReasonExpired:
		text = "This call's result is no longer kept (it was delivered a while ago, or nobody asked for it for too long), or the call expired unawaited."
	case spec.ReasonCancelled:
		text = "This call was cancelled."
	case spec.ReasonServerRestarted:
		text = "The server restarted while this call ran; it was not run again, and has no result."
	}
	res := mcp.NewToolResultError(text)
	if e.Reason != "" {
		res.Meta = &mcp.Meta{AdditionalFields: map[string]any{spec.MetaReason: string(e.Reason)}}
	}
	return res
}

// awaitSink is the Stream an await call attaches a deferred request to: what
// the request writes waits there, unbounded (it is what the request holds
// anyway), for the await call to take, until the await call is answered
// (close).
type awaitSink struct {
	mu     sync.Mutex
	msgs   []Message
	closed bool
	ready  chan struct{} // capacity 1: something waits
}

// errAwaitAnswered is the write error of an await call's sink once the call
// is answered: a request whose write fails keeps its message for its next
// sink. A request detached from the sink may still have a write under way
// (the engine checks its attachment before a write, not during it, and a
// request of another instance delivers through an inbox that closes without
// waiting): without the error, that message would count as delivered to a
// call that has answered.
var errAwaitAnswered = errors.New("mcp: the await call has answered")

func newAwaitSink() *awaitSink { return &awaitSink{ready: make(chan struct{}, 1)} }

func (w *awaitSink) Write(_ context.Context, m Message) error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return errAwaitAnswered
	}
	w.msgs = append(w.msgs, m)
	w.mu.Unlock()
	select {
	case w.ready <- struct{}{}:
	default:
	}
	return nil
}

// close makes every later write fail; what was written stays for take.
func (w *awaitSink) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
}

// take returns what waits.
func (w *awaitSink) take() []Message {
	w.mu.Lock()
	defer w.mu.Unlock()
	m := w.msgs
	w.msgs = nil
	return m
}
