package mcp_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/server"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/mcp/e2etest"
	"github.com/mcp-resume/mcp-resume/resume/memstore"
	"github.com/mcp-resume/mcp-resume/servers/demo"
	"github.com/mcp-resume/mcp-resume/spec"
	"github.com/mcp-resume/mcp-resume/testkit/poll"
)

// spans is a span processor that keeps every span that ends and tells a
// waiter when one did.
type spans struct {
	mu      sync.Mutex // guards the fields below
	ended   []sdktrace.ReadOnlySpan
	changed chan struct{} // closed (and replaced) when a span ends
}

func newSpans() *spans { return &spans{changed: make(chan struct{})} }

func (s *spans) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (s *spans) OnEnd(sp sdktrace.ReadOnlySpan) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ended = append(s.ended, sp)
	close(s.changed)
	s.changed = make(chan struct{})
}
func (s *spans) Shutdown(context.Context) error   { return nil }
func (s *spans) ForceFlush(context.Context) error { return nil }

// provider returns a tracer provider whose spans s keeps.
func (s *spans) provider() trace.TracerProvider {
	return sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(s))
}

// wait returns the ended spans once cond holds for them.
func (s *spans) wait(t *testing.T, what string, cond func([]sdktrace.ReadOnlySpan) bool) []sdktrace.ReadOnlySpan {
	t.Helper()
	deadline := time.NewTimer(20 * time.Second)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		got, changed := slices.Clone(s.ended), s.changed
		s.mu.Unlock()
		if cond(got) {
			return got
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("waiting for %s: %d spans ended: %v", what, len(got), spanNames(got))
		}
	}
}

func spanNames(ss []sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.Name())
	}
	return out
}

// named returns the spans named name.
func named(ss []sdktrace.ReadOnlySpan, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range ss {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

func attrsOf(s sdktrace.ReadOnlySpan) map[string]string {
	m := map[string]string{}
	for _, kv := range s.Attributes() {
		m[string(kv.Key)] = kv.Value.Emit()
	}
	return m
}

func eventNames(s sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, e := range s.Events() {
		out = append(out, e.Name)
	}
	return out
}

// spanText is everything a span says: its name, attributes, events, links and
// status, for a scan for what must never be there.
func spanText(s sdktrace.ReadOnlySpan) string {
	var b strings.Builder
	kv := func(attrs []attribute.KeyValue) {
		for _, a := range attrs {
			fmt.Fprintf(&b, " %s=%s", a.Key, a.Value.Emit())
		}
	}
	b.WriteString(s.Name())
	kv(s.Attributes())
	for _, e := range s.Events() {
		b.WriteString(" " + e.Name)
		kv(e.Attributes)
	}
	for _, l := range s.Links() {
		b.WriteString(" " + l.SpanContext.TraceID().String())
		kv(l.Attributes)
	}
	b.WriteString(" " + s.Status().Description)
	kv(s.Resource().Attributes())
	return b.String()
}

// noSecrets fails t when any span says one of secrets.
func noSecrets(t *testing.T, ss []sdktrace.ReadOnlySpan, secrets ...string) {
	t.Helper()
	for _, s := range ss {
		text := spanText(s)
		for _, sec := range secrets {
			if sec != "" && strings.Contains(text, sec) {
				t.Errorf("span %q holds a secret %q: %s", s.Name(), sec, text)
			}
		}
	}
}

// The client's trace context in a call's _meta, for the tests: a sampled
// span of a trace of its own.
const (
	clientTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	clientSpan  = "00f067aa0ba902b7"
	resumeSpan  = "b7ad6b7169203331"
)

func traceparent(span string) string { return "00-" + clientTrace + "-" + span + "-01" }

// A call with a trace context in _meta, dropped after two progress steps and
// resumed from a new session: its SERVER span is a child of the client's span
// with the conventions' attributes, stays open across the drop (detached and
// attached are its events) and ends when the result reaches the new session;
// getStatus and resume are spans of the same trace, children of the call's,
// linked to the client's span of each; no token anywhere.
func TestTraceDropAndResume(t *testing.T) {
	rec := newSpans()
	core, err := mcp.New(demo.Server("test"), &mcp.Options{Tools: demo.Policies(), TracerProvider: rec.provider()})
	if err != nil {
		t.Fatal(err)
	}
	dial := serveSessions(t, core)
	stdio := &mcp.SessionOptions{Transport: mcp.TransportStdio}

	a := e2etest.NewClient(t, dial(t, stdio))
	a.Initialize(`{"resumableRequests":{}}`)
	a.Send(`{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"countdown","arguments":{"seconds":1,"steps":10},"_meta":{"progressToken":"p","traceparent":%q,"tracestate":"vendor=x"}}}`, traceparent(clientSpan))
	pol := e2etest.PolicyOf(t, a.Next())
	a.Until(func(m e2etest.Msg) bool { return e2etest.Progress(m) == 2 })
	a.Close()
	// The server sees the connection go before b resumes (else b takes the
	// request over from a, and it was never detached).
	poll.Until(t, 10*time.Second, "the request's detachment", func() bool { return core.Engine().Stats().Detached == 1 })

	b := e2etest.NewClient(t, dial(t, stdio))
	b.Initialize(`{"resumableRequests":{}}`)
	b.Send(`{"jsonrpc":"2.0","id":"s","method":"requests/getStatus","params":{"requestId":11,"resumeToken":%q,"_meta":{"traceparent":%q}}}`, pol.ResumeToken, traceparent(resumeSpan))
	if m, _ := b.Response(`"s"`); m.Error != nil {
		t.Fatalf("getStatus: %v", m.Error)
	}
	b.Resume(`11`, pol.ResumeToken)
	if resp, _ := b.Response(`11`); e2etest.Text(resp) != "countdown done: 10 of 10 steps" {
		t.Fatalf("result %s", resp.Raw)
	}

	got := rec.wait(t, "the call's span", func(ss []sdktrace.ReadOnlySpan) bool {
		return len(named(ss, "tools/call countdown")) == 1 && len(named(ss, "requests/resume")) == 1
	})
	call := named(got, "tools/call countdown")[0]
	if call.SpanKind() != trace.SpanKindServer || call.Parent().TraceID().String() != clientTrace ||
		call.Parent().SpanID().String() != clientSpan || !call.Parent().IsRemote() {
		t.Errorf("call span: kind %v, parent %v; want a SERVER span below the client's %s", call.SpanKind(), call.Parent(), clientSpan)
	}
	if ts := call.SpanContext().TraceState().Get("vendor"); ts != "x" {
		t.Errorf("call span's tracestate: vendor=%q, want the client's", ts)
	}
	at := attrsOf(call)
	for k, want := range map[string]string{
		"mcp.method.name": "tools/call", "gen_ai.tool.name": "countdown", "gen_ai.operation.name": "execute_tool",
		"jsonrpc.request.id": "11", "mcp.protocol.version": "2025-06-18", "network.transport": "pipe",
	} {
		if at[k] != want {
			t.Errorf("call span: %s = %q, want %q (all: %v)", k, at[k], want, at)
		}
	}
	if at["mcp.session.id"] == "" {
		t.Errorf("call span: no mcp.session.id (all: %v)", at)
	}
	if _, ok := at["error.type"]; ok || call.Status().Code != 0 {
		t.Errorf("call span: error %q, status %v; want none", at["error.type"], call.Status())
	}
	ev := eventNames(call)
	// Completed while attached to session B: its response did not wait, so
	// no completed event.
	if i, j := slices.Index(ev, "mcp_resume.detached"), slices.Index(ev, "mcp_resume.attached"); slices.Index(ev, "mcp_resume.resumable") != 0 || i < 0 || j < i ||
		slices.Contains(ev, "mcp_resume.completed") {
		t.Errorf("call span events %v: want resumable first, detached before attached, and no completed", ev)
	}

	for _, name := range []string{"requests/getStatus", "requests/resume"} {
		s := named(got, name)
		if len(s) != 1 {
			t.Fatalf("%d %s spans, want 1", len(s), name)
		}
		if s[0].Parent().TraceID() != call.SpanContext().TraceID() || s[0].Parent().SpanID() != call.SpanContext().SpanID() {
			t.Errorf("%s span's parent %v, want the call's span %v", name, s[0].Parent(), call.SpanContext())
		}
		if s[0].SpanKind() != trace.SpanKindServer || attrsOf(s[0])["mcp.method.name"] != name {
			t.Errorf("%s span: kind %v, attributes %v", name, s[0].SpanKind(), attrsOf(s[0]))
		}
		if s[0].EndTime().After(call.EndTime()) {
			t.Errorf("%s span ends after the call's", name)
		}
	}
	if l := named(got, "requests/getStatus")[0].Links(); len(l) != 1 || l[0].SpanContext.SpanID().String() != resumeSpan {
		t.Errorf("getStatus span's links %v, want the client's span %s", l, resumeSpan)
	}
	if l := named(got, "requests/resume")[0].Links(); len(l) != 0 {
		t.Errorf("resume span's links %v: its client sent no trace context", l)
	}
	if n := len(named(got, "initialize")); n != 2 {
		t.Errorf("%d initialize spans, want one per session", n)
	}
	noSecrets(t, got, pol.ResumeToken)
}

// A call's answer shapes its span: a tool's own error is error.type
// tool_error; a wrong token is -32602 (the client's mistake: no error.type)
// with its reason; a call key and a task id never reach a span, and a task's
// span ends with its work.
func TestTraceErrors(t *testing.T) {
	rec := newSpans()
	_, dial := serve(t, &mcp.Options{Tools: demo.Policies(), TracerProvider: rec.provider()})
	c := e2etest.NewClient(t, dial(t))
	c.Initialize(`{"resumableRequests":{}}`)
	c.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"countdown","arguments":{"seconds":0,"steps":1,"fail":true}}}`)
	c.Response(`1`)
	const wrong = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	if _, err := c.GetStatus(`2`, `1`, wrong); err == nil {
		t.Fatal("getStatus with a wrong token answered")
	}
	const key = "k3y-0f-a-ca11-that-is-l0ng-en0ugh-t0-be-a-key"
	c.Send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},"_meta":{"io.mcp-resume/key":%q}}}`, key)
	c.Response(`3`)
	c.Send(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"summarize","arguments":{"text":"x"},"task":{}}}`)
	created, _ := c.Response(`4`)
	var task struct {
		Task struct {
			ID string `json:"taskId"`
		} `json:"task"`
	}
	if err := json.Unmarshal(created.Result, &task); err != nil || task.Task.ID == "" {
		t.Fatalf("no task created: %s", created.Raw)
	}
	c.Send(`{"jsonrpc":"2.0","id":5,"method":"tasks/cancel","params":{"taskId":%q}}`, task.Task.ID)
	c.Response(`5`)
	c.Send(`{"jsonrpc":"2.0","id":6,"method":"made/up-by-the-client-%s","params":{}}`, strings.Repeat("x", 100))
	c.Response(`6`)

	got := rec.wait(t, "the four calls' spans", func(ss []sdktrace.ReadOnlySpan) bool {
		return len(named(ss, "tools/call countdown")) == 1 && len(named(ss, "requests/getStatus")) == 1 && len(named(ss, "tools/call echo")) == 1 &&
			len(named(ss, "tools/call summarize")) == 1 && len(named(ss, "_OTHER")) == 1
	})
	if at := attrsOf(named(got, "_OTHER")[0]); at["mcp.method.name"] != "_OTHER" {
		t.Errorf("a made-up method's span: attributes %v, want mcp.method.name _OTHER", at)
	}
	if ts := named(got, "tools/call summarize")[0]; attrsOf(ts)["error.type"] != "cancelled" || !slices.Contains(eventNames(ts), "mcp_resume.resumable") {
		t.Errorf("cancelled task's span: attributes %v, events %v", attrsOf(ts), eventNames(ts))
	}
	fail := named(got, "tools/call countdown")[0]
	if at := attrsOf(fail); at["error.type"] != "tool_error" || fail.Status().Code.String() != "Error" {
		t.Errorf("failed tool: attributes %v, status %v", at, fail.Status())
	}
	gs := named(got, "requests/getStatus")[0]
	if at := attrsOf(gs); at["rpc.response.status_code"] != "-32602" || at["mcp_resume.error.reason"] != "not_found" || at["error.type"] != "" {
		t.Errorf("wrong token: attributes %v", at)
	}
	if gs.Parent().IsValid() {
		t.Errorf("wrong token: the span has a parent %v; a token that names nothing leads to no trace", gs.Parent())
	}
	noSecrets(t, got, wrong, key, task.Task.ID)
}

// Without a TracerProvider the core makes no span, even where a global one is
// set: tracing is what the options say.
func TestTraceOff(t *testing.T) {
	rec := newSpans()
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(rec.provider())
	t.Cleanup(func() { otel.SetTracerProvider(prev) })
	_, dial := serve(t, nil)
	c := e2etest.NewClient(t, dial(t))
	c.Initialize(`{}`)
	c.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},"_meta":{"traceparent":%q}}}`, traceparent(clientSpan))
	c.Response(`1`)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.ended) != 0 {
		t.Fatalf("spans without a TracerProvider: %v", spanNames(rec.ended))
	}
}

// A call on one instance of a cluster resumed on the other: the resume's span,
// made by the instance that does not own the request, is a child of the
// call's span on its owner (the trace context came with the request's record
// in the shared store), and the call's span, on the owner, ends when the
// result reaches the client through the other instance.
func TestTraceAcrossInstances(t *testing.T) {
	rec := newSpans() // both instances', as one collector would have them
	ins := startClusterOf(t, 2, 5*time.Second, mcp.Options{Tools: demo.Policies(), TracerProvider: rec.provider()},
		func() *server.MCPServer { return demo.Server("test") })
	a := e2etest.NewClient(t, ins[0].dial(t))
	a.Initialize(`{"resumableRequests":{}}`)
	a.Send(`{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"countdown","arguments":{"seconds":1,"steps":10},"_meta":{"progressToken":"p","traceparent":%q}}}`, traceparent(clientSpan))
	pol := e2etest.PolicyOf(t, a.Next())
	a.Until(func(m e2etest.Msg) bool { return e2etest.Progress(m) == 2 })
	a.Close()

	b := e2etest.NewClient(t, ins[1].dial(t))
	b.Initialize(`{"resumableRequests":{}}`)
	b.Resume(`11`, pol.ResumeToken)
	if resp, _ := b.Response(`11`); e2etest.Text(resp) != "countdown done: 10 of 10 steps" {
		t.Fatalf("result %s", resp.Raw)
	}
	got := rec.wait(t, "the call's span and the resume's", func(ss []sdktrace.ReadOnlySpan) bool {
		return len(named(ss, "tools/call countdown")) == 1 && len(named(ss, "requests/resume")) == 1
	})
	call, res := named(got, "tools/call countdown")[0], named(got, "requests/resume")[0]
	if call.Parent().SpanID().String() != clientSpan || res.Parent().SpanID() != call.SpanContext().SpanID() ||
		res.SpanContext().TraceID().String() != clientTrace {
		t.Errorf("call span's parent %v, resume span's parent %v: want the client's, and the call's %v", call.Parent(), res.Parent(), call.SpanContext())
	}
	noSecrets(t, got, pol.ResumeToken)
}

// taskSecrets returns a task id and the resume token it carries (a task id
// is a token in another form: neither may reach a span).
func taskSecrets(t *testing.T, id string) []string {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(id, "tk1."))
	var tid struct {
		Token string `json:"t"`
	}
	if err != nil || json.Unmarshal(b, &tid) != nil || tid.Token == "" {
		t.Fatalf("task id %q: not of the form the test knows", id)
	}
	return []string{id, tid.Token}
}

// The task requests of both eras (2025-11-25: tasks/get, tasks/stream,
// tasks/result, tasks/cancel; 2026-07-28: tasks/get, tasks/stream,
// tasks/update, tasks/cancel) are SERVER spans in their task's trace: each a
// child of the span of the call that made the task, linked to the client's
// span of it when it sent one; tasks/list, which names many tasks, is a span
// of its own. No task id, nor the token inside one, is in any span.
func TestTraceTaskRequests(t *testing.T) {
	rec := newSpans()
	_, dial := serve(t, &mcp.Options{Tools: demo.Policies(), TracerProvider: rec.provider()})
	c := e2etest.NewClient(t, dial(t))
	c.Initialize(`{"resumableRequests":{}}`)

	// 2025-11-25.
	c.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"countdown","arguments":{"seconds":0.2,"steps":2},"task":{},"_meta":{"traceparent":%q}}}`, traceparent(clientSpan))
	created, _ := c.Response(`1`)
	var legacy struct {
		Task struct {
			ID string `json:"taskId"`
		} `json:"task"`
	}
	if err := json.Unmarshal(created.Result, &legacy); err != nil || legacy.Task.ID == "" {
		t.Fatalf("no task created: %s", created.Raw)
	}
	old := legacy.Task.ID
	c.Send(`{"jsonrpc":"2.0","id":2,"method":"tasks/get","params":{"taskId":%q,"_meta":{"traceparent":%q}}}`, old, traceparent(resumeSpan))
	c.Response(`2`)
	c.Send(`{"jsonrpc":"2.0","id":3,"method":"tasks/stream","params":{"taskId":%q}}`, old)
	if m, _ := c.Response(`3`); m.Error != nil {
		t.Fatalf("tasks/stream: %s", m.Raw)
	}
	c.Send(`{"jsonrpc":"2.0","id":4,"method":"tasks/result","params":{"taskId":%q}}`, old)
	if m, _ := c.Response(`4`); !strings.Contains(string(m.Result), "countdown done") {
		t.Fatalf("tasks/result: %s", m.Raw)
	}
	c.Send(`{"jsonrpc":"2.0","id":5,"method":"tasks/cancel","params":{"taskId":%q}}`, old)
	if m, _ := c.Response(`5`); m.Error == nil {
		t.Fatalf("tasks/cancel of an ended task: %s, want an error", m.Raw)
	}
	c.Send(`{"jsonrpc":"2.0","id":6,"method":"tasks/list","params":{}}`)
	c.Response(`6`)

	// 2026-07-28.
	ext := fmt.Sprintf(`{"extensions":{%q:{}}}`, spec.ExtensionTasks)
	c.Modern(`"t"`, "tools/call", `"name":"countdown","arguments":{"seconds":30,"steps":30}`, ext, fmt.Sprintf(`"traceparent":%q`, traceparent(clientSpan)))
	m, _ := c.Response(`"t"`)
	var modern struct {
		ID string `json:"taskId"`
	}
	if err := json.Unmarshal(m.Result, &modern); err != nil || modern.ID == "" {
		t.Fatalf("no task created: %s", m.Raw)
	}
	c.Modern(`"g"`, spec.MethodTasksGet, fmt.Sprintf(`"taskId":%q`, modern.ID), ext)
	c.Response(`"g"`)
	c.Modern(`"u"`, spec.MethodTasksUpdate, fmt.Sprintf(`"taskId":%q,"inputResponses":{}`, modern.ID), ext)
	c.Response(`"u"`)
	c.Modern(`"s"`, spec.MethodTasksStream, fmt.Sprintf(`"taskId":%q`, modern.ID), ext)
	c.Modern(`"x"`, spec.MethodTasksCancel, fmt.Sprintf(`"taskId":%q`, modern.ID), ext)
	answered := map[string]bool{}
	c.Until(func(m e2etest.Msg) bool { // the cancel's answer, and the stream's, which ends with the task, in any order
		for _, id := range []string{`"x"`, `"s"`} {
			answered[id] = answered[id] || m.IsResponse(id)
		}
		return answered[`"x"`] && answered[`"s"`]
	})

	got := rec.wait(t, "the task requests' spans", func(ss []sdktrace.ReadOnlySpan) bool {
		return len(named(ss, "tools/call countdown")) == 2 && len(named(ss, "tasks/get")) == 2 && len(named(ss, "tasks/stream")) == 2 &&
			len(named(ss, "tasks/result")) == 1 && len(named(ss, "tasks/cancel")) == 2 && len(named(ss, "tasks/update")) == 1 &&
			len(named(ss, "tasks/list")) == 1
	})
	// The call spans by era: the 2025 one's request id is 1.
	calls := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range named(got, "tools/call countdown") {
		calls[attrsOf(s)["jsonrpc.request.id"]] = s
		if s.Parent().SpanID().String() != clientSpan {
			t.Errorf("task call %s: parent %v, want the client's span", attrsOf(s)["jsonrpc.request.id"], s.Parent())
		}
	}
	want := map[string]sdktrace.ReadOnlySpan{"1": calls["1"], "2": calls["1"], "3": calls["1"], "4": calls["1"], "5": calls["1"],
		"g": calls["t"], "u": calls["t"], "s": calls["t"], "x": calls["t"]}
	for _, s := range got {
		if !strings.HasPrefix(s.Name(), "tasks/") || s.Name() == "tasks/list" {
			continue
		}
		id := attrsOf(s)["jsonrpc.request.id"]
		call := want[id]
		if call == nil {
			t.Errorf("span %s of request %q: not one of the test's", s.Name(), id)
			continue
		}
		if s.SpanKind() != trace.SpanKindServer || s.Parent().SpanID() != call.SpanContext().SpanID() || s.SpanContext().TraceID() != call.SpanContext().TraceID() {
			t.Errorf("span %s (request %s): parent %v, want the span of the call that made its task %v", s.Name(), id, s.Parent(), call.SpanContext())
		}
	}
	for _, s := range named(got, "tasks/get") {
		if attrsOf(s)["jsonrpc.request.id"] == "2" {
			if l := s.Links(); len(l) != 1 || l[0].SpanContext.SpanID().String() != resumeSpan {
				t.Errorf("tasks/get's links %v, want the client's span of it", l)
			}
		}
	}
	if s := named(got, "tasks/cancel"); len(s) == 2 {
		for _, x := range s {
			if id := attrsOf(x)["jsonrpc.request.id"]; id == "5" && attrsOf(x)["rpc.response.status_code"] != "-32602" {
				t.Errorf("tasks/cancel of an ended task: attributes %v", attrsOf(x))
			}
		}
	}
	if l := named(got, "tasks/list")[0]; l.Parent().IsValid() {
		t.Errorf("tasks/list's parent %v: it is no task's", l.Parent())
	}
	noSecrets(t, got, append(taskSecrets(t, old), taskSecrets(t, modern.ID)...)...)
}

// Across a restart on a durable store (here a memstore that outlives the
// first server): a restartable call run again is a SERVER span of the call's
// trace, a child of the span of its first run (which ended with the first
// server: error.type shutdown), linked to the client's span, its events and
// end the request's; a call that is not restartable, failed with
// server_restarted at the recovery, is an INTERNAL span of its own trace
// below the span of its run. Both resumed from a new session.
func TestTraceRestart(t *testing.T) {
	rec := newSpans()
	opts := mcp.Options{Store: memstore.New(), TracerProvider: rec.provider(), Tools: map[string]mcp.Policy{
		"countdown": {Mode: mcp.Always, Restartable: true}, "ask": {Mode: mcp.Always}}}
	core1, err := mcp.New(demo.Server("test"), &opts)
	if err != nil {
		t.Fatal(err)
	}
	a := e2etest.NewClient(t, serveSessions(t, core1)(t, nil))
	a.Initialize(`{"resumableRequests":{}}`)
	const askSpan = "1111111111111111"
	a.Send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"ask","arguments":{"delay":30},"_meta":{"traceparent":%q}}}`, traceparent(askSpan))
	polAsk := e2etest.PolicyOf(t, a.Next())
	a.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"countdown","arguments":{"seconds":0.6,"steps":3},"_meta":{"progressToken":"p","traceparent":%q}}}`, traceparent(clientSpan))
	polCount := e2etest.PolicyOf(t, a.Next())
	a.Close()
	core1.Close() // the requests stay in the store, processing

	core2, err := mcp.New(demo.Server("test"), &opts)
	if err != nil {
		t.Fatal(err)
	}
	b := e2etest.NewClient(t, serveSessions(t, core2)(t, nil))
	b.Initialize(`{"resumableRequests":{}}`)
	b.Resume(`1`, polCount.ResumeToken)
	if resp, _ := b.Response(`1`); e2etest.Text(resp) != "countdown done: 3 of 3 steps" {
		t.Fatalf("the call run again: %s", resp.Raw)
	}
	b.Resume(`2`, polAsk.ResumeToken)
	if resp, _ := b.Response(`2`); resp.Error == nil || !strings.Contains(string(resp.Raw), "server_restarted") {
		t.Fatalf("the call that is not restartable: %s, want server_restarted", resp.Raw)
	}

	got := rec.wait(t, "both runs of the call and the failed one", func(ss []sdktrace.ReadOnlySpan) bool {
		return len(named(ss, "tools/call countdown")) == 2 && len(named(ss, "mcp_resume.request_failed")) == 1 && len(named(ss, "tools/call ask")) == 1
	})
	var first, rerun sdktrace.ReadOnlySpan
	for _, s := range named(got, "tools/call countdown") {
		if attrsOf(s)["mcp_resume.rerun"] == "true" {
			rerun = s
		} else {
			first = s
		}
	}
	if first == nil || rerun == nil {
		t.Fatalf("countdown spans %v, %v: want the first run and the rerun", first, rerun)
	}
	if first.Parent().SpanID().String() != clientSpan || attrsOf(first)["error.type"] != "shutdown" {
		t.Errorf("first run: parent %v, attributes %v", first.Parent(), attrsOf(first))
	}
	if rerun.SpanKind() != trace.SpanKindServer || rerun.SpanContext().TraceID().String() != clientTrace ||
		rerun.Parent().SpanID() != first.SpanContext().SpanID() {
		t.Errorf("rerun: kind %v, parent %v; want a SERVER span below the first run %v", rerun.SpanKind(), rerun.Parent(), first.SpanContext())
	}
	if l := rerun.Links(); len(l) != 1 || l[0].SpanContext.SpanID().String() != clientSpan {
		t.Errorf("rerun's links %v, want the client's span (from the stored request)", l)
	}
	at := attrsOf(rerun)
	if at["gen_ai.tool.name"] != "countdown" || at["jsonrpc.request.id"] != "1" || at["mcp.session.id"] != "" || at["error.type"] != "" {
		t.Errorf("rerun's attributes %v", at)
	}
	if ev := eventNames(rerun); len(ev) == 0 || ev[0] != "mcp_resume.rerun" || !slices.Contains(ev, "mcp_resume.attached") {
		t.Errorf("rerun's events %v: want rerun first, and the attach", ev)
	}
	if resume := named(got, "requests/resume"); len(resume) < 1 || !slices.ContainsFunc(resume, func(s sdktrace.ReadOnlySpan) bool {
		return s.Parent().SpanID() == first.SpanContext().SpanID()
	}) {
		t.Errorf("no resume span below the call's stored span")
	}
	ask := named(got, "tools/call ask")[0]
	lost := named(got, "mcp_resume.request_failed")[0]
	if lost.SpanKind() != trace.SpanKindInternal || lost.Parent().SpanID() != ask.SpanContext().SpanID() || lost.SpanContext().TraceID() != ask.SpanContext().TraceID() {
		t.Errorf("failed request's span: kind %v, parent %v; want an INTERNAL span below the call's %v", lost.SpanKind(), lost.Parent(), ask.SpanContext())
	}
	if at := attrsOf(lost); at["error.type"] != "server_restarted" || at["jsonrpc.request.id"] != "2" || lost.Status().Code.String() != "Error" {
		t.Errorf("failed request's span: attributes %v, status %v", at, lost.Status())
	}
	noSecrets(t, got, polCount.ResumeToken, polAsk.ResumeToken)
}

// An instance of a cluster that dies: the survivor's claim fails its request
// (not restartable) with owner_lost, an INTERNAL span of the request's trace
// below the request's span on the dead instance (the trace context came with
// the record in the shared store). (A restartable one runs again, as after a
// restart: TestTraceRestart.)
func TestTraceOwnerLost(t *testing.T) {
	rec := newSpans()
	const lease = time.Second
	ins := startClusterOf(t, 2, lease, mcp.Options{TracerProvider: rec.provider()}, func() *server.MCPServer { return demo.Server("test") })
	a, b := ins[0], ins[1]
	ca := e2etest.NewClient(t, a.dial(t))
	ca.Initialize(`{"resumableRequests":{},"elicitation":{}}`)
	ca.Send(`{"jsonrpc":"2.0","id":"q","method":"tools/call","params":{"name":"ask","arguments":{"question":"?"},"_meta":{"traceparent":%q}}}`, traceparent(clientSpan))
	q := e2etest.PolicyOf(t, ca.Next())
	ca.Next() // the elicitation, never answered
	ca.Close()
	a.nc.Close() // A dies without a goodbye

	cb := e2etest.NewClient(t, b.dial(t))
	cb.Initialize(`{"resumableRequests":{},"elicitation":{}}`)
	got := rec.wait(t, "the failed request's span", func(ss []sdktrace.ReadOnlySpan) bool {
		return len(named(ss, "mcp_resume.request_failed")) == 1
	})
	lost := named(got, "mcp_resume.request_failed")[0]
	if at := attrsOf(lost); at["error.type"] != "owner_lost" || at["jsonrpc.request.id"] != "q" || lost.SpanKind() != trace.SpanKindInternal ||
		lost.SpanContext().TraceID().String() != clientTrace || lost.Parent().SpanID().String() == clientSpan {
		t.Errorf("owner_lost span: kind %v, attributes %v, parent %v; want it in the call's trace, below the call's span on A", lost.SpanKind(), at, lost.Parent())
	}
	cb.Resume(`"q"`, q.ResumeToken)
	if resp, _ := cb.Response(`"q"`); resp.Error == nil || resp.Error.Reason != spec.ReasonOwnerLost {
		t.Fatalf("q after A died: %s, want owner_lost", resp.Raw)
	}
	got = rec.wait(t, "the resume's span", func(ss []sdktrace.ReadOnlySpan) bool { return len(named(ss, "requests/resume")) == 1 })
	if res := named(got, "requests/resume")[0]; res.Parent().SpanID() != lost.Parent().SpanID() {
		t.Errorf("resume on B: parent %v, want the call's stored span %v", res.Parent(), lost.Parent())
	}
	noSecrets(t, got, q.ResumeToken)
}

// A call whose handler returns while no client is attached has the
// completed event (its response waits for a resume), at the time it
// completed; the span ends when the resume delivers the response.
func TestTraceCompletedWhileDetached(t *testing.T) {
	rec := newSpans()
	core, err := mcp.New(demo.Server("test"), &mcp.Options{TracerProvider: rec.provider()})
	if err != nil {
		t.Fatal(err)
	}
	dial := serveSessions(t, core)
	a := e2etest.NewClient(t, dial(t, nil))
	a.Initialize(`{"resumableRequests":{}}`)
	a.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"countdown","arguments":{"seconds":0.1,"steps":1}}}`)
	pol := e2etest.PolicyOf(t, a.Next())
	a.Close()
	b := e2etest.NewClient(t, dial(t, nil))
	b.Initialize(`{"resumableRequests":{}}`)
	i := 0
	poll.Until(t, 10*time.Second, "the call to complete while detached", func() bool {
		i++
		st, err := b.GetStatus(fmt.Sprint(100+i), `1`, pol.ResumeToken)
		return err == nil && st.Status == "completed"
	})
	completed := time.Now()
	b.Resume(`1`, pol.ResumeToken)
	b.Response(`1`)
	got := rec.wait(t, "the call's span", func(ss []sdktrace.ReadOnlySpan) bool { return len(named(ss, "tools/call countdown")) == 1 })
	call := named(got, "tools/call countdown")[0]
	var at time.Time
	for _, e := range call.Events() {
		if e.Name == "mcp_resume.completed" {
			at = e.Time
		}
	}
	if at.IsZero() || at.After(completed) || call.EndTime().Before(completed) {
		t.Errorf("events %v (completed at %v), span end %v; want the completion before the resume (%v), the end after it", eventNames(call), at, call.EndTime(), completed)
	}
}
