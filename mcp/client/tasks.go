package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-resume/mcp-resume/spec"
)

// Task is a task of the server (tasks in the 2025-11-25 form: the client asks for
// one with params.task, and reads it with tasks/get and tasks/result).
type Task struct {
	TaskID        string   `json:"taskId"`
	Status        string   `json:"status"` // working, input_required, completed, failed, cancelled
	StatusMessage string   `json:"statusMessage,omitempty"`
	CreatedAt     string   `json:"createdAt"`
	LastUpdatedAt string   `json:"lastUpdatedAt"`
	TTL           *float64 `json:"ttl"`          // milliseconds
	PollInterval  *float64 `json:"pollInterval"` // milliseconds
}

// Terminal reports whether the task has ended.
func (t *Task) Terminal() bool {
	return t.Status == "completed" || t.Status == "failed" || t.Status == "cancelled"
}

// Poll is how long to wait before asking for the task again: its pollInterval,
// or a second.
func (t *Task) Poll() time.Duration {
	if t.PollInterval != nil && *t.PollInterval > 0 {
		return time.Duration(*t.PollInterval) * time.Millisecond
	}
	return time.Second
}

// Tasks reports whether the server offers tasks for tools/call.
func (c *Client) Tasks() bool {
	res := c.InitializeResult()
	return res != nil && res.Capabilities.Tasks != nil && res.Capabilities.Tasks.Requests != nil &&
		res.Capabilities.Tasks.Requests.Tools != nil && res.Capabilities.Tasks.Requests.Tools.Call != nil
}

// ErrNoTask: the server answered a call made as a task with a plain result (the
// tool does not run as a task). The result is in the *NoTaskError.
var ErrNoTask = errors.New("client: the server did not run the call as a task")

// NoTaskError carries the plain result of a call asked for as a task.
type NoTaskError struct{ Result *mcpgo.CallToolResult }

func (e *NoTaskError) Error() string { return ErrNoTask.Error() }
func (e *NoTaskError) Unwrap() error { return ErrNoTask }

// CallToolTask calls a tool as a task (params.task with ttl, 0 for the server's
// default) and returns the task the server created. A server that ran the call
// at once answers with its result: a *NoTaskError.
func (c *Client) CallToolTask(ctx context.Context, name string, args any, ttl time.Duration) (*Task, error) {
	task := map[string]any{}
	if ttl > 0 {
		task["ttl"] = ttl.Milliseconds()
	}
	params := map[string]any{"name": name, "task": task}
	if args != nil {
		params["arguments"] = args
	}
	raw, err := c.Call(ctx, spec.MethodToolsCall, params, nil)
	if err != nil {
		return nil, err
	}
	var r struct {
		Task *Task `json:"task"`
	}
	if json.Unmarshal(raw, &r) != nil || r.Task == nil || r.Task.TaskID == "" {
		res, perr := mcpgo.ParseCallToolResult(&raw)
		if perr != nil {
			return nil, &ProtocolError{Problem: "tools/call result is neither a task nor a tool result", Raw: raw}
		}
		return nil, &NoTaskError{Result: res}
	}
	return r.Task, nil
}

// GetTask asks for a task's state (tasks/get).
func (c *Client) GetTask(ctx context.Context, id string) (*Task, error) {
	return c.taskCall(ctx, spec.MethodTasksGet, id)
}

// CancelTask cancels a task (tasks/cancel) and returns its state.
func (c *Client) CancelTask(ctx context.Context, id string) (*Task, error) {
	return c.taskCall(ctx, spec.MethodTasksCancel, id)
}

func (c *Client) taskCall(ctx context.Context, method, id string) (*Task, error) {
	raw, err := c.Call(ctx, method, map[string]any{"taskId": id}, nil)
	if err != nil {
		return nil, err
	}
	var t Task
	if err := json.Unmarshal(raw, &t); err != nil || t.TaskID == "" {
		return nil, &ProtocolError{Problem: method + " result is not a task", Raw: raw}
	}
	return &t, nil
}

// ListTasks lists the caller's tasks (tasks/list).
func (c *Client) ListTasks(ctx context.Context) ([]Task, error) {
	raw, err := c.Call(ctx, "tasks/list", map[string]any{}, nil)
	if err != nil {
		return nil, err
	}
	var r struct {
		Tasks []Task `json:"tasks"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, &ProtocolError{Problem: "tasks/list result: " + err.Error(), Raw: raw}
	}
	return r.Tasks, nil
}

// TaskResult waits for a task's result (tasks/result): the task's questions
// (elicitation, sampling, roots) reach the Options' handlers meanwhile. A
// tasks/result cut off with its connection is asked again on the next one,
// until ctx ends; the task runs on the server all along.
func (c *Client) TaskResult(ctx context.Context, id string) (*mcpgo.CallToolResult, error) {
	for {
		raw, err := c.Call(ctx, "tasks/result", map[string]any{"taskId": id}, nil)
		if errors.Is(err, ErrNotResumable) && ctx.Err() == nil {
			continue // the connection was lost: ask again on the next one
		}
		return toolResult("tasks/result", raw, err)
	}
}

// TaskEvent is one event of a task (tasks/stream, SEP-2694): its seq, from 0
// and rising, its type (io.mcp-resume.progress, .log, .input, .status with
// mcp-resume) and its payload.
type TaskEvent struct {
	TaskID  string          `json:"taskId"`
	Seq     uint64          `json:"seq"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload"`
}

// taskStream is a StreamTask in progress: where its events go, and the seq of
// the last one given (guarded by Client.st).
type taskStream struct {
	each func(TaskEvent)
	last uint64
	got  bool
}

// StreamTask streams a task's events (tasks/stream) to each, in order and once
// each, from the one after after (nil: from the oldest the server keeps), and
// returns nil once the task has ended and its last event came. A stream cut off
// with its connection is asked for again on the next one, from the last event
// given, until ctx ends; the task runs on the server all along. A server that
// no longer keeps the events after the cursor answers a *spec.Error with
// reason events_gone (its EarliestSeq says from where it keeps them). each runs
// on the client's reader: it must not block.
func (c *Client) StreamTask(ctx context.Context, id string, after *uint64, each func(TaskEvent)) error {
	ts := &taskStream{each: each}
	if after != nil {
		ts.last, ts.got = *after, true
	}
	var dup bool
	c.update(func(st *state) {
		if _, dup = st.reg.streams[id]; !dup {
			st.reg.streams[id] = ts
		}
	})
	if dup {
		return fmt.Errorf("client: task %s is streamed already", id)
	}
	defer c.update(func(st *state) { delete(st.reg.streams, id) })
	for {
		params := map[string]any{"taskId": id}
		c.update(func(*state) {
			if ts.got {
				params["after"] = ts.last
			}
		})
		_, err := c.Call(ctx, spec.MethodTasksStream, params, nil)
		if errors.Is(err, ErrNotResumable) && ctx.Err() == nil {
			continue // the connection was lost: stream again from the last event
		}
		return err
	}
}

// taskEvent hands a notifications/tasks/event to the stream of its task, once.
func (c *Client) taskEvent(params json.RawMessage) {
	var ev TaskEvent
	if json.Unmarshal(params, &ev) != nil {
		return
	}
	var ts *taskStream
	var fresh bool
	c.update(func(st *state) {
		ts = st.reg.streams[ev.TaskID]
		if fresh = ts != nil && (!ts.got || ev.Seq > ts.last); fresh {
			ts.last, ts.got = ev.Seq, true
		}
	})
	if fresh {
		ts.each(ev)
	}
}
