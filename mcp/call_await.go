package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcp-resume/mcp-resume/resume"
	"github.com/mcp-resume/mcp-resume/spec"
)

// The await tool: the other half of a deferred answer (call_deferral.go).

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
	s.SetPolicies(s.table.Load().policies())
}

// awaitPolicy is the await tool's: the await call itself is never resumable
// nor deferred: it is a wait, made again when it is lost.
var awaitPolicy = Policy{Mode: Never}

// await is the await tool's handler.
func (s *Server) await(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	s.awaiting.Add(1)
	defer s.awaiting.Add(-1)
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
	return s.follow(ctx, cs.cl, r, *h, token, awaitAck(req))
}

// awaitAck reads what an await call acknowledges of the deferred call, in its
// _meta["io.mcp-resume/ack"]: the last message (by the deferred call's
// sequence numbers, which the await's forwarded messages carry) its client
// holds; nil when it says nothing (a client that does not acknowledge).
func awaitAck(req mcp.CallToolRequest) *uint64 {
	if req.Params.Meta == nil {
		return nil
	}
	v, ok := req.Params.Meta.AdditionalFields[spec.MetaAck].(float64)
	if !ok || v < 0 || v != float64(uint64(v)) {
		return nil
	}
	ack := uint64(v)
	return &ack
}

// awaitPoll is how often an await waiting on a request looks whether another
// await took it over, and, for a request of another instance (which tells
// nothing of its end to a waiting follower), whether it ended.
const awaitPoll = time.Second

// follow attaches r, the deferred request h names, to the await call aw for
// up to Options.AnswerWithin, as its follower (resume.Request.AttachFollow):
// r's progress goes to aw's progress token and its log messages to aw's
// client as r writes them (written to aw's stream, they are delivered: the
// next await gets only what came after), its questions are asked of aw's
// client, its final response is the answer. When none comes in time, a
// deferred answer again. A cancel or an expiry of r, or another await taking
// it over, answers at once.
func (s *Server) follow(ctx context.Context, aw *call, r resume.Handle, h deferHandle, progressToken any, ack *uint64) (*mcp.CallToolResult, error) {
	sink := &awaitSink{aw: aw, token: progressToken, ready: make(chan struct{}, 1)}
	var err error
	if ack != nil {
		// A client that acknowledges (ours) says what it holds: the request
		// keeps the rest until a later await acknowledges it, so that a
		// message written to a stream that dies on the way comes again.
		err = r.AttachAcked(sink, *ack)
	} else {
		// h.Ack: what the call's own stream was written before its deferred
		// answer, which the client has since it has the handle; from here on
		// what is written to the await's client is delivered.
		err = r.AttachFollow(sink, h.Ack)
	}
	if err != nil {
		return awaitError(wireError(err)), nil
	}
	// Answered, the await takes nothing more: a write under way ends first
	// (close waits for it), so what went to aw's client is delivered and the
	// rest stays for the next await. Detaching a request of another instance
	// is a call to it: not before the answer.
	defer func() {
		sink.close()
		s.wg.Go(func() { r.Detach(sink) })
	}()
	var ended <-chan struct{}
	if rc, ok := r.(interface{ Context() context.Context }); ok {
		ended = rc.Context().Done()
	}
	poll := time.NewTicker(awaitPoll)
	defer poll.Stop()
	window := time.NewTimer(s.opts.AnswerWithin)
	defer window.Stop()
	for {
		select {
		case <-sink.ready:
			for _, m := range sink.take() {
				if m.Kind == KindResponse {
					return resultOf(m.Data), nil
				}
				if err := s.relayQuestion(ctx, aw, m.Data); err != nil {
					return nil, err
				}
			}
			continue
		case <-ended:
			ended = nil // a result on its way is the answer; an end without one is below
		case <-poll.C:
		case <-window.C:
			sink.close()
			for _, m := range sink.take() { // a result written before the time came is the answer
				if m.Kind == KindResponse {
					return resultOf(m.Data), nil
				}
			}
			return s.deferredResult(h.Tool, h.encode(), time.Since(time.UnixMilli(h.Started)), sink.lastProgress(), r.Status().HasInput), nil
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
		if e := s.awaitEnded(r, sink, ended != nil); e != nil {
			return e, nil
		}
	}
}

// awaitEnded is the answer of an await following r through sink when it can
// follow no more: r ended without a result (cancelled, expired), or another
// await took r over; nil while it waits on. known: r's end would have been
// seen (its context), so r is not asked about it.
func (s *Server) awaitEnded(r resume.Handle, sink *awaitSink, known bool) *mcp.CallToolResult {
	if !known {
		if err := r.Touch(0); err != nil && !errors.Is(err, resume.ErrUnreachable) {
			return awaitError(wireError(err))
		}
	}
	if !r.Attached(sink) && !r.Status().State.Ended() {
		return awaitError(spec.NewError(spec.CodeInvalidParams, spec.ReasonSuperseded,
			"another call of this tool with the same handle took the call over: its progress and result come there"))
	}
	return nil
}

// forwardProgress returns the params of the progress notification data (the
// deferred call's) for the await call's client, under token (nil when it has
// none), and what the notification said.
func forwardProgress(data []byte, token any, seq uint64) (json.RawMessage, *progressNote) {
	var n struct {
		Params map[string]any `json:"params"`
	}
	if json.Unmarshal(data, &n) != nil {
		return nil, nil
	}
	note := noteOf(n.Params)
	if note == nil || token == nil {
		return nil, note
	}
	params := map[string]any{"progressToken": token, "progress": note.Progress}
	if note.Total != nil {
		params["total"] = *note.Total
	}
	if note.Message != "" {
		params["message"] = note.Message
	}
	if seq > 0 {
		// The deferred call's number of the message: a client that
		// acknowledges says, in its next await, what it holds.
		params["_meta"] = map[string]any{spec.MetaSeq: seq}
	}
	p, err := json.Marshal(params)
	if err != nil {
		return nil, note
	}
	return p, note
}

// forwardNote returns the params of a log message of the deferred call for
// the await call's client, its _meta (with the deferred call's number of the
// message) as it is; nil for other notifications, which stay with the call.
func forwardNote(data []byte) json.RawMessage {
	var n struct {
		Method string         `json:"method"`
		Params map[string]any `json:"params"`
	}
	if json.Unmarshal(data, &n) != nil || n.Method != "notifications/message" {
		return nil
	}
	p, err := json.Marshal(n.Params)
	if err != nil {
		return nil
	}
	return p
}

// relayQuestion asks the await call aw's client the deferred call's question
// data (a server-to-client request). A 2025-era client is asked it as it is,
// under its own id, and the await goes on: the client's answer, whenever it
// comes, goes to the tool that asked (here, or on the instance that asked),
// as any answer does. A 2026-era await has no server-to-client requests: the
// question is its round's input_required answer, and the answer of the retry
// is handed to the tool.
func (s *Server) relayQuestion(ctx context.Context, aw *call, data []byte) error {
	q, derr := spec.Decode(data)
	if derr != nil || q.Kind != spec.KindRequest {
		return nil
	}
	params := withoutSeq(q.Params)
	if aw.modern == nil {
		// A question this session was asked already (by an await that
		// another took over) is not asked again: its answer is on its way.
		var o *outgoing
		if v, ok := s.answers.pending.Load(string(q.ID)); ok {
			if o = v.(*outgoing); o.relayedTo.Load() == aw.c {
				return nil
			}
		}
		if err := aw.emit(KindRequest, q.ID, q.Method, params); err != nil {
			return fmt.Errorf("mcp: relaying a question: %w", err)
		}
		if o != nil {
			o.relayedTo.Store(aw.c)
		}
		return nil
	}
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

// awaitSink is the Stream an await call attaches a deferred request to, as
// its follower: progress and log messages are written on to the await call's
// client as they come (a write that fails there fails here, and the request
// keeps the message for the next await); questions and the final response
// wait for the await call to take them. Once the await call is answered
// (close), every write fails.
type awaitSink struct {
	aw    *call
	token any           // the await call's progress token (nil: its client wants no progress)
	ready chan struct{} // capacity 1: something waits

	mu     sync.Mutex // guards the fields below; held through a write to the await call's client
	msgs   []Message
	last   *progressNote
	isDone bool
}

// errAwaitAnswered is the write error of an await call's sink once the call
// is answered: a request whose write fails keeps its message for its next
// sink.
var errAwaitAnswered = errors.New("mcp: the await call has answered")

func (w *awaitSink) Write(ctx context.Context, m Message) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.isDone {
		return errAwaitAnswered
	}
	switch m.Kind {
	case KindProgress:
		params, note := forwardProgress(m.Data, w.token, m.Seq)
		if note != nil {
			w.last = note
		}
		if params == nil {
			return nil // its client asked for no progress: nothing to tell it
		}
		return w.aw.emit(KindProgress, nil, spec.MethodProgress, params)
	case KindNotification:
		if params := forwardNote(m.Data); params != nil {
			return w.aw.emit(KindNotification, nil, "notifications/message", params)
		}
		return nil
	}
	w.msgs = append(w.msgs, m)
	select {
	case w.ready <- struct{}{}:
	default:
	}
	return nil
}

// close makes every later write fail, once a write under way has ended; what
// waits stays for take.
func (w *awaitSink) close() {
	w.mu.Lock()
	w.isDone = true
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

// lastProgress is the latest progress the request reported to this await.
func (w *awaitSink) lastProgress() *progressNote {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last
}
