package client

import (
	"context"
	"encoding/json"
	"time"

	"github.com/mcp-resume/mcp-resume/internal/backoff"
	"github.com/mcp-resume/mcp-resume/spec"
)

// A tools/call with CallOptions.AsTask that the server made a task of its own
// is followed to the task's end, which is the call's: a task of 2025-11-25
// with tasks/result (which waits for the result, carrying the task's
// questions and progress meanwhile), one of the 2026-07-28 era by polling
// tasks/get, answering the questions it waits for with tasks/update. The
// task outlives its connection: a request that follows it is sent again on
// the next connection when its own is lost (it is Idempotent). A Call whose
// ctx ends cancels the task (tasks/cancel).

// Polling a task of the 2026-07-28 era: the first poll comes soon (a task
// often ends quickly), each next one later, up to the interval the server
// asks for, within [firstPoll, maxPoll].
const (
	firstPoll = 50 * time.Millisecond
	maxPoll   = 5 * time.Second
)

// createdTask is the task id of a CreateTaskResult: 2025-11-25's ({"task":
// {"taskId": ...}}), or the 2026-07-28 era's ({"resultType": "task",
// "taskId": ...}: modern); "" for any other result.
func createdTask(raw json.RawMessage) (id string, modern bool) {
	var r struct {
		ResultType string `json:"resultType"`
		TaskID     string `json:"taskId"`
		Task       *struct {
			TaskID string `json:"taskId"`
		} `json:"task"`
	}
	_, hasTask, scanned := spec.Member(raw, "task")
	rt, hasType, _ := spec.Member(raw, "resultType")
	if scanned && !hasTask && (!hasType || string(rt) != `"task"`) {
		return "", false // most results: read no further
	}
	if json.Unmarshal(raw, &r) != nil {
		return "", false
	}
	switch {
	case r.ResultType == "task":
		return r.TaskID, true
	case r.Task != nil:
		return r.Task.TaskID, false
	}
	return "", false
}

// followTask follows task id, which the request first of op became, to its
// end and returns its result; env is the envelope of op's requests.
func (c *Client) followTask(ctx context.Context, op *operation, first *call, id string, modern bool, env map[string]json.RawMessage) (json.RawMessage, error) {
	c.update(func(st *state) {
		op.task = id
		st.reg.tokens[first.key] = op // the task's progress comes under the call's token
	})
	defer c.update(func(st *state) { delete(st.reg.tokens, first.key) })
	if f := op.opts.OnTask; f != nil {
		f(id)
	}
	var res json.RawMessage
	var err error
	if modern {
		res, err = c.pollTask(ctx, op, id, env)
	} else {
		res, _, err = c.request(ctx, op, "tasks/result", taskFields(id), nil, &CallOptions{Idempotent: true}, nil)
	}
	if err != nil && ctx.Err() != nil {
		// Best effort, bounded: the call is over for its caller.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.opts.ReconnectTimeout)
		defer cancel()
		_, _, _ = c.request(cctx, op, spec.MethodTasksCancel, taskFields(id), nil, &CallOptions{}, env)
		return nil, ctx.Err()
	}
	return res, err
}

// taskState is what tasks/get says of a task of the 2026-07-28 era.
type taskState struct {
	Status         string                       `json:"status"`
	StatusMessage  string                       `json:"statusMessage"`
	PollIntervalMs int64                        `json:"pollIntervalMs"`
	Result         json.RawMessage              `json:"result"`
	Error          *spec.Error                  `json:"error"`
	InputRequests  map[string]spec.InputRequest `json:"inputRequests"`
}

// pollTask polls task id of the 2026-07-28 era with tasks/get until it ends,
// and answers each question it waits for once, with op's handlers and
// tasks/update.
func (c *Client) pollTask(ctx context.Context, op *operation, id string, env map[string]json.RawMessage) (json.RawMessage, error) {
	answered := map[string]bool{}
	wait := firstPoll
	for {
		raw, _, err := c.request(ctx, op, spec.MethodTasksGet, taskFields(id), nil, &CallOptions{Idempotent: true}, env)
		if err != nil {
			return nil, err
		}
		var t taskState
		if err := json.Unmarshal(raw, &t); err != nil {
			return nil, &ProtocolError{Problem: "tasks/get result: " + err.Error(), Raw: raw}
		}
		switch t.Status {
		case "completed":
			if len(t.Result) == 0 {
				return nil, &ProtocolError{Problem: "tasks/get: a completed task without a result", Raw: raw}
			}
			return t.Result, nil
		case "failed":
			if t.Error != nil {
				return nil, t.Error
			}
			return nil, spec.NewError(spec.CodeInternalError, "", "the server's task failed: "+t.StatusMessage)
		case "cancelled":
			return nil, spec.NewError(spec.CodeInternalError, spec.ReasonCancelled, "the server cancelled its task")
		case "input_required":
			in := spec.InputRequired{InputRequests: map[string]spec.InputRequest{}}
			for key, q := range t.InputRequests {
				if !answered[key] {
					in.InputRequests[key] = q
				}
			}
			if len(in.InputRequests) > 0 {
				answers, err := c.fulfil(ctx, op, in)
				if err != nil {
					return nil, err
				}
				fields := taskFields(id)
				fields["inputResponses"], _ = json.Marshal(answers)
				if _, _, err := c.request(ctx, op, spec.MethodTasksUpdate, fields, nil, &CallOptions{Idempotent: true}, env); err != nil {
					return nil, err
				}
				for key := range answers {
					answered[key] = true
				}
				wait = firstPoll
				continue
			}
		}
		if !backoff.Sleep(ctx, wait) {
			return nil, ctx.Err()
		}
		wait = min(2*wait, max(time.Duration(t.PollIntervalMs)*time.Millisecond, firstPoll), maxPoll)
	}
}

// taskFields are the params of a request about task id.
func taskFields(id string) map[string]json.RawMessage {
	b, _ := json.Marshal(id)
	return map[string]json.RawMessage{"taskId": b}
}
