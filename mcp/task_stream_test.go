package mcp_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/mcp/e2etest"
	"github.com/mcp-resume/mcp-resume/resume"
	"github.com/mcp-resume/mcp-resume/servers/demo"
	"github.com/mcp-resume/mcp-resume/spec"
)

// taskEvent is what a test reads of a notifications/tasks/event.
type taskEvent struct {
	TaskID  string          `json:"taskId"`
	Seq     uint64          `json:"seq"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload"`
	Meta    map[string]struct {
		TaskID string `json:"taskId"`
	} `json:"_meta"`
}

// newTask starts a 2025-11-25 task of countdown (steps steps, one a second) on
// c and returns its id.
func newTask(t *testing.T, c *e2etest.Client, id string, steps int) string {
	t.Helper()
	c.Send(`{"jsonrpc":"2.0","id":%q,"method":"tools/call","params":{"name":"countdown","arguments":{"seconds":%d,"steps":%d},"_meta":{"progressToken":"p"},"task":{}}}`, id, steps, steps)
	m, _ := c.Response(`"` + id + `"`)
	var created struct {
		Task struct{ TaskID string } `json:"task"`
	}
	if err := json.Unmarshal(m.Result, &created); err != nil || created.Task.TaskID == "" {
		t.Fatalf("CreateTaskResult: %s", m.Raw)
	}
	return created.Task.TaskID
}

// streamTask sends tasks/stream for task (after, when not "", is the cursor as
// JSON) and returns its events up to its response, and the response.
func streamTask(t *testing.T, c *e2etest.Client, id, task, after string) ([]taskEvent, e2etest.Msg) {
	t.Helper()
	params := fmt.Sprintf(`{"taskId":%q}`, task)
	if after != "" {
		params = fmt.Sprintf(`{"taskId":%q,"after":%s}`, task, after)
	}
	c.Send(`{"jsonrpc":"2.0","id":%q,"method":"tasks/stream","params":%s}`, id, params)
	resp, before := c.Response(`"` + id + `"`)
	var evs []taskEvent
	for _, m := range before {
		if m.Method != spec.MethodTaskEvent {
			continue
		}
		var ev taskEvent
		if err := json.Unmarshal(m.Params, &ev); err != nil {
			t.Fatalf("an event: %s", m.Raw)
		}
		if ev.TaskID != task || ev.Meta[spec.MetaRelatedTask].TaskID != task {
			t.Fatalf("an event that does not name its task: %s", m.Raw)
		}
		evs = append(evs, ev)
	}
	return evs, resp
}

// describe is a short form of events: "type:seq" each.
func describe(evs []taskEvent) string {
	var b strings.Builder
	for _, ev := range evs {
		fmt.Fprintf(&b, "%s:%d ", strings.TrimPrefix(ev.Type, "io.mcp-resume."), ev.Seq)
	}
	return strings.TrimSpace(b.String())
}

// A task's events, streamed from its start while it runs and again from a
// cursor once it has ended: its progress, then its final status, each with its
// seq from 0; the stream then answers with the empty result. The same task
// read from another connection (its own session) gives the same numbers.
func TestTaskStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		core, err := mcp.New(demo.Server("test"), &mcp.Options{Tools: demo.Policies()})
		if err != nil {
			t.Fatal(err)
		}
		dial := serveCore(t, core)
		a := e2etest.NewClient(t, dial(t))
		a.Initialize(`{}`)
		task := newTask(t, a, "c", 3)
		evs, resp := streamTask(t, a, "s1", task, "")
		if got := describe(evs); got != "progress:0 progress:1 progress:2 status:3" || resp.Error != nil || string(resp.Result) != "{}" {
			t.Fatalf("the stream from the start: %s; response %s", got, resp.Raw)
		}
		var p struct{ Progress int }
		if err := json.Unmarshal(evs[2].Payload, &p); err != nil || p.Progress != 3 {
			t.Errorf("the third progress event's payload: %s", evs[2].Payload)
		}
		if !strings.Contains(string(evs[3].Payload), `"status":"completed"`) {
			t.Errorf("the status event: %s", evs[3].Payload)
		}

		b := e2etest.NewClient(t, dial(t))
		b.Initialize(`{}`)
		evs, resp = streamTask(t, b, "s2", task, "1")
		if got := describe(evs); got != "progress:2 status:3" || resp.Error != nil {
			t.Fatalf("the stream after 1: %s; response %s", got, resp.Raw)
		}
		evs, _ = streamTask(t, b, "s3", task, "3")
		if len(evs) != 0 {
			t.Fatalf("the stream after the last event: %s", describe(evs))
		}
	})
}

// A task that asks a question has it as an input event, then a status event
// input_required; once answered (through tasks/result), a status event working,
// then its final status: every status change, as tasks/get would say it.
func TestTaskStreamStatusChanges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		core, err := mcp.New(demo.Server("test"), &mcp.Options{Tools: demo.Policies()})
		if err != nil {
			t.Fatal(err)
		}
		c := e2etest.NewClient(t, serveCore(t, core)(t))
		c.Initialize(`{"elicitation":{}}`)
		c.Send(`{"jsonrpc":"2.0","id":"c","method":"tools/call","params":{"name":"ask","arguments":{"question":"q?"},"task":{}}}`)
		created, _ := c.Response(`"c"`)
		var ct struct {
			Task struct{ TaskID string } `json:"task"`
		}
		if err := json.Unmarshal(created.Result, &ct); err != nil || ct.Task.TaskID == "" {
			t.Fatalf("CreateTaskResult: %s", created.Raw)
		}
		task := ct.Task.TaskID
		c.Send(`{"jsonrpc":"2.0","id":"s","method":"tasks/stream","params":{"taskId":%q}}`, task)
		var evs []taskEvent
		take := func(ms []e2etest.Msg) {
			for _, m := range ms {
				var ev taskEvent
				if m.Method == spec.MethodTaskEvent && json.Unmarshal(m.Params, &ev) == nil {
					evs = append(evs, ev)
				}
			}
		}
		take(c.Until(func(m e2etest.Msg) bool {
			var ev taskEvent
			return m.Method == spec.MethodTaskEvent && json.Unmarshal(m.Params, &ev) == nil && ev.Type == spec.EventTypeStatus
		}))
		c.Send(`{"jsonrpc":"2.0","id":"r","method":"tasks/result","params":{"taskId":%q}}`, task)
		asked := c.Until(func(m e2etest.Msg) bool { return m.Method == "elicitation/create" })
		take(asked)
		c.Send(`{"jsonrpc":"2.0","id":%s,"result":{"action":"accept","content":{"answer":"a"}}}`, asked[len(asked)-1].ID)
		var streamed, result e2etest.Msg
		take(c.Until(func(m e2etest.Msg) bool {
			switch {
			case m.IsResponse(`"s"`):
				streamed = m
			case m.IsResponse(`"r"`):
				result = m
			}
			return streamed.Raw != nil && result.Raw != nil
		}))
		if streamed.Error != nil || e2etest.Text(result) != "answer: a" {
			t.Fatalf("the stream's answer %s, the result %s", streamed.Raw, result.Raw)
		}
		var got []string
		for _, ev := range evs {
			var p struct{ Status string }
			_ = json.Unmarshal(ev.Payload, &p)
			got = append(got, fmt.Sprintf("%d:%s:%s", ev.Seq, strings.TrimPrefix(ev.Type, "io.mcp-resume."), p.Status))
		}
		if want := "[0:input: 1:status:input_required 2:status:working 3:status:completed]"; fmt.Sprint(got) != want {
			t.Fatalf("events %v, want %s", got, want)
		}
	})
}

// A stream cancelled (notifications/cancelled) ends without an answer; its task
// runs on, and a second stream of one task on one connection is refused while
// the first runs.
func TestTaskStreamCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		core, err := mcp.New(demo.Server("test"), &mcp.Options{Tools: demo.Policies()})
		if err != nil {
			t.Fatal(err)
		}
		c := e2etest.NewClient(t, serveCore(t, core)(t))
		c.Initialize(`{}`)
		task := newTask(t, c, "c", 4)
		c.Send(`{"jsonrpc":"2.0","id":"s1","method":"tasks/stream","params":{"taskId":%q}}`, task)
		c.Until(func(m e2etest.Msg) bool { return m.Method == spec.MethodTaskEvent })
		c.Send(`{"jsonrpc":"2.0","id":"s2","method":"tasks/stream","params":{"taskId":%q}}`, task)
		if m, _ := c.Response(`"s2"`); m.Error == nil || m.Error.Code != spec.CodeInvalidParams || m.Error.Reason != spec.ReasonStreamOpen {
			t.Fatalf("a second stream of the task: %s", m.Raw)
		}
		c.Send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"s1"}}`)
		synctest.Wait()
		time.Sleep(5 * time.Second)
		c.Send(`{"jsonrpc":"2.0","id":"g","method":"tasks/get","params":{"taskId":%q}}`, task)
		got, before := c.Response(`"g"`)
		if !strings.Contains(string(got.Result), `"completed"`) {
			t.Fatalf("the task after its stream was cancelled: %s", got.Raw)
		}
		for _, m := range before {
			if m.Method == spec.MethodTaskEvent || m.IsResponse(`"s1"`) {
				t.Fatalf("the cancelled stream went on: %s", m.Raw)
			}
		}
		// Once its stream ended, the task can be streamed again.
		if evs, _ := streamTask(t, c, "s3", task, ""); describe(evs) != "progress:0 progress:1 progress:2 progress:3 status:4" {
			t.Fatalf("streamed again: %s", describe(evs))
		}
	})
}

// A cursor that is not an event's seq is refused (-32602); one older than the
// oldest event kept (here the task's queue holds a few hundred bytes, so early
// progress goes) is answered events_gone (-32010) with the oldest kept; an
// unknown task is unknown_task.
func TestTaskStreamRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		core, err := mcp.New(demo.Server("test"), &mcp.Options{Tools: demo.Policies(), Engine: &resume.Options{QueueBytes: 600}})
		if err != nil {
			t.Fatal(err)
		}
		c := e2etest.NewClient(t, serveCore(t, core)(t))
		c.Initialize(`{}`)
		task := newTask(t, c, "c", 10)
		for _, bad := range []string{`"1"`, `-1`, `1.5`, `18446744073709551615`, `{}`} {
			c.Send(`{"jsonrpc":"2.0","id":"b","method":"tasks/stream","params":{"taskId":%q,"after":%s}}`, task, bad)
			if m, _ := c.Response(`"b"`); m.Error == nil || m.Error.Code != spec.CodeInvalidParams {
				t.Fatalf("after %s: %s, want -32602", bad, m.Raw)
			}
		}
		c.Send(`{"jsonrpc":"2.0","id":"u","method":"tasks/stream","params":{"taskId":"tk1.nope"}}`)
		if m, _ := c.Response(`"u"`); m.Error == nil || m.Error.Reason != spec.ReasonUnknownTask {
			t.Fatalf("an unknown task: %s", m.Raw)
		}
		time.Sleep(11 * time.Second) // done; its early progress dropped for the budget
		synctest.Wait()
		c.Send(`{"jsonrpc":"2.0","id":"g","method":"tasks/stream","params":{"taskId":%q,"after":0}}`, task)
		m, _ := c.Response(`"g"`)
		if m.Error == nil || m.Error.Code != spec.CodeEventsGone || m.Error.Reason != spec.ReasonEventsGone {
			t.Fatalf("a cursor older than the events kept: %s", m.Raw)
		}
		if e := m.Error; e.TaskID != task || e.EarliestSeq < 2 {
			t.Fatalf("events_gone data: %s", m.Raw)
		}
		earliest := m.Error.EarliestSeq
		evs, resp := streamTask(t, c, "k", task, fmt.Sprint(earliest-1))
		if resp.Error != nil {
			t.Fatalf("streamed again from the oldest kept: %s", resp.Raw)
		}
		if len(evs) == 0 || evs[0].Seq != earliest || evs[len(evs)-1].Type != spec.EventTypeStatus {
			t.Fatalf("from the oldest kept: %s", describe(evs))
		}
	})
}

// The 2026-07-28 form (the Tasks extension): tasks/stream of a task another
// principal made is answered as an unknown task; its own principal streams its
// events and gets resultType complete.
func TestTaskStreamModern(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		core, err := mcp.New(demo.Server("test"), &mcp.Options{Tools: demo.Policies()})
		if err != nil {
			t.Fatal(err)
		}
		dial := serveAs(t, core)
		alice, eve := dial(&mcp.SessionOptions{Principal: "alice"}), dial(&mcp.SessionOptions{Principal: "eve"})
		ext := fmt.Sprintf(`{"extensions":{%q:{}}}`, spec.ExtensionTasks)
		alice.Modern(`1`, "tools/call", `"name":"countdown","arguments":{"seconds":2,"steps":2}`, ext, `"progressToken":"p"`)
		m, _ := alice.Response(`1`)
		var created struct{ TaskID string }
		if err := json.Unmarshal(m.Result, &created); err != nil || created.TaskID == "" {
			t.Fatalf("no task: %s", m.Raw)
		}
		eve.Modern(`2`, spec.MethodTasksStream, fmt.Sprintf(`"taskId":%q`, created.TaskID), ext)
		if m, _ := eve.Response(`2`); m.Error == nil || m.Error.Reason != spec.ReasonUnknownTask {
			t.Fatalf("another principal's task: %s", m.Raw)
		}
		alice.Modern(`3`, spec.MethodTasksStream, fmt.Sprintf(`"taskId":%q`, created.TaskID), `{}`)
		if m, _ := alice.Response(`3`); m.Error == nil || m.Error.Code != spec.CodeMissingCapability {
			t.Fatalf("without the extension: %s", m.Raw)
		}
		alice.Modern(`4`, spec.MethodTasksStream, fmt.Sprintf(`"taskId":%q`, created.TaskID), ext)
		resp, before := alice.Response(`4`)
		var types []string
		for _, m := range before {
			if m.Method == spec.MethodTaskEvent {
				var ev taskEvent
				_ = json.Unmarshal(m.Params, &ev)
				types = append(types, fmt.Sprintf("%s:%d", strings.TrimPrefix(ev.Type, "io.mcp-resume."), ev.Seq))
			}
		}
		if fmt.Sprint(types) != "[progress:0 progress:1 status:2]" || !strings.Contains(string(resp.Result), `"resultType":"complete"`) {
			t.Fatalf("events %v, response %s", types, resp.Raw)
		}
	})
}

// tasks/stream is advertised where tasks are: in the 2025-11-25 tasks
// capability at initialize (beside list, cancel and tools/call, and beside
// the resumable requests capability for a client that declared it), and in
// the tasks extension's settings in server/discover.
func TestTaskStreamAdvertised(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		core, err := mcp.New(demo.Server("test"), &mcp.Options{Tools: demo.Policies()})
		if err != nil {
			t.Fatal(err)
		}
		dial := serveCore(t, core)
		for _, caps := range []string{`{}`, `{"resumableRequests":{}}`} {
			c := e2etest.NewClient(t, dial(t))
			m := c.Initialize(caps)
			var r struct {
				Capabilities struct {
					Tasks struct {
						List, Cancel, Stream *struct{}
						Requests             struct{ Tools struct{ Call *struct{} } }
					}
					Experimental map[string]json.RawMessage
					Tools        *struct{}
				}
				ServerInfo struct{ Name string }
			}
			if err := json.Unmarshal(m.Result, &r); err != nil {
				t.Fatal(err)
			}
			tk := r.Capabilities.Tasks
			if tk.Stream == nil || tk.List == nil || tk.Cancel == nil || tk.Requests.Tools.Call == nil || r.Capabilities.Tools == nil || r.ServerInfo.Name == "" {
				t.Errorf("initialize for %s: %s", caps, m.Result)
			}
			if _, ok := r.Capabilities.Experimental[spec.CapabilityName]; ok != (caps != `{}`) {
				t.Errorf("initialize for %s: the resumable capability %v: %s", caps, ok, m.Result)
			}
		}
		c := e2etest.NewClient(t, dial(t))
		c.Modern(`1`, "server/discover", "", `{}`)
		m, _ := c.Response(`1`)
		var d struct {
			Capabilities struct {
				Extensions map[string]struct{ Stream *struct{} }
			}
		}
		if err := json.Unmarshal(m.Result, &d); err != nil || d.Capabilities.Extensions[spec.ExtensionTasks].Stream == nil {
			t.Errorf("server/discover: %s", m.Raw)
		}
	})
}
