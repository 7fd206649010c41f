package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/mcp-resume/mcp-resume/resume"
	"github.com/mcp-resume/mcp-resume/spec"
)

// Multi round-trip requests (MRTR, 2026-07-28). A tool written for the 2025 era
// asks its client through RequestElicitation, RequestSampling or ListRoots and
// waits for the answer. A 2026 client takes no server-to-client requests: it gets
// an input_required result and retries the request, with a new id, carrying its
// answers. The core bridges the two without running the tool again: the call
// becomes a request of the engine (hidden, unless the client declared SEP-975),
// each round is an attachment of it to the stream of one client request, and
// the round's sink turns the tool's question into the round's input_required
// answer. The retry finds the request by the token in its requestState, hands
// the answers to the waiting tool, and attaches its own stream as the next
// round. Between rounds the request is detached, and its maxWait bounds how long
// the tool waits for a retry.

var errRoundOver = errors.New("mcp: the round was answered input_required")

// round is a Stream for one round of a 2026-era request: the messages of the
// request reach its client's stream, its questions end the round as an
// input_required answer, and its final response goes under this round's id.
type round struct {
	st    Stream
	id    spec.ID // the id of this round's client request
	orig  spec.ID // the id the request runs under (its first round's)
	state string  // the requestState to hand out
	// gather, when set, runs the round's input_required answer a moment after
	// its first question (gatherWait), with every question of req asked by
	// then (req.Peek): the questions a tool asks at once (from goroutines)
	// are one round. Without it (a request of another instance), the answer
	// carries the first question alone, at once.
	gather func(func())
	req    *resume.Request

	mu   sync.Mutex
	over bool // answered (input_required or the final response)
}

// gatherWait is how long a round's first question waits for others before the
// round is answered input_required.
const gatherWait = 2 * time.Millisecond

// gatherOn makes rd gather the questions of r, when r is a request of this
// instance, on s's goroutines.
func (rd *round) gatherOn(s *Server, r resume.Handle) {
	if req, ok := r.(*resume.Request); ok {
		rd.mu.Lock()
		defer rd.mu.Unlock()
		rd.req, rd.gather = req, func(f func()) {
			s.wg.Add(1)
			time.AfterFunc(gatherWait, func() {
				defer s.wg.Done()
				f()
			})
		}
	}
}

func (rd *round) Write(ctx context.Context, m Message) error {
	rd.mu.Lock()
	defer rd.mu.Unlock()
	if rd.over {
		return errRoundOver
	}
	switch m.Kind {
	case KindRequest:
		if _, err := inputRequired([][]byte{m.Data}, rd.state); err != nil {
			return err
		}
		rd.over = true
		answer := func(ctx context.Context, qs [][]byte) {
			if res, err := inputRequired(qs, rd.state); err == nil {
				_ = rd.st.Write(ctx, Message{Kind: KindResponse, Data: spec.EncodeResponse(rd.id, res)})
			}
		}
		if rd.gather == nil {
			answer(ctx, [][]byte{m.Data})
		} else {
			first := bytes.Clone(m.Data)
			rd.gather(func() {
				// The first question is among those held, unless it was
				// answered meanwhile; the keys make one of each.
				qs := [][]byte{first}
				if held, err := rd.req.Peek(); err == nil {
					for _, h := range held {
						if h.Kind == KindRequest {
							qs = append(qs, h.Data)
						}
					}
				}
				answer(context.WithoutCancel(ctx), qs)
			})
		}
		// An error detaches the request, which keeps the question queued (it is
		// answered by the retry, which then attaches the next round).
		return errRoundOver
	case KindResponse:
		rd.over = true
		m.Data = spec.ReplaceResponseID(m.Data, rd.orig, rd.id)
	}
	return rd.st.Write(ctx, m)
}

// close ends the round without an answer of its own (the call was answered
// otherwise: a deferred answer); it reports whether the round was open.
func (rd *round) close() bool {
	rd.mu.Lock()
	defer rd.mu.Unlock()
	open := !rd.over
	rd.over = true
	return open
}

// answered reports whether the round has had its answer (false for no round).
func (rd *round) answered() bool {
	if rd == nil {
		return false
	}
	rd.mu.Lock()
	defer rd.mu.Unlock()
	return rd.over
}

// inputRequired turns server-to-client requests into the input_required result
// asking for them: the id of each is the key of its input request.
func inputRequired(reqs [][]byte, state string) (json.RawMessage, error) {
	type input struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params,omitempty"`
	}
	inputs := make(map[string]input, len(reqs))
	for _, req := range reqs {
		m, derr := spec.Decode(req)
		if derr != nil || m.Kind != spec.KindRequest {
			return nil, errors.New("mcp: a queued question is not a request")
		}
		var key string
		if json.Unmarshal(m.ID, &key) != nil {
			return nil, errors.New("mcp: a queued question has no string id")
		}
		inputs[key] = input{m.Method, m.Params}
	}
	return json.Marshal(struct {
		ResultType    string           `json:"resultType"`
		InputRequests map[string]input `json:"inputRequests"`
		RequestState  string           `json:"requestState"`
	}{"input_required", inputs, state})
}

// retried is a round attached by a retry on this session: when its stream closes
// before the round has its answer, the request is cancelled (2026-07-28: closing
// a response stream cancels its request).
type retried struct {
	r  resume.Handle
	rd *round
}

// inputResponses routes the inputResponses of params (a retry's, a
// tasks/update's) to the questions they answer; malformed ones are the
// request's error.
func (s *Server) inputResponses(c *connState, params json.RawMessage) *spec.Error {
	var p struct {
		Responses map[string]json.RawMessage `json:"inputResponses"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return spec.NewError(spec.CodeInvalidParams, spec.ReasonInvalidParams, "malformed inputResponses: "+err.Error())
	}
	for key, res := range p.Responses {
		s.inputResponse(c, key, res)
	}
	return nil
}

// inputResponse hands the client's answer to one input request (key is the id
// of the server-to-client request it answers) to the tool waiting for it, here
// or on the instance that asked. Keys of no waiting question are ignored, as
// the specification asks.
func (s *Server) inputResponse(c *connState, key string, res json.RawMessage) {
	id, _ := json.Marshal(key)
	m := &spec.Message{Kind: spec.KindResponse, ID: id, Result: res}
	if s.answers.deliver(m) {
		return
	}
	if inst := s.answers.askedBy(id); inst != "" {
		s.answers.forward(c, inst, id, spec.EncodeResponse(id, res))
	}
}
