package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-resume/mcp-resume/resume"
	"github.com/mcp-resume/mcp-resume/spec"
)

// Tasks in the form of 2025-11-25 (part of the core protocol then): the client
// asks for a task with params.task on tools/call, the server's initialize
// advertises capabilities.tasks, and tasks/result streams the task's questions
// and blocks until its result, under its own id. The same engine requests as the
// 2026 extension's tasks (task.go): principal-bound, durable, shared.

// MethodTasksResult and MethodTasksList exist in the 2025-11-25 form only.
const (
	methodTasksResult = "tasks/result"
	methodTasksList   = "tasks/list"
)

// taskIndex lists the tasks each principal created on this instance, for
// tasks/list: the newest maxListed of each (older ones stay readable by id).
type taskIndex struct {
	mu  sync.Mutex
	ids map[string][]*taskID // by principal, oldest first
}

// maxListed bounds the tasks tasks/list remembers per principal.
const maxListed = 1000

func (ti *taskIndex) add(principal string, t *taskID) {
	ti.mu.Lock()
	defer ti.mu.Unlock()
	if ti.ids == nil {
		ti.ids = map[string][]*taskID{}
	}
	ids := append(ti.ids[principal], t)
	if len(ids) > maxListed {
		ids = append([]*taskID(nil), ids[len(ids)-maxListed:]...)
	}
	ti.ids[principal] = ids
}

// advertiseTasks adds the 2025-11-25 tasks capability to an initialize result,
// with tasks/stream (SEP-2694) in it as "stream". The result becomes an
// initializeResult: mcp-go's TasksCapability has no member for it.
func advertiseTasks(result any) any {
	var r mcp.InitializeResult
	switch v := result.(type) {
	case mcp.InitializeResult:
		r = v
	case *mcp.InitializeResult:
		r = *v
	default:
		return result
	}
	tasks := &tasksCapability{TasksCapability: mcp.TasksCapability{List: &struct{}{}, Cancel: &struct{}{},
		Requests: &mcp.TaskRequestsCapability{Tools: &struct {
			Call *struct{} `json:"call,omitempty"`
		}{Call: &struct{}{}}}}, Stream: &struct{}{}}
	return initializeResult{InitializeResult: r, Capabilities: serverCapabilities{ServerCapabilities: r.Capabilities, Tasks: tasks}}
}

// initializeResult is an initialize result whose capabilities' tasks member
// is tasksCapability (encoding/json takes the shallower of two fields of one
// name: these).
type initializeResult struct {
	mcp.InitializeResult
	Capabilities serverCapabilities `json:"capabilities"`
}

type serverCapabilities struct {
	mcp.ServerCapabilities
	Tasks *tasksCapability `json:"tasks,omitempty"`
}

// tasksCapability is the 2025-11-25 tasks capability and tasks/stream's
// advertisement in it.
type tasksCapability struct {
	mcp.TasksCapability
	Stream *struct{} `json:"stream,omitempty"`
}

// taskSupport marks, in a 2025-era tools/list result, each tool whose calls
// may become tasks (its Policy's Task): execution.taskSupport "optional" or
// "required". 2025-11-25 reads an absent one as "forbidden", so a careful
// client never asks for a task of a tool not marked.
func (s *Server) taskSupport(result any) any {
	mark := func(r *mcp.ListToolsResult) {
		tools := make([]mcp.Tool, len(r.Tools))
		for i, t := range r.Tools {
			switch s.policy(t.Name).Task {
			case AsTask:
				t.Execution = &mcp.ToolExecution{TaskSupport: mcp.TaskSupportOptional}
			case TaskRequired:
				t.Execution = &mcp.ToolExecution{TaskSupport: mcp.TaskSupportRequired}
			}
			tools[i] = t
		}
		r.Tools = tools
	}
	return edited(result, mark)
}

// legacyTask returns the task object of the 2025-11-25 form, with
// statusMessage when message is not empty.
func legacyTask(tid *taskID, status, message string, o resume.Options) map[string]any {
	created := time.UnixMilli(tid.Created).UTC()
	t := map[string]any{
		"taskId":        tid.encode(),
		"status":        status,
		"createdAt":     created.Format(time.RFC3339Nano),
		"lastUpdatedAt": time.Now().UTC().Format(time.RFC3339Nano),
		"ttl":           tid.ttl(status, o),
		"pollInterval":  taskPollInterval.Milliseconds(),
	}
	if message != "" {
		t["statusMessage"] = message
	}
	return t
}

// legacyTaskResult is the CreateTaskResult of the 2025-11-25 form: the task,
// nested. When the server cut the ttl the client asked for (asked, not 0), the
// result's _meta says what was asked.
func (cl *call) legacyTaskResult(tid *taskID, status, message string, asked time.Duration) []byte {
	res := map[string]any{"task": legacyTask(tid, status, message, cl.c.s.eng.Options())}
	if asked > 0 {
		res["_meta"] = map[string]any{spec.MetaRequestedTTL: asked.Milliseconds()}
	}
	b, _ := json.Marshal(res)
	return spec.EncodeResponse(cl.id, b)
}

// legacyTaskRequest answers tasks/get, tasks/result, tasks/list, tasks/cancel
// and tasks/stream of a 2025-era session. Each but tasks/list is a span in
// the task's trace; a tasks/result's lasts until the task's result is written
// (or its stream goes away).
func (tk *sessionTasks) legacyTaskRequest(m *spec.Message, st Stream) {
	c := tk.c
	c.answerByToken(m, st, func(q *byToken) ([]byte, *spec.Error) {
		if m.Method == methodTasksList {
			q.answerLater()
			tk.taskList(m, st)
			q.sp.end(nil)
			return nil, nil
		}
		o := c.s.eng.Options()
		tid, r, cancelled, e := q.task(m)
		switch {
		case e != nil:
			return nil, e
		case cancelled && m.Method == spec.MethodTasksGet:
			return marshal(legacyTask(tid, "cancelled", "", o)), nil
		case cancelled && m.Method == spec.MethodTasksStream: // nothing is kept of a cancelled task
			return []byte("{}"), nil
		case cancelled: // tasks/result or tasks/cancel of a cancelled task
			return nil, spec.NewError(spec.CodeInvalidParams, spec.ReasonCancelled, "the task was cancelled")
		}
		switch m.Method {
		case spec.MethodTasksStream:
			q.answerLater()
			tk.taskStream(m, st, r, tid, doneResult2025, q.sp)
			return nil, nil
		case spec.MethodTasksGet:
			status, msg := tk.legacyStatus(r)
			return marshal(legacyTask(tid, status, msg, o)), nil
		case spec.MethodTasksCancel:
			if s, _ := tk.legacyStatus(r); s != "working" && s != "input_required" {
				return nil, spec.NewError(spec.CodeInvalidParams, spec.ReasonInvalidParams, "the task has ended ("+s+")")
			}
			r.Cancel()
			return marshal(legacyTask(tid, "cancelled", "", o)), nil
		}
		// tasks/result: the task's questions, then its result, on st.
		q.answerLater()
		rl := &relay{st: st, id: m.ID, orig: tid.ID, task: tid.encode(), span: q.sp}
		c.s.wg.Go(func() {
			if err := r.Attach(rl, 0); err != nil {
				q.fail(wireError(err))
				return
			}
			c.att.trackAs(tracked{r: r, sink: rl, task: true, span: q.sp}, st)
		})
		return nil, nil
	})
}

// marshal is v in JSON (a value of ours, which always encodes).
func marshal(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// legacyStatus reads a task's status in the 2025-11-25 form, where a tool
// result with isError makes it failed, and its statusMessage.
func (tk *sessionTasks) legacyStatus(r resume.Handle) (status, message string) {
	tid := &taskID{}
	var obj struct {
		Status        string          `json:"status"`
		StatusMessage string          `json:"statusMessage"`
		Result        json.RawMessage `json:"result"`
	}
	_ = json.Unmarshal(tk.taskGet(r, tid), &obj)
	if obj.Status == "completed" {
		var res struct {
			IsError bool `json:"isError"`
		}
		if json.Unmarshal(obj.Result, &res) == nil && res.IsError {
			return "failed", ""
		}
	}
	return obj.Status, obj.StatusMessage
}

// taskList answers tasks/list: the tasks the session's principal created on this
// instance that are still known.
func (tk *sessionTasks) taskList(m *spec.Message, st Stream) {
	c := tk.c
	ti := &c.s.taskList
	ti.mu.Lock()
	ids := append([]*taskID(nil), ti.ids[c.principal]...)
	ti.mu.Unlock()
	tasks := []map[string]any{}
	var live []*taskID
	o := c.s.eng.Options()
	for _, tid := range ids {
		r, err := c.s.eng.LookupAs(tid.Token, tid.ID, c.principal)
		switch {
		case err == nil:
			status, msg := tk.legacyStatus(r)
			tasks = append(tasks, legacyTask(tid, status, msg, o))
			live = append(live, tid)
		case errors.Is(err, resume.ErrCancelled):
			tasks = append(tasks, legacyTask(tid, "cancelled", "", o))
			live = append(live, tid)
		}
	}
	ti.mu.Lock()
	if len(ti.ids[c.principal]) == len(ids) { // nothing added meanwhile: forget the gone
		ti.ids[c.principal] = live
	}
	ti.mu.Unlock()
	b, _ := json.Marshal(map[string]any{"tasks": tasks})
	c.reply(st, spec.EncodeResponse(m.ID, b))
}

// relay is the sink of a tasks/result: the task's messages reach the client's
// stream (its questions as requests to answer), each naming its task
// (_meta io.modelcontextprotocol/related-task, which a client with several
// tasks on one stdio connection needs to tell them apart), and its response
// goes under the tasks/result's id.
type relay struct {
	st       Stream
	id, orig spec.ID
	task     string   // the task's id
	span     *reqSpan // the tasks/result's: ended once the response is written
}

func (rl *relay) Write(ctx context.Context, m Message) error {
	if m.Kind == KindNotification && spec.StringMember(m.Data, "method") == spec.MethodTaskStatus {
		return nil // the task's own record of its status: its session hears of it (taskStatus)
	}
	if m.Kind != KindResponse {
		m.Data = spec.WithRelatedTask(m.Data, rl.task)
		return rl.st.Write(ctx, m)
	}
	m.Data = spec.ReplaceResponseID(m.Data, rl.orig, rl.id)
	err := rl.st.Write(ctx, m)
	if err != nil {
		rl.span.endCause(errConnectionLost)
	} else {
		rl.span.endResponse(m.Data)
	}
	return err
}

// asksForTask reports whether tools/call params carry a task object (params.task).
func asksForTask(params json.RawMessage) bool {
	v, found := spec.Lookup(params, "task")
	return found && len(v) > 0 && v[0] == '{'
}

// taskStatus tells the session that created a 2025-11-25 task its new status
// (notifications/tasks/status), on the session's stream for messages of no
// request, when it has one: optional, as the specification says, and clients
// must not rely on it (they poll tasks/get).
func (cl *call) taskStatus(status string) {
	tid := read(cl, func(l *callLife) *taskID { return l.taskID })
	if tid == nil {
		return
	}
	st := cl.c.defaultStream()
	if st == nil {
		return
	}
	b, _ := json.Marshal(legacyTask(tid, status, "", cl.c.s.eng.Options()))
	cl.c.send(st, KindNotification, spec.EncodeRequest(nil, spec.MethodTaskStatus, b))
}
