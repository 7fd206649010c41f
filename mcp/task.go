package mcp

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"math"
	"sync"
	"time"

	"github.com/mcp-resume/mcp-resume/resume"
	"github.com/mcp-resume/mcp-resume/spec"
)

// sessionTasks are the tasks/stream requests a session serves, and its way to
// the engine's tasks. It holds nothing of its own: what it changes is the
// session's state (sessionState.taskStreams), through connState.update.
type sessionTasks struct {
	c *connState
}

// Tasks (the io.modelcontextprotocol/tasks extension of 2026-07-28). A task is a
// request of the engine: durable and shared like any resumable request, bound to
// its principal. Its id carries the request's id and resume token, so that a
// lookup by task id is the engine's token check (hashed, constant-time,
// principal-bound, rate-limited on failure). While a task runs it is detached:
// its messages wait in its outbox; tasks/get reads what is there (the tool's
// questions, its result) through a sink attached for the moment.

// taskPollInterval is the polling interval tasks advertise.
const taskPollInterval = time.Second

// taskID is what a task id carries.
type taskID struct {
	ID      spec.ID `json:"i"`
	Token   string  `json:"t"`
	Created int64   `json:"c"`           // unix milliseconds
	TTL     int64   `json:"l,omitempty"` // milliseconds from Created; 0 in ids made before tasks had one
}

const taskPrefix = "tk1."

// ttl is the task's lifetime from its creation in milliseconds, the same on
// every read. An id made before tasks had one carries none: then how long
// from its creation the task stays readable if nobody polls it again (its
// maxWait while it runs, its result's retention once it ended).
func (t *taskID) ttl(status string, o resume.Options) int64 {
	if t.TTL > 0 {
		return t.TTL
	}
	keep := o.MaxWait
	if status != "working" && status != "input_required" {
		keep = o.DeliveredRetention
	}
	return time.Since(time.UnixMilli(t.Created)).Milliseconds() + keep.Milliseconds()
}

func (t *taskID) encode() string { return encodeRef(taskPrefix, t) }

func decodeTaskID(s string) (*taskID, bool) { return decodeRef[taskID](taskPrefix, s) }

// tasks reports whether the request declared the Tasks extension.
func (mr *modernReq) tasks() bool {
	_, ok := mr.caps.Extensions[spec.ExtensionTasks]
	return ok
}

// errNeedsTasks is the error for a request that needs the Tasks extension.
func errNeedsTasks(msg string) *spec.Error {
	e := spec.NewError(spec.CodeMissingCapability, spec.ReasonMissingCapability, msg)
	e.RequiredCapabilities = json.RawMessage(`{"extensions":{"` + spec.ExtensionTasks + `":{}}}`)
	return e
}

// tasksOffered reports whether any tool may become a task.
func (o *Options) tasksOffered() bool {
	if o.DefaultPolicy.Task != NoTask {
		return true
	}
	for _, p := range o.Tools {
		if p.Task != NoTask {
			return true
		}
	}
	return false
}

// taskResult is the CreateTaskResult that answers call id once it is task tid.
func taskResult(id spec.ID, tid *taskID, status string) []byte {
	ts := time.UnixMilli(tid.Created).UTC().Format(time.RFC3339Nano)
	b, _ := json.Marshal(map[string]any{
		"resultType":     "task",
		"taskId":         tid.encode(),
		"status":         status,
		"createdAt":      ts,
		"lastUpdatedAt":  ts,
		"ttlMs":          tid.TTL,
		"pollIntervalMs": taskPollInterval.Milliseconds(),
	})
	return spec.EncodeResponse(id, b)
}

// rejoinTask answers cl, a keyed task call sent again (its client lost the
// answer that named the task): the task its key made, in its status now, in
// the form a creation is answered.
func (tk *sessionTasks) rejoinTask(h resume.Handle, cl *call, key string) {
	c := tk.c
	ttl, asked := c.s.taskTTL(cl)
	tid := &taskID{ID: cl.id, Token: key, Created: h.Created().UnixMilli(), TTL: ttl.Milliseconds()}
	c.debug().Str("request", string(cl.id)).Msg("task call sent again; answered with its task")
	c.s.wg.Go(func() { // a task another instance owns is read from it
		if cl.kind.legacy() {
			status, msg := tk.legacyStatus(h)
			c.reply(cl.st, cl.legacyTaskResult(tid, status, msg, asked))
			return
		}
		var obj struct{ Status string }
		_ = json.Unmarshal(tk.taskGet(h, tid), &obj)
		c.reply(cl.st, taskResult(cl.id, tid, obj.Status))
	})
}

// taskTTL is the lifetime of the task cl starts: what a 2025-11-25 client asked
// for in params.task.ttl, at least a second and at most MaxTaskTTL, else
// TaskTTL; and the ttl asked for when it was cut to MaxTaskTTL (0 otherwise).
func (s *Server) taskTTL(cl *call) (ttl, asked time.Duration) {
	limit := cmp.Or(s.opts.MaxTaskTTL, DefaultMaxTaskTTL)
	ttl = min(cmp.Or(s.opts.TaskTTL, DefaultTaskTTL), limit)
	if !cl.kind.legacy() {
		return ttl, 0
	}
	var p struct {
		Params struct {
			Task struct {
				TTL *float64 `json:"ttl"`
			} `json:"task"`
		} `json:"params"`
	}
	if json.Unmarshal(cl.raw, &p) != nil || p.Params.Task.TTL == nil || *p.Params.Task.TTL <= 0 {
		return ttl, 0
	}
	want := *p.Params.Task.TTL
	if want >= float64(limit.Milliseconds()) {
		if want > float64(limit.Milliseconds()) {
			asked = time.Duration(min(want, float64(math.MaxInt64/int64(time.Millisecond)))) * time.Millisecond
		}
		return limit, asked
	}
	return max(time.Duration(want)*time.Millisecond, time.Second), 0
}

// taskRequest answers tasks/get, tasks/update, tasks/cancel and tasks/stream.
// Each is a span in the task's trace (taskSpan).
func (tk *sessionTasks) taskRequest(m *spec.Message, st Stream, mr *modernReq) {
	c := tk.c
	c.answerByToken(m, st, func(q *byToken) ([]byte, *spec.Error) {
		if !mr.tasks() {
			return nil, errNeedsTasks(m.Method + " needs the " + spec.ExtensionTasks + " extension in the request's capabilities")
		}
		tid, r, cancelled, e := q.task(m)
		switch {
		case e != nil:
			return nil, e
		case cancelled && m.Method == spec.MethodTasksGet:
			return taskObject(tid, "cancelled", nil, c.s.eng.Options()), nil
		case cancelled: // a stream, a cancel or an update of a cancelled task: nothing to do
			return doneResult2026, nil
		}
		switch m.Method {
		case spec.MethodTasksStream:
			q.answerLater()
			tk.taskStream(m, st, r, tid, doneResult2026, q.sp)
			return nil, nil
		case spec.MethodTasksCancel:
			r.Cancel()
			return doneResult2026, nil
		case spec.MethodTasksUpdate:
			if e := c.s.inputResponses(c, m.Params); e != nil {
				return nil, e
			}
			_ = r.Touch(0)
			return doneResult2026, nil
		}
		return tk.taskGet(r, tid), nil
	})
}

// taskGet reads the task's state from what its outbox holds: its questions and
// its response. A task another instance owns is read through a sink attached
// for the moment (which takes the task over from a client attached to it then).
func (tk *sessionTasks) taskGet(h resume.Handle, tid *taskID) json.RawMessage {
	c := tk.c
	var cap taskCapture
	_ = h.Touch(0) // a task someone polls lives on, as getStatus keeps a request
	var held []Message
	var err error
	r, local := h.(*resume.Request)
	if local {
		held, err = r.Peek()
	}
	switch {
	case !local:
		// Its owner says what there is to wait for; its messages come to the
		// sink attached here from the owner, after the attach has returned.
		rs := h.Status()
		cap.got = make(chan struct{}, 1)
		if err := h.Attach(&cap, 0); err == nil {
			wait := time.NewTimer(remoteRead)
			for !cap.has(rs) {
				select {
				case <-cap.got:
					continue
				case <-wait.C:
				}
				break
			}
			wait.Stop()
			h.Detach(&cap)
		} else if errors.Is(err, resume.ErrCancelled) {
			return taskObject(tid, "cancelled", nil, c.s.eng.Options())
		}
	case errors.Is(err, resume.ErrCancelled):
		return taskObject(tid, "cancelled", nil, c.s.eng.Options())
	default:
		for _, m := range held {
			_ = cap.Write(context.Background(), m)
		}
	}
	cap.mu.Lock()
	defer cap.mu.Unlock()
	if cap.response != nil {
		var resp struct {
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if json.Unmarshal(cap.response, &resp) == nil && resp.Error != nil {
			extra := map[string]any{"error": resp.Error}
			if msg := statusMessage(resp.Error); msg != "" {
				extra["statusMessage"] = msg
			}
			return taskObject(tid, "failed", extra, c.s.eng.Options())
		}
		return taskObject(tid, "completed", map[string]any{"result": resp.Result}, c.s.eng.Options())
	}
	if len(cap.inputs) > 0 {
		return taskObject(tid, "input_required", map[string]any{"inputRequests": cap.inputs}, c.s.eng.Options())
	}
	return taskObject(tid, "working", nil, c.s.eng.Options())
}

// statusMessage is the statusMessage of a task that failed with the JSON-RPC
// error e: its message, and its data.reason when it has one
// ("the server restarted while the request was running (server_restarted)").
func statusMessage(e json.RawMessage) string {
	var v struct {
		Message string `json:"message"`
		Data    struct {
			Reason string `json:"reason"`
		} `json:"data"`
	}
	if json.Unmarshal(e, &v) != nil {
		return ""
	}
	switch {
	case v.Data.Reason == "":
		return v.Message
	case v.Message == "":
		return v.Data.Reason
	}
	return v.Message + " (" + v.Data.Reason + ")"
}

// taskObject encodes a DetailedTask.
func taskObject(tid *taskID, status string, extra map[string]any, o resume.Options) json.RawMessage {
	created := time.UnixMilli(tid.Created).UTC()
	t := map[string]any{
		"resultType":     "complete",
		"taskId":         tid.encode(),
		"status":         status,
		"createdAt":      created.Format(time.RFC3339Nano),
		"lastUpdatedAt":  time.Now().UTC().Format(time.RFC3339Nano),
		"pollIntervalMs": taskPollInterval.Milliseconds(),
	}
	t["ttlMs"] = tid.ttl(status, o)
	for k, v := range extra {
		t[k] = v
	}
	b, _ := json.Marshal(t)
	return b
}

// taskCapture is the sink tasks/get attaches: it keeps the task's open questions
// (as input requests) and its response.
type taskCapture struct {
	mu       sync.Mutex
	inputs   map[string]json.RawMessage
	response []byte
	got      chan struct{} // capacity 1: told of each message, when not nil
}

// remoteRead bounds the wait for a task's messages from the instance that owns
// it.
const remoteRead = 2 * time.Second

// has reports whether the capture holds what the status says the task has: its
// response once it ended, a question while it waits for input.
func (tc *taskCapture) has(rs resume.Status) bool {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	switch {
	case rs.State == resume.StateCompleted || rs.State == resume.StateFailed:
		return tc.response != nil
	case rs.HasInput:
		return len(tc.inputs) > 0
	}
	return true
}

func (tc *taskCapture) Write(_ context.Context, m Message) error {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if tc.got != nil {
		defer func() {
			select {
			case tc.got <- struct{}{}:
			default:
			}
		}()
	}
	switch m.Kind {
	case KindResponse:
		tc.response = bytes.Clone(m.Data)
	case KindRequest:
		q, derr := spec.Decode(m.Data)
		var key string
		if derr != nil || json.Unmarshal(q.ID, &key) != nil {
			return nil
		}
		in, _ := json.Marshal(struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params,omitempty"`
		}{q.Method, q.Params})
		if tc.inputs == nil {
			tc.inputs = map[string]json.RawMessage{}
		}
		tc.inputs[key] = in
	}
	return nil
}

func errorsIsCancelled(err error) bool { return errors.Is(err, resume.ErrCancelled) }
