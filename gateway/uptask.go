package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/mcp-resume/mcp-resume/internal/backoff"
	"github.com/mcp-resume/mcp-resume/spec"
)

// A task of an upstream of the 2026-07-28 era (the Tasks extension): the
// gateway polls it with tasks/get, answers its questions with tasks/update,
// and cancels it with tasks/cancel when its own call ends first.

// Polling an upstream task: the first poll comes soon (a task often ends
// quickly), each next one later, up to the interval the upstream asks for
// (bounded: an upstream's interval never makes the gateway poll faster than
// firstPoll or slower than maxPoll).
const (
	firstPoll = 50 * time.Millisecond
	maxPoll   = 5 * time.Second
)

// modernTask is the task id of a 2026-07-28 CreateTaskResult ({"resultType":
// "task", "taskId": ...}), or "" for any other result.
func modernTask(raw json.RawMessage) string {
	if v, found, ok := spec.Member(raw, "resultType"); ok && (!found || string(v) != `"task"`) {
		return ""
	}
	var r struct {
		ResultType string `json:"resultType"`
		TaskID     string `json:"taskId"`
	}
	if json.Unmarshal(raw, &r) != nil || r.ResultType != "task" {
		return ""
	}
	return r.TaskID
}

// upstreamTask is what tasks/get says of an upstream's task.
type upstreamTask struct {
	Status         string                       `json:"status"`
	StatusMessage  string                       `json:"statusMessage"`
	PollIntervalMs int64                        `json:"pollIntervalMs"`
	Result         json.RawMessage              `json:"result"`
	Error          *spec.Error                  `json:"error"`
	InputRequests  map[string]spec.InputRequest `json:"inputRequests"`
}

// awaitModernTask follows the upstream's task until it ends and returns its
// result: the call's progress and logs meanwhile go to the call's client (the
// messages name the task); its questions are asked of the call's client, each
// once, and answered with tasks/update. A call that ends first (its client
// cancelled it) cancels the task upstream.
func (g *Gateway) awaitModernTask(ctx context.Context, uc *upcall, id spec.ID, task string) (json.RawMessage, error) {
	g.mu.Lock()
	uc.upTask = task
	g.calls[string(id)] = uc
	g.mu.Unlock()
	defer g.forgetCall(id)
	cancel, _ := json.Marshal(g.taskParams(task, nil)) // tasks/cancel's, when the call ends first
	answered := map[string]bool{}
	wait := firstPoll
	for {
		raw, err := g.taskCall(ctx, spec.MethodTasksGet, g.taskParams(task, nil))
		if err != nil {
			return nil, g.endTask(ctx, cancel, err)
		}
		var t upstreamTask
		if err := json.Unmarshal(raw, &t); err != nil {
			return nil, spec.NewError(spec.CodeInternalError, "", "malformed tasks/get answer from the upstream: "+err.Error())
		}
		switch t.Status {
		case "completed":
			if len(t.Result) == 0 {
				return nil, spec.NewError(spec.CodeInternalError, "", "the upstream's task completed without a result")
			}
			return t.Result, nil
		case "failed":
			if t.Error != nil {
				return nil, t.Error
			}
			return nil, spec.NewError(spec.CodeInternalError, "", "the upstream's task failed: "+t.StatusMessage)
		case "cancelled":
			return nil, spec.NewError(spec.CodeInternalError, spec.ReasonCancelled, "the upstream cancelled its task")
		case "input_required":
			in := spec.InputRequired{InputRequests: map[string]spec.InputRequest{}}
			for key, q := range t.InputRequests {
				if !answered[key] {
					in.InputRequests[key] = q
				}
			}
			if len(in.InputRequests) > 0 {
				answers, err := fulfil(ctx, in)
				if err != nil {
					return nil, g.endTask(ctx, cancel, err)
				}
				if _, err := g.taskCall(ctx, spec.MethodTasksUpdate, g.taskParams(task, answers)); err != nil {
					return nil, g.endTask(ctx, cancel, err)
				}
				for key := range answers {
					answered[key] = true
				}
				wait = firstPoll
				continue
			}
		}
		if !backoff.Sleep(ctx, wait) {
			return nil, g.endTask(ctx, cancel, ctx.Err())
		}
		wait = min(2*wait, max(time.Duration(t.PollIntervalMs)*time.Millisecond, firstPoll), maxPoll)
	}
}

// taskCall asks the upstream method about its task. The task outlives the
// connection: one lost (or an upstream that forgot the session) is asked again
// on the next, for as long as ConnectTimeout passes without an answer.
func (g *Gateway) taskCall(ctx context.Context, method string, params map[string]any) (json.RawMessage, error) {
	b, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	var since time.Time
	for {
		p, err := g.current(ctx)
		if err != nil {
			return nil, err
		}
		raw, err := p.call(ctx, method, b)
		var serr *spec.Error
		gone := errors.As(err, &serr) && serr.Reason == spec.ReasonUnknownSession
		lost := gone || errors.Is(err, errLost) || errors.Is(err, errStreamLost) || errors.Is(err, errNotSent)
		switch {
		case err == nil:
			return raw, nil
		case ctx.Err() != nil || !lost:
			return nil, err
		case since.IsZero():
			since = time.Now()
		case time.Since(since) > g.opts.ConnectTimeout:
			return nil, upstreamErr(err)
		}
		if gone {
			p.close() // the supervisor opens a new session
		}
		g.replaced(ctx, p)
	}
}

// taskParams are the params of a task request to the upstream: the task, the
// answers to its questions (tasks/update) and the 2026-07-28 envelope, with
// the Tasks extension.
func (g *Gateway) taskParams(task string, answers map[string]json.RawMessage) map[string]any {
	p := map[string]any{
		"taskId": task,
		"_meta": map[string]any{
			spec.MetaProtocolVersion:    spec.Version2026,
			spec.MetaClientCapabilities: map[string]any{"extensions": map[string]any{spec.ExtensionTasks: map[string]any{}}},
			spec.MetaClientInfo:         g.clientInfo(),
		},
	}
	if answers != nil {
		p["inputResponses"] = answers
	}
	return p
}
