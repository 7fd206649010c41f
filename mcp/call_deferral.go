package mcp

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-resume/mcp-resume/spec"
)

// Deferred answers (Options.AnswerWithin). Clients stop waiting for a tool call
// on their own clock (60 s in the TypeScript SDK and the clients built on it),
// whatever the server does meanwhile. A tools/call still running after
// AnswerWithin is answered in time with a normal CallToolResult that says so
// and names the await tool with the arguments to call it with (a handle: the
// request's id and token, a secret bound to the caller's principal); the call
// goes on as a detached request of the engine, where it survives the client's
// disconnect, a restart on a durable store and the loss of an instance, as any
// resumable request does. The await tool (call_await.go) follows the request for
// up to AnswerWithin: its progress to the await call's progress token, its
// questions to the await call's client, its result as the await call's
// result; or it answers with another deferred answer.

// DefaultAwaitTool is the name of the await tool, unless the server has a
// tool of that name (then a suffix _2, _3 ... is added).
const DefaultAwaitTool = "await_tool_result"

// handlePrefix starts every handle (a deferred call's, for the await tool).
const handlePrefix = "dh1."

// deferHandle is what a handle carries: the request's id, its token, and for
// the deferred answers of the await tool the name of its tool and when the
// call started (unix milliseconds).
type deferHandle struct {
	ID      spec.ID `json:"i"`
	Token   string  `json:"t"`
	Tool    string  `json:"n,omitempty"`
	Started int64   `json:"s,omitempty"`
	// Ack is the last message of the call written to its client before the
	// deferred answer that gave this handle, on the same stream: the client
	// that holds the handle has it (an await acknowledges it).
	Ack uint64 `json:"a,omitempty"`
}

func (h deferHandle) encode() string { return encodeRef(handlePrefix, &h) }

func decodeHandle(s string) (*deferHandle, bool) { return decodeRef[deferHandle](handlePrefix, s) }

// progressNote is the latest progress a call reported, as the deferred answer
// tells it.
type progressNote struct {
	Progress float64  `json:"progress"`
	Total    *float64 `json:"total,omitempty"`
	Message  string   `json:"message,omitempty"`
}

// noteOf reads a progress notification's params (numbers of any Go type, as
// a tool passed them, or float64 as decoded).
func noteOf(params map[string]any) *progressNote {
	b, err := json.Marshal(params)
	if err != nil {
		return nil
	}
	var n struct {
		progressNote
		Progress *float64 `json:"progress"`
	}
	if json.Unmarshal(b, &n) != nil || n.Progress == nil {
		return nil
	}
	n.progressNote.Progress = *n.Progress
	return &n.progressNote
}

// deferLocked answers the call, still running after Options.AnswerWithin,
// with a deferred answer, and lets it run on as a detached request of the
// engine (made one now when it is not yet: restartable is its tool's
// policy's). A call that ended meanwhile (answered, lost, cancelled), or one
// whose client was asked a question it has not answered yet (a 2026 round
// answered input_required: its retry's answer is the client's to wait for),
// is left as it is. The answer goes out under the call's lock: a cancel of
// the call comes before it (and there is none) or after it.
func (cl *call) deferLocked() {
	c, s, l := cl.c, cl.c.s, &cl.life
	if !l.phase.early() && l.phase != phaseRequest || cl.ctx.Err() != nil || l.req != nil && l.req.Context().Err() != nil {
		return
	}
	if rd := l.round; rd != nil && !rd.close() {
		return
	}
	if !l.applied {
		l.restartable = cl.pol.Restartable
	}
	h := deferHandle{ID: cl.id, Tool: cl.tool, Started: l.started.time().UnixMilli()}
	r := l.req
	if r == nil {
		so, _, _ := cl.startOptionsLocked(true)
		so.Cancel = cl.cancel // the tool runs: its context ends with the request's
		nr, tok, err := s.eng.Start(cl.id, &so)
		if err != nil {
			cl.notStartedLocked(err) // it runs on as a plain call, answered when it ends
			return
		}
		l.token = tok
		l.unpromote()
		cl.becomeLocked(nr, nil, phaseDeferred)
		r = nr
	} else {
		l.phase = phaseDeferred
		// What its stream was written comes before the deferred answer: the
		// client that awaits with the handle has it.
		h.Ack = r.DetachWritten(cl.st)
		if l.round != nil {
			h.Ack = max(h.Ack, r.DetachWritten(l.round))
		}
	}
	h.Token, l.token = l.token, "" // the answer carries it; the call keeps no copy
	// Its client holds a handle of it now: the session's end leaves it.
	c.untrack(cl.id)
	res := s.deferredResult(cl.tool, h.encode(), time.Since(l.started.time()), l.lastProgress, r.Status().HasInput)
	if cl.modern != nil {
		res.ResultType = mcp.ResultTypeComplete
	}
	b, err := json.Marshal(res)
	if err != nil {
		return
	}
	c.reply(cl.st, spec.EncodeResponse(cl.id, b))
	c.debug().Str("request", string(cl.id)).Msg("answered with a deferred answer; the call runs on")
}

// deferredResult is the answer that says tool is still running (for elapsed,
// last its latest progress, asking: it waits for an answer to a question)
// and how to get its result: call the await tool with handle.
func (s *Server) deferredResult(tool, handle string, elapsed time.Duration, last *progressNote, asking bool) *mcp.CallToolResult {
	var b strings.Builder
	fmt.Fprintf(&b, "The tool %q is still running (for %s so far) and goes on in the background.", tool, elapsed.Round(time.Second))
	if last != nil {
		b.WriteString(" Its latest progress: ")
		if last.Message != "" {
			b.WriteString(last.Message + " (")
		}
		b.WriteString(strconv.FormatFloat(last.Progress, 'f', -1, 64))
		if last.Total != nil {
			b.WriteString(" of " + strconv.FormatFloat(*last.Total, 'f', -1, 64))
		}
		if last.Message != "" {
			b.WriteString(")")
		}
		b.WriteString(".")
	}
	if asking {
		fmt.Fprintf(&b, " It is waiting for an answer to a question it asked: calling %s shows the question.", s.awaitTool)
	}
	args, _ := json.Marshal(map[string]any{"handle": handle})
	fmt.Fprintf(&b, " To get its result, call the tool %q with the arguments %s. That call waits up to %s and answers with the result, or says again that the tool is still running; call it again then. To stop the tool instead, call %s with \"cancel\": true besides the handle.",
		s.awaitTool, args, s.opts.AnswerWithin.Round(time.Second), s.awaitTool)
	meta := map[string]any{
		"tool":           s.awaitTool,
		"arguments":      map[string]any{"handle": handle},
		"elapsedMs":      elapsed.Milliseconds(),
		"inputRequested": asking,
	}
	if last != nil {
		meta["progress"] = last
	}
	res := mcp.NewToolResultText(b.String())
	res.Meta = &mcp.Meta{AdditionalFields: map[string]any{spec.MetaDeferred: meta}}
	return res
}

// untrack forgets the request with id among those the session delivered: its
// client holds a handle of it (a deferred call), and the session's end or
// its streams' must leave it as it is.
func (c *connState) untrack(id spec.ID) {
	c.update(func(st *sessionState) {
		t, ok := st.attached[string(id)]
		if !ok {
			return
		}
		delete(st.attached, string(id))
		for s, ts := range st.onStream {
			for i, u := range ts {
				if u.r == t.r {
					ts = append(ts[:i], ts[i+1:]...)
					break
				}
			}
			if len(ts) == 0 {
				delete(st.onStream, s)
			} else {
				st.onStream[s] = ts
			}
		}
	})
}
