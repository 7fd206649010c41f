package e2etest

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/mcp-resume/mcp-resume/spec"
	"github.com/mcp-resume/mcp-resume/testkit/poll"
)

// The suite for clients of the 2026-07-28 era: no initialize, every request with
// its envelope (params._meta), input through input_required and retries (MRTR),
// SEP-975 declared per request as an extension.

// runModern runs the 2026-07-28 part of the suite.
func runModern(t *testing.T, h Harness) {
	t.Run("Discover", func(t *testing.T) { modernDiscover(t, h) })
	t.Run("PlainCall", func(t *testing.T) { modernPlainCall(t, h) })
	t.Run("ElicitationRounds", func(t *testing.T) { modernElicitation(t, h) })
	t.Run("SamplingRound", func(t *testing.T) { modernSampling(t, h) })
	t.Run("RequestStateRefused", func(t *testing.T) { modernBadState(t, h) })
	t.Run("MissingCapability", func(t *testing.T) { modernMissingCapability(t, h) })
	t.Run("ResumableByDeclaration", func(t *testing.T) { modernResumable(t, h) })
	t.Run("ClosedStreamCancels", func(t *testing.T) { modernClosedCancels(t, h) })
	t.Run("BadInput", func(t *testing.T) { modernBadInput(t, h) })
	t.Run("Tasks", func(t *testing.T) { modernTasks(t, h) })
}

// Envelope returns the params._meta of a 2026-07-28 request with the given client
// capabilities (a JSON object), plus extra members (`"progressToken":"p"`).
func Envelope(caps string, extra ...string) string {
	s := fmt.Sprintf(`"_meta":{%q:%q,%q:%s,%q:{"name":"e2etest","version":"1"}`,
		spec.MetaProtocolVersion, spec.Version2026, spec.MetaClientCapabilities, caps, spec.MetaClientInfo)
	for _, e := range extra {
		s += "," + e
	}
	return s + "}"
}

// resumableExt declares SEP-975 as a 2026 extension, with the ack extension.
var resumableExt = fmt.Sprintf(`{"extensions":{%q:{"extensions":[%q]}}}`, spec.ExtensionResumable, spec.ExtensionAck)

// Modern sends a 2026-07-28 request: method with params (a JSON object's members,
// without braces; may be empty) and the envelope for caps.
func (c *Client) Modern(id, method, params, caps string, meta ...string) {
	c.t.Helper()
	if params != "" {
		params += ","
	}
	c.Send(`{"jsonrpc":"2.0","id":%s,"method":%q,"params":{%s%s}}`, id, method, params, Envelope(caps, meta...))
}

// InputRequired is an input_required result.
type InputRequired struct {
	ResultType    string `json:"resultType"`
	InputRequests map[string]struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	} `json:"inputRequests"`
	RequestState string `json:"requestState"`
}

// inputRequired decodes m as an input_required result with one input request of
// method, returning its key and the result.
func inputRequired(t testing.TB, m Msg, method string) (string, InputRequired) {
	t.Helper()
	var ir InputRequired
	if m.Error != nil || json.Unmarshal(m.Result, &ir) != nil || ir.ResultType != "input_required" || ir.RequestState == "" || len(ir.InputRequests) != 1 {
		t.Fatalf("want input_required with one input request and a requestState, got %s", m.Raw)
	}
	for k, r := range ir.InputRequests {
		if r.Method != method {
			t.Fatalf("input request %s is %s, want %s: %s", k, r.Method, method, m.Raw)
		}
		return k, ir
	}
	return "", ir
}

func resultType(m Msg) string {
	var r struct {
		ResultType string `json:"resultType"`
	}
	_ = json.Unmarshal(m.Result, &r)
	return r.ResultType
}

func modernDiscover(t *testing.T, h Harness) {
	c := NewClient(t, h.Dial(t))
	c.Modern(`"d"`, spec.MethodServerDiscover, "", `{}`)
	m, _ := c.Response(`"d"`)
	var r struct {
		SupportedVersions []string `json:"supportedVersions"`
		Capabilities      struct {
			Extensions map[string]spec.ServerCapability `json:"extensions"`
		} `json:"capabilities"`
	}
	if m.Error != nil || json.Unmarshal(m.Result, &r) != nil {
		t.Fatalf("server/discover: %s", m.Raw)
	}
	if !slices.Contains(r.SupportedVersions, spec.Version2026) || !slices.Contains(r.SupportedVersions, "2025-11-25") {
		t.Errorf("supportedVersions %v: want both eras", r.SupportedVersions)
	}
	if adv, ok := r.Capabilities.Extensions[spec.ExtensionResumable]; !ok || adv.MaxWait <= 0 || !slices.Contains(adv.Extensions, spec.ExtensionAck) {
		t.Errorf("no resumable requests extension in %s", m.Raw)
	}
}

func modernPlainCall(t *testing.T, h Harness) {
	c := NewClient(t, h.Dial(t))
	c.Modern(`"p"`, "tools/call", `"name":"countdown","arguments":{"seconds":0.05,"steps":3}`, `{}`, `"progressToken":"pt"`)
	resp, before := c.Response(`"p"`)
	if len(before) != 3 {
		t.Fatalf("want 3 progress notifications, got %d: %v", len(before), before)
	}
	for i, m := range before {
		if Progress(m) != i+1 || strings.Contains(string(m.Raw), "io.mcp-resume") {
			t.Errorf("message %d is not plain progress %d: %s", i, i+1, m.Raw)
		}
	}
	if Text(resp) != "countdown done: 3 of 3 steps" || resultType(resp) != "complete" || strings.Contains(string(resp.Raw), "io.mcp-resume") {
		t.Errorf("result %s: want a plain complete result", resp.Raw)
	}
}

// modernElicitation: the demo's ask tool, written for the 2025 era, asks through
// RequestElicitation; the 2026 client gets input_required and retries, twice
// (the first retry answers nothing), and the tool, never run again, answers
// under the last retry's id. Each round comes on a new connection where the
// harness can reconnect (the first closed after its answer: a round answered
// input_required does not cancel its request), so on a cluster each retry lands
// on another instance than the one whose tool waits.
func modernElicitation(t *testing.T, h Harness) {
	c := NewClient(t, h.Dial(t))
	next := func() *Client {
		if !h.Reconnect {
			return c
		}
		c.Close()
		c = NewClient(t, h.Dial(t))
		return c
	}
	const caps = `{"elicitation":{}}`
	c.Modern(`"e1"`, "tools/call", `"name":"ask","arguments":{"question":"Name?"}`, caps)
	m, _ := c.Response(`"e1"`)
	key, ir := inputRequired(t, m, "elicitation/create")
	if !strings.Contains(string(ir.InputRequests[key].Params), "Name?") {
		t.Errorf("the elicitation does not carry the question: %s", m.Raw)
	}
	// A retry without the answer gets the same question again.
	next().Modern(`"e2"`, "tools/call", fmt.Sprintf(`"name":"ask","arguments":{"question":"Name?"},"requestState":%q`, ir.RequestState), caps)
	m, _ = c.Response(`"e2"`)
	key2, ir2 := inputRequired(t, m, "elicitation/create")
	if key2 != key {
		t.Errorf("the repeated question has key %s, want %s", key2, key)
	}
	next().Modern(`"e3"`, "tools/call", fmt.Sprintf(`"name":"ask","arguments":{"question":"Name?"},"inputResponses":{%q:{"action":"accept","content":{"answer":"Ada"}},"unknown":{}},"requestState":%q`, key, ir2.RequestState), caps)
	resp, _ := c.Response(`"e3"`)
	if Text(resp) != "answer: Ada" || resultType(resp) != "complete" {
		t.Errorf("result %s, want the answer under the retry's id", resp.Raw)
	}
}

func modernSampling(t *testing.T, h Harness) {
	c := NewClient(t, h.Dial(t))
	const caps = `{"sampling":{}}`
	c.Modern(`1`, "tools/call", `"name":"summarize","arguments":{"text":"a long story"}`, caps)
	m, _ := c.Response(`1`)
	key, ir := inputRequired(t, m, "sampling/createMessage")
	c.Modern(`2`, "tools/call", fmt.Sprintf(`"name":"summarize","arguments":{"text":"a long story"},"inputResponses":{%q:{"role":"assistant","content":{"type":"text","text":"short"},"model":"m"}},"requestState":%q`, key, ir.RequestState), caps)
	resp, _ := c.Response(`2`)
	if Text(resp) != "summary: short" {
		t.Errorf("result %s", resp.Raw)
	}
}

// modernBadState: a requestState that is not the server's, or names another
// tool, is refused with -32602; the waiting call still takes the real one.
func modernBadState(t *testing.T, h Harness) {
	c := NewClient(t, h.Dial(t))
	const caps = `{"elicitation":{}}`
	c.Modern(`"b1"`, "tools/call", `"name":"ask","arguments":{"question":"Name?"}`, caps)
	m, _ := c.Response(`"b1"`)
	key, ir := inputRequired(t, m, "elicitation/create")
	tampered := ir.RequestState[:len(ir.RequestState)-3] + "AAA"
	for i, tc := range []struct{ name, state string }{{"ask", tampered}, {"ask", "mr1.bm90LWpzb24"}, {"echo", ir.RequestState}} {
		id := fmt.Sprintf(`"bad%d"`, i)
		c.Modern(id, "tools/call", fmt.Sprintf(`"name":%q,"arguments":{"question":"Name?"},"inputResponses":{%q:{"action":"accept","content":{"answer":"Eve"}}},"requestState":%q`, tc.name, key, tc.state), caps)
		if m, _ := c.Response(id); m.Error == nil || m.Error.Code != spec.CodeInvalidParams || m.Error.Reason != spec.ReasonInvalidState {
			t.Errorf("requestState %d: got %s, want -32602 %s", i, m.Raw, spec.ReasonInvalidState)
		}
	}
	c.Modern(`"b2"`, "tools/call", fmt.Sprintf(`"name":"ask","arguments":{"question":"Name?"},"inputResponses":{%q:{"action":"accept","content":{"answer":"Ada"}}},"requestState":%q`, key, ir.RequestState), caps)
	if resp, _ := c.Response(`"b2"`); Text(resp) != "answer: Ada" {
		t.Errorf("the genuine retry after refused ones: %s", resp.Raw)
	}
}

func modernMissingCapability(t *testing.T, h Harness) {
	c := NewClient(t, h.Dial(t))
	c.Modern(`"m"`, "tools/call", `"name":"ask","arguments":{"question":"Name?"}`, `{}`)
	m, _ := c.Response(`"m"`)
	if m.Error == nil || m.Error.Code != spec.CodeMissingCapability || !strings.Contains(string(m.Raw), `"requiredCapabilities":{"elicitation":{}}`) {
		t.Errorf("got %s, want -32021 naming elicitation", m.Raw)
	}
}

// modernResumable: a 2026 client that declares SEP-975 in its request's
// capabilities gets the resume policy and sequence numbers, and resumes the
// request on a new connection after losing the first.
func modernResumable(t *testing.T, h Harness) {
	a := NewClient(t, h.Dial(t))
	a.Modern(`"r"`, "tools/call", `"name":"countdown","arguments":{"seconds":0.3,"steps":3}`, resumableExt, `"progressToken":"pr"`)
	pol := PolicyOf(t, a.Next())
	first := a.Until(func(m Msg) bool { return Progress(m) == 1 })
	if last := first[len(first)-1]; last.Seq() != 1 {
		t.Fatalf("progress 1 without seq 1: %s", last.Raw)
	}
	if !h.Reconnect {
		resp, _ := a.Response(`"r"`)
		if Text(resp) != "countdown done: 3 of 3 steps" || resp.Seq() != 4 {
			t.Errorf("result %s", resp.Raw)
		}
		return
	}
	a.Close()
	b := NewClient(t, h.Dial(t))
	b.Modern(`"r"`, spec.MethodResume, fmt.Sprintf(`"resumeToken":%q`, pol.ResumeToken), resumableExt, fmt.Sprintf(`%q:1`, spec.MetaAck))
	resp, before := b.Response(`"r"`)
	for _, m := range before {
		if p := Progress(m); p < 2 {
			t.Errorf("after ack 1, got %s", m.Raw)
		}
	}
	if Text(resp) != "countdown done: 3 of 3 steps" || resp.Seq() != 4 {
		t.Errorf("result %s", resp.Raw)
	}
}

// modernClosedCancels: without SEP-975, a 2026 request lives on its stream: the
// connection's loss cancels it.
func modernClosedCancels(t *testing.T, h Harness) {
	if h.Calls == nil || !h.Reconnect {
		t.Skip("the harness cannot see the server's calls")
	}
	c := NewClient(t, h.Dial(t))
	c.Modern(`"x"`, "tools/call", `"name":"countdown","arguments":{"seconds":30,"steps":30}`, `{}`, `"progressToken":"px"`)
	c.Until(func(m Msg) bool { return Progress(m) == 1 })
	c.Close()
	poll.Until(t, timeout, "the call's handler to stop", func() bool { return h.Calls() == 0 })
}

func modernBadInput(t *testing.T, h Harness) {
	c := NewClient(t, h.Dial(t))
	// An unknown version: -32022 with the versions served.
	c.Send(`{"jsonrpc":"2.0","id":"v","method":"tools/list","params":{"_meta":{%q:"2099-01-01",%q:{}}}}`, spec.MetaProtocolVersion, spec.MetaClientCapabilities)
	m, _ := c.Response(`"v"`)
	if m.Error == nil || m.Error.Code != spec.CodeUnsupportedVersion || !slices.Contains(m.Error.Supported, spec.Version2026) || m.Error.Requested != "2099-01-01" {
		t.Errorf("unknown version: %s", m.Raw)
	}
	// Methods the era removed.
	for i, method := range []string{"initialize", "ping", "logging/setLevel"} {
		id := fmt.Sprintf(`"gone%d"`, i)
		c.Modern(id, method, "", `{}`)
		if m, _ := c.Response(id); m.Error == nil || m.Error.Code != spec.CodeMethodNotFound {
			t.Errorf("%s in 2026-07-28: %s, want -32601", method, m.Raw)
		}
	}
	// A tool named two ways (a scope check must never read one tool while
	// mcp-go runs another), and an envelope a reader could miss.
	for i, params := range []string{
		`"name":"echo","Name":"countdown","arguments":{"seconds":0,"steps":1}`,
		`"nAmE":"countdown","arguments":{"seconds":0,"steps":1}`,
		`"name":"echo","name":"countdown","arguments":{"seconds":0,"steps":1}`,
	} {
		id := fmt.Sprintf(`"amb%d"`, i)
		c.Modern(id, "tools/call", params, `{}`)
		if m, _ := c.Response(id); m.Error == nil || m.Error.Code != spec.CodeInvalidParams || m.Error.Reason != spec.ReasonAmbiguousKey {
			t.Errorf("tools/call with %s: %s, want -32602 %s", params, m.Raw, spec.ReasonAmbiguousKey)
		}
	}
	c.Send(`{"jsonrpc":"2.0","id":"amb-env","method":"tools/call","params":{"name":"echo","arguments":{"text":"x"},"_meta":{%q:%q,"IO.modelcontextprotocol/protocolVersion":"2025-11-25",%q:{}}}}`,
		spec.MetaProtocolVersion, spec.Version2026, spec.MetaClientCapabilities)
	if m, _ := c.Response(`"amb-env"`); m.Error == nil || m.Error.Reason != spec.ReasonAmbiguousKey {
		t.Errorf("an envelope with its version twice: %s, want %s", m.Raw, spec.ReasonAmbiguousKey)
	}
	// The connection goes on.
	c.Modern(`"ok"`, "tools/call", `"name":"echo","arguments":{"text":"hi"}`, `{}`)
	if m, _ := c.Response(`"ok"`); Text(m) != "hi" {
		t.Errorf("echo after bad input: %s", m.Raw)
	}
}

// tasksExt declares the Tasks extension.
var tasksExt = fmt.Sprintf(`{"elicitation":{},"extensions":{%q:{}}}`, spec.ExtensionTasks)

// Task is a CreateTaskResult or a tasks/get result.
type Task struct {
	ResultType     string                     `json:"resultType"`
	TaskID         string                     `json:"taskId"`
	Status         string                     `json:"status"`
	StatusMessage  string                     `json:"statusMessage"`
	CreatedAt      string                     `json:"createdAt"`
	TTLMs          *float64                   `json:"ttlMs"`
	PollIntervalMs *float64                   `json:"pollIntervalMs"`
	InputRequests  map[string]json.RawMessage `json:"inputRequests"`
	Result         json.RawMessage            `json:"result"`
	Error          json.RawMessage            `json:"error"`
}

func taskOf(t testing.TB, m Msg) Task {
	t.Helper()
	var tk Task
	if m.Error != nil || json.Unmarshal(m.Result, &tk) != nil {
		t.Fatalf("not a task: %s", m.Raw)
	}
	return tk
}

// taskGet polls tasks/get on a new connection each time the harness can
// reconnect (on a cluster: the other instance), until cond holds.
func taskGet(t *testing.T, h Harness, c *Client, id string, cond func(Task) bool) Task {
	t.Helper()
	var tk Task
	i := 0
	poll.Until(t, timeout, "tasks/get to reach the condition", func() bool {
		i++
		rid := fmt.Sprintf(`"g%d"`, i)
		c.Modern(rid, spec.MethodTasksGet, fmt.Sprintf(`"taskId":%q`, id), tasksExt)
		m, _ := c.Response(rid)
		tk = taskOf(t, m)
		return cond(tk)
	})
	return tk
}

// modernTasks: with the Tasks extension, the demo's countdown and ask become
// tasks (their policy says so): a CreateTaskResult at once, then tasks/get on
// any connection (any instance of a cluster) until the result, inlined; ask's
// question shows as input_required and tasks/update answers it; tasks/cancel
// ends one; unknown ids are -32602 and a request without the extension -32021.
func modernTasks(t *testing.T, h Harness) {
	c := NewClient(t, h.Dial(t))
	c.Modern(`"d"`, spec.MethodServerDiscover, "", `{}`)
	if d, _ := c.Response(`"d"`); !strings.Contains(string(d.Result), spec.ExtensionTasks) {
		t.Skip("the server offers no tasks")
	}
	other := func() *Client {
		if !h.Reconnect {
			return c
		}
		return NewClient(t, h.Dial(t))
	}

	c.Modern(`"t1"`, "tools/call", `"name":"countdown","arguments":{"seconds":0.3,"steps":2}`, tasksExt)
	m, _ := c.Response(`"t1"`)
	created := taskOf(t, m)
	if created.ResultType != "task" || created.Status != "working" || created.TaskID == "" || created.TTLMs == nil || created.PollIntervalMs == nil || created.CreatedAt == "" {
		t.Fatalf("CreateTaskResult %s", m.Raw)
	}
	// A listen for the task: the acknowledgement names it, then its states come,
	// tagged with the listen's id, up to completed.
	l := other()
	l.Modern(`"listen"`, spec.MethodSubscriptionsListen, fmt.Sprintf(`"notifications":{"taskIds":[%q,"tk1.bm9wZQ"]}`, created.TaskID), tasksExt)
	ack := l.Next()
	if ack.Method != "notifications/subscriptions/acknowledged" || !strings.Contains(string(ack.Params), created.TaskID) || strings.Contains(string(ack.Params), "bm9wZQ") {
		t.Fatalf("listen ack %s: want the task (and not the unknown id)", ack.Raw)
	}
	l.Until(func(m Msg) bool {
		if m.Method != "notifications/tasks" || !strings.Contains(string(m.Params), `"`+spec.MetaSubscriptionID+`":"listen"`) {
			t.Fatalf("on the listen: %s, want tagged notifications/tasks", m.Raw)
		}
		return strings.Contains(string(m.Params), `"completed"`) && strings.Contains(string(m.Params), "countdown done")
	})
	if l != c {
		l.Close()
	}
	g := other()
	done := taskGet(t, h, g, created.TaskID, func(tk Task) bool { return tk.Status != "working" })
	if done.Status != "completed" || !strings.Contains(string(done.Result), "countdown done: 2 of 2 steps") {
		t.Fatalf("finished task: %+v", done)
	}

	c.Modern(`"t2"`, "tools/call", `"name":"ask","arguments":{"question":"Name?"}`, tasksExt)
	m, _ = c.Response(`"t2"`)
	asked := taskOf(t, m)
	tk := taskGet(t, h, other(), asked.TaskID, func(tk Task) bool { return tk.Status == "input_required" })
	if len(tk.InputRequests) != 1 {
		t.Fatalf("input_required task: %+v", tk)
	}
	var key string
	for k := range tk.InputRequests {
		key = k
	}
	u := other()
	u.Modern(`"u"`, spec.MethodTasksUpdate, fmt.Sprintf(`"taskId":%q,"inputResponses":{%q:{"action":"accept","content":{"answer":"Ada"}}}`, asked.TaskID, key), tasksExt)
	if m, _ := u.Response(`"u"`); resultType(m) != "complete" {
		t.Fatalf("tasks/update: %s", m.Raw)
	}
	tk = taskGet(t, h, u, asked.TaskID, func(tk Task) bool { return tk.Status == "completed" })
	if !strings.Contains(string(tk.Result), "answer: Ada") {
		t.Fatalf("answered task: %+v", tk)
	}

	c.Modern(`"t3"`, "tools/call", `"name":"countdown","arguments":{"seconds":30,"steps":30}`, tasksExt)
	m, _ = c.Response(`"t3"`)
	long := taskOf(t, m)
	x := other()
	x.Modern(`"x"`, spec.MethodTasksCancel, fmt.Sprintf(`"taskId":%q`, long.TaskID), tasksExt)
	if m, _ := x.Response(`"x"`); resultType(m) != "complete" {
		t.Fatalf("tasks/cancel: %s", m.Raw)
	}
	if tk := taskGet(t, h, x, long.TaskID, func(Task) bool { return true }); tk.Status != "cancelled" {
		t.Fatalf("cancelled task: %+v", tk)
	}

	c.Modern(`"n"`, spec.MethodTasksGet, `"taskId":"tk1.bm9wZQ"`, tasksExt)
	if m, _ := c.Response(`"n"`); m.Error == nil || m.Error.Code != spec.CodeInvalidParams {
		t.Errorf("unknown task: %s, want -32602", m.Raw)
	}
	c.Modern(`"w"`, spec.MethodTasksGet, fmt.Sprintf(`"taskId":%q`, created.TaskID), `{}`)
	if m, _ := c.Response(`"w"`); m.Error == nil || m.Error.Code != spec.CodeMissingCapability {
		t.Errorf("tasks/get without the extension: %s, want -32021", m.Raw)
	}
}
