package e2etest

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/mcp-resume/mcp-resume/spec"
	"github.com/mcp-resume/mcp-resume/testkit/poll"
	"github.com/mcp-resume/mcp-resume/transport"
)

// Harness connects the suite to a server running the demo tools
// (servers/demo) behind the resume core.
type Harness struct {
	// Dial opens a new client connection to the server under test.
	Dial func(t testing.TB) transport.Conn
	// Reconnect says a new connection reaches the same server after one is dropped
	// (false for a stdio subprocess, whose one connection is its life).
	Reconnect bool
	// Calls, when set, returns the server's calls being handled (mcp.Server.Calls):
	// the suite then also checks that a cancelled call's handler has stopped.
	Calls func() int
	// Stall, when set, opens a connection through a path that stall makes stop
	// carrying bytes, both ways, without closing (faultproxy's stall mode).
	Stall func(t testing.TB) (conn transport.Conn, stall func())
}

const resumableCaps = `{"resumableRequests":{}}`

func (h Harness) client(t testing.TB, caps string) *Client {
	c := NewClient(t, h.Dial(t))
	c.Initialize(caps)
	return c
}

func (h Harness) needReconnect(t *testing.T) {
	if !h.Reconnect {
		t.Skip("this transport cannot reconnect to the same server")
	}
}

// Run runs the suite.
func Run(t *testing.T, h Harness) {
	t.Run("PlainClient", func(t *testing.T) { plainClient(t, h) })
	t.Run("PolicyFirst", func(t *testing.T) { policyFirst(t, h) })
	t.Run("ExperimentalCapability", func(t *testing.T) { experimentalCapability(t, h) })
	t.Run("DropAndResume", func(t *testing.T) { dropAndResume(t, h) })
	t.Run("AckFiveDrops", func(t *testing.T) { ackFiveDrops(t, h) })
	t.Run("ResumeAfterCompletion", func(t *testing.T) { resumeAfterCompletion(t, h) })
	t.Run("ErrorReasons", func(t *testing.T) { errorReasons(t, h) })
	t.Run("ElicitationWhileDetached", func(t *testing.T) { elicitationWhileDetached(t, h) })
	t.Run("Sampling", func(t *testing.T) { sampling(t, h) })
	t.Run("Takeover", func(t *testing.T) { takeover(t, h) })
	t.Run("CancelAttached", func(t *testing.T) { cancelAttached(t, h) })
	t.Run("BadInput", func(t *testing.T) { badInput(t, h) })
	t.Run("StallTakeover", func(t *testing.T) { stallTakeover(t, h) })
	t.Run("2026-07-28", func(t *testing.T) { runModern(t, h) })
}

func callCountdown(c *Client, id string, seconds float64, steps int) {
	c.Send(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"countdown","arguments":{"seconds":%v,"steps":%d},"_meta":{"progressToken":"pt-%s"}}}`,
		id, seconds, steps, strings.Trim(id, `"`))
}

func plainClient(t *testing.T, h Harness) {
	c := NewClient(t, h.Dial(t))
	init := c.Initialize(`{}`)
	if strings.Contains(string(init.Raw), spec.CapabilityName) {
		t.Errorf("a plain client sees the resume advertisement: %s", init.Raw)
	}
	callCountdown(c, "7", 0.05, 3)
	resp, before := c.Response("7")
	if len(before) != 3 {
		t.Fatalf("want 3 progress notifications, got %d", len(before))
	}
	for i, m := range before {
		if Progress(m) != i+1 || strings.Contains(string(m.Raw), "io.mcp-resume") {
			t.Errorf("message %d is not plain progress %d: %s", i, i+1, m.Raw)
		}
	}
	if strings.Contains(string(resp.Raw), "io.mcp-resume") || Text(resp) != "countdown done: 3 of 3 steps" {
		t.Errorf("result is not plain: %s", resp.Raw)
	}
}

func policyFirst(t *testing.T, h Harness) {
	c := h.client(t, resumableCaps)
	for _, id := range []string{`9007199254740993`, `"req-α"`, `3`} {
		callCountdown(c, id, 0.05, 3)
		resp, before := c.Response(id)
		if len(before) != 4 {
			t.Fatalf("id %s: want policy + 3 progress, got %d messages", id, len(before))
		}
		p := PolicyOf(t, before[0])
		if string(p.RequestID) != id {
			t.Errorf("policy requestId %s, want exactly %s", p.RequestID, id)
		}
		if len(p.ResumeToken) != 43 || p.MaxWait == nil || *p.MaxWait <= 0 {
			t.Errorf("policy %+v: want a 43-character token and a positive maxWait", p)
		}
		for i, m := range before[1:] {
			if Progress(m) != i+1 || m.Seq() != uint64(i+1) {
				t.Errorf("id %s: message %d = %s, want progress %d with seq %d", id, i, m.Raw, i+1, i+1)
			}
		}
		if string(resp.ID) != id || resp.Seq() != 4 || Text(resp) == "" {
			t.Errorf("response %s: want id %s, seq 4 and a text result", resp.Raw, id)
		}
	}
}

func experimentalCapability(t *testing.T, h Harness) {
	c := NewClient(t, h.Dial(t))
	init := c.Initialize(`{"experimental":{"resumableRequests":{}}}`)
	var r struct {
		Capabilities struct {
			Experimental map[string]spec.ServerCapability `json:"experimental"`
		} `json:"capabilities"`
	}
	_ = json.Unmarshal(init.Result, &r)
	if adv, ok := r.Capabilities.Experimental[spec.CapabilityName]; !ok || adv.MaxWait <= 0 || !slices.Contains(adv.Extensions, spec.ExtensionAck) {
		t.Errorf("advertisement missing or incomplete: %s", init.Raw)
	}
	callCountdown(c, "1", 0, 1)
	_, before := c.Response("1")
	PolicyOf(t, before[0])
}

func dropAndResume(t *testing.T, h Harness) {
	h.needReconnect(t)
	a := h.client(t, resumableCaps)
	callCountdown(a, "11", 1, 10)
	pol := PolicyOf(t, a.Next())
	got := map[int]bool{}
	for _, m := range a.Until(func(m Msg) bool { return Progress(m) == 2 }) {
		got[Progress(m)] = true
	}
	a.Close()

	b := h.client(t, resumableCaps)
	st := b.WaitStatus("11", pol.ResumeToken, func(s Status) bool { return s.HasPendingMessage })
	// The call went on without its client: still running, or (on a loaded
	// machine, its second gone by) ended with its result waiting.
	if st.Status != "processing" && st.Status != "completed" {
		t.Errorf("status %+v, want processing or completed", st)
	}
	b.Resume(`11`, pol.ResumeToken)
	resp, before := b.Response("11")
	last := 2
	for _, m := range before {
		p := Progress(m)
		if p < 0 {
			t.Fatalf("unexpected message before the result: %s", m.Raw)
		}
		if got[p] || p <= last {
			t.Errorf("progress %d duplicated or out of order (after %d): %s", p, last, m.Raw)
		}
		got[p], last = true, p
	}
	if last != 10 || Text(resp) != "countdown done: 10 of 10 steps" {
		t.Errorf("last progress %d, result %s", last, resp.Raw)
	}
}

func ackFiveDrops(t *testing.T, h Harness) {
	h.needReconnect(t)
	caps := `{"resumableRequests":{"extensions":["io.mcp-resume/ack"]}}`
	c := h.client(t, caps)
	callCountdown(c, `"ack"`, 1, 30)
	pol := PolicyOf(t, c.Next())
	var seqs []uint64
	var progress []int
	var ack uint64
	var result Msg
	for drop := 0; ; drop++ {
		// Read a few messages, then drop without a word (five times), then read to the end.
		for n := 0; drop >= 5 || n < 3; n++ {
			m := c.Next()
			if m.Seq() <= ack {
				t.Fatalf("seq %d delivered again after ack %d: %s", m.Seq(), ack, m.Raw)
			}
			ack = m.Seq()
			seqs = append(seqs, m.Seq())
			if m.IsResponse(`"ack"`) {
				result = m
				break
			}
			progress = append(progress, Progress(m))
		}
		if result.Raw != nil {
			break
		}
		c.Close()
		c = h.client(t, caps)
		c.Send(`{"jsonrpc":"2.0","id":"ack","method":"requests/resume","params":{"resumeToken":%q,"_meta":{"io.mcp-resume/ack":%d}}}`, pol.ResumeToken, ack)
	}
	for i, s := range seqs {
		if s != uint64(i+1) {
			t.Fatalf("sequence numbers %v: want 1..%d without gaps", seqs, len(seqs))
		}
	}
	for i, p := range progress {
		if p != i+1 {
			t.Fatalf("progress %v: want 1..30 exactly once, in order", progress)
		}
	}
	if len(progress) != 30 || Text(result) != "countdown done: 30 of 30 steps" {
		t.Fatalf("got %d progress, result %s", len(progress), result.Raw)
	}
	ackedEnd(t, c, `"ack"`, pol.ResumeToken, ack)
}

// stallTakeover: a call's connection stops carrying bytes mid-call without
// closing (the server cannot tell yet); the client resumes from a new
// connection at once, with its ack: the new connection takes the call over, and
// every message after the ack arrives exactly once, the result included.
func stallTakeover(t *testing.T, h Harness) {
	if h.Stall == nil {
		t.Skip("the harness cannot stall a connection")
	}
	caps := `{"resumableRequests":{"extensions":["io.mcp-resume/ack"]}}`
	conn, stall := h.Stall(t)
	c := NewClient(t, conn)
	c.Initialize(caps)
	callCountdown(c, `"st"`, 1, 10)
	pol := PolicyOf(t, c.Next())
	var ack uint64
	var progress []int
	for len(progress) < 3 {
		m := c.Next()
		ack = m.Seq()
		progress = append(progress, Progress(m))
	}
	stall()
	n := h.client(t, caps)
	n.Send(`{"jsonrpc":"2.0","id":"st","method":"requests/resume","params":{"resumeToken":%q,"_meta":{"io.mcp-resume/ack":%d}}}`, pol.ResumeToken, ack)
	resp, before := n.Response(`"st"`)
	for _, m := range before {
		if m.Seq() <= ack {
			t.Fatalf("seq %d delivered again after ack %d: %s", m.Seq(), ack, m.Raw)
		}
		ack = m.Seq()
		progress = append(progress, Progress(m))
	}
	for i, p := range progress {
		if p != i+1 {
			t.Fatalf("progress %v: want 1..10 exactly once, in order", progress)
		}
	}
	if len(progress) != 10 || Text(resp) != "countdown done: 10 of 10 steps" {
		t.Fatalf("got progress %v, result %s", progress, resp.Raw)
	}
}

// ackedEnd checks the answers about a finished request, id, whose final response
// (number final) the client holds: an ack past it is refused and changes nothing;
// getStatus acknowledging it answers completed and frees the request; from then on
// a resume, even one acknowledging the response again, answers acknowledged, not
// silence. Each answer is an error or a result, never nothing.
func ackedEnd(t *testing.T, c *Client, id, token string, final uint64) {
	t.Helper()
	wantErr := func(what string, m Msg, reason spec.Reason) {
		t.Helper()
		if m.Error == nil || m.Error.Code != spec.CodeInvalidParams || m.Error.Reason != reason {
			t.Fatalf("%s: %s, want error -32602 %s", what, m.Raw, reason)
		}
	}
	c.Send(`{"jsonrpc":"2.0","id":%s,"method":"requests/resume","params":{"resumeToken":%q,"_meta":{"io.mcp-resume/ack":%d}}}`, id, token, final+1)
	m, _ := c.Response(id)
	wantErr("resume acknowledging a message never sent", m, spec.ReasonInvalidAck)
	if st, e := c.GetStatus(`"st"`, id, token); e != nil || st.Status != "completed" || !st.HasPendingMessage {
		t.Fatalf("getStatus after a refused ack: %+v %v, want completed with the response pending", st, e)
	}
	c.Send(`{"jsonrpc":"2.0","id":"st2","method":"requests/getStatus","params":{"requestId":%s,"resumeToken":%q,"_meta":{"io.mcp-resume/ack":%d}}}`, id, token, final)
	if m, _ := c.Response(`"st2"`); m.Error != nil || !strings.Contains(string(m.Result), `"status":"completed"`) || !strings.Contains(string(m.Result), `"hasPendingMessage":false`) {
		t.Fatalf("getStatus acknowledging the response: %s, want completed with nothing pending", m.Raw)
	}
	c.Send(`{"jsonrpc":"2.0","id":%s,"method":"requests/resume","params":{"resumeToken":%q,"_meta":{"io.mcp-resume/ack":%d}}}`, id, token, final)
	m, _ = c.Response(id)
	wantErr("resume of an acknowledged request", m, spec.ReasonAcknowledged)
	if _, e := c.GetStatus(`"st3"`, id, token); e == nil || e.Code != spec.CodeInvalidParams || e.Reason != spec.ReasonAcknowledged {
		t.Fatalf("getStatus after acknowledging the result: %v, want -32602 acknowledged", e)
	}
}

// A call that ends while nobody is connected, with its result or with a tool
// error, is reported completed or failed, and its resume returns that result.
// (The connection is dropped as soon as the policy arrives; the call takes 0.1s.)
func resumeAfterCompletion(t *testing.T, h Harness) {
	h.needReconnect(t)
	for _, tc := range []struct {
		fail   bool
		status string
		text   string
	}{{false, "completed", "countdown done: 2 of 2 steps"}, {true, "failed", "countdown failed as asked: 2 of 2 steps"}} {
		a := h.client(t, resumableCaps)
		a.Send(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"countdown","arguments":{"seconds":0.1,"steps":2,"fail":%v}}}`, tc.fail)
		pol := PolicyOf(t, a.Next())
		a.Close()
		b := h.client(t, resumableCaps)
		st := b.WaitStatus("5", pol.ResumeToken, func(s Status) bool { return s.Status != "processing" })
		if st.Status != tc.status || !st.HasPendingMessage {
			t.Errorf("status %+v, want %s with a pending message", st, tc.status)
		}
		b.Resume(`5`, pol.ResumeToken)
		resp, _ := b.Response("5")
		if Text(resp) != tc.text || strings.Contains(string(resp.Result), `"isError":true`) != tc.fail {
			t.Errorf("resumed result %s, want %q (isError %v)", resp.Raw, tc.text, tc.fail)
		}
	}
}

func errorReasons(t *testing.T, h Harness) {
	c := h.client(t, resumableCaps)
	callCountdown(c, "21", 60, 60)
	pol := PolicyOf(t, c.Next())
	wrong := strings.Repeat("A", 43)

	errOf := func(id, format string, args ...any) *spec.Error {
		t.Helper()
		c.Send(format, args...)
		m, _ := c.Response(id)
		if m.Error == nil {
			t.Fatalf("want an error, got %s", m.Raw)
		}
		return m.Error
	}
	rawErr := func(id, format string, args ...any) string {
		t.Helper()
		c.Send(format, args...)
		m, _ := c.Response(id)
		var v struct {
			Error json.RawMessage `json:"error"`
		}
		_ = json.Unmarshal(m.Raw, &v)
		return string(v.Error)
	}
	wrongTok := rawErr("21", `{"jsonrpc":"2.0","id":21,"method":"requests/resume","params":{"resumeToken":%q}}`, wrong)
	unknown := rawErr("22", `{"jsonrpc":"2.0","id":22,"method":"requests/resume","params":{"resumeToken":%q}}`, pol.ResumeToken)
	if wrongTok != unknown {
		t.Errorf("wrong token and unknown request answer differently:\n%s\n%s", wrongTok, unknown)
	}
	if e := errOf("23", `{"jsonrpc":"2.0","id":23,"method":"requests/getStatus","params":{"requestId":21,"resumeToken":%q}}`, wrong); e.Code != spec.CodeInvalidParams || e.Reason != spec.ReasonNotFound {
		t.Errorf("getStatus with a wrong token: %v", e)
	}
	c.Send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":21}}`)
	c.WaitStatusErr(t, "21", pol.ResumeToken, spec.ReasonCancelled)
	if e := errOf("21", `{"jsonrpc":"2.0","id":21,"method":"requests/resume","params":{"resumeToken":%q}}`, pol.ResumeToken); e.Code != spec.CodeInvalidParams || e.Reason != spec.ReasonCancelled {
		t.Errorf("resume of a cancelled request: %v", e)
	}
}

// WaitStatusErr polls getStatus until it fails with reason.
func (c *Client) WaitStatusErr(t *testing.T, reqID, token string, reason spec.Reason) {
	t.Helper()
	for i := 0; i < 10000; i++ {
		_, e := c.GetStatus(fmt.Sprintf(`"se-%d"`, i), reqID, token)
		if e != nil {
			if e.Reason != reason || e.Code != spec.CodeInvalidParams {
				t.Fatalf("getStatus error %v, want -32602 %s", e, reason)
			}
			return
		}
	}
	t.Fatalf("getStatus never failed with %s", reason)
}

func elicitationWhileDetached(t *testing.T, h Harness) {
	h.needReconnect(t)
	a := h.client(t, `{"resumableRequests":{},"elicitation":{}}`)
	// The question is asked 50ms into the call, after the client is gone.
	a.Send(`{"jsonrpc":"2.0","id":"q","method":"tools/call","params":{"name":"ask","arguments":{"question":"Name?","delay":0.05}}}`)
	pol := PolicyOf(t, a.Next())
	a.Close()

	b := h.client(t, resumableCaps)
	st := b.WaitStatus(`"q"`, pol.ResumeToken, func(s Status) bool { return s.HasInputRequest })
	if st.Status != "processing" || !st.HasPendingMessage {
		t.Errorf("status %+v: want processing with the input request pending", st)
	}
	b.Resume(`"q"`, pol.ResumeToken)
	first := b.Next()
	if first.Method != "elicitation/create" || first.Seq() != 1 {
		t.Fatalf("want elicitation/create with seq 1, got %s", first.Raw)
	}
	// Drop again before answering: the same request (same id) comes again.
	b.Close()
	c := h.client(t, resumableCaps)
	c.Resume(`"q"`, pol.ResumeToken)
	again := c.Next()
	if again.Method != "elicitation/create" || string(again.ID) != string(first.ID) {
		t.Fatalf("want the same elicitation/create (id %s) again, got %s", first.ID, again.Raw)
	}
	c.Send(`{"jsonrpc":"2.0","id":%s,"result":{"action":"accept","content":{"answer":"Ada"}}}`, again.ID)
	resp, _ := c.Response(`"q"`)
	if Text(resp) != "answer: Ada" {
		t.Errorf("result %s, want the answer", resp.Raw)
	}
	if st, e := c.GetStatus(`"st"`, `"q"`, pol.ResumeToken); e != nil || st.HasInputRequest || st.Status != "completed" {
		t.Errorf("after the answer: %+v %v, want completed without an input request", st, e)
	}
}

func sampling(t *testing.T, h Harness) {
	c := h.client(t, `{"resumableRequests":{},"sampling":{}}`)
	c.Send(`{"jsonrpc":"2.0","id":"s","method":"tools/call","params":{"name":"summarize","arguments":{"text":"a long story"}}}`)
	PolicyOf(t, c.Next())
	req := c.Next()
	if req.Method != "sampling/createMessage" || req.Seq() != 1 {
		t.Fatalf("want sampling/createMessage with seq 1, got %s", req.Raw)
	}
	c.Send(`{"jsonrpc":"2.0","id":%s,"result":{"role":"assistant","content":{"type":"text","text":"short"},"model":"m"}}`, req.ID)
	resp, _ := c.Response(`"s"`)
	if Text(resp) != "summary: short" {
		t.Errorf("result %s", resp.Raw)
	}
}

func takeover(t *testing.T, h Harness) {
	h.needReconnect(t)
	// The call waits for its question's answer, which only the new connection
	// gives: it cannot end before the takeover, however slow the machine.
	caps := `{"resumableRequests":{},"elicitation":{}}`
	a := h.client(t, caps)
	a.Send(`{"jsonrpc":"2.0","id":31,"method":"tools/call","params":{"name":"ask","arguments":{"question":"Who?"}}}`)
	pol := PolicyOf(t, a.Next())
	if q := a.Next(); q.Method != "elicitation/create" {
		t.Fatalf("want the call's elicitation/create, got %s", q.Raw)
	}

	b := h.client(t, caps)
	b.Resume(`31`, pol.ResumeToken)
	q := b.Next()
	if q.Method != "elicitation/create" {
		t.Fatalf("want the question again on the new connection, got %s", q.Raw)
	}
	b.Send(`{"jsonrpc":"2.0","id":%s,"result":{"action":"accept","content":{"answer":"b"}}}`, q.ID)
	resp, _ := b.Response("31")
	if Text(resp) != "answer: b" {
		t.Fatalf("result on the new connection: %s", resp.Raw)
	}
	// The old connection got nothing after the takeover: at most the progress that
	// was in flight before it, never the result.
	for _, m := range a.Quiet(`"quiet"`) {
		if m.IsResponse("31") {
			t.Fatalf("the old connection got the result after the takeover")
		}
	}
}

func cancelAttached(t *testing.T, h Harness) {
	c := h.client(t, resumableCaps)
	callCountdown(c, "41", 60, 600)
	pol := PolicyOf(t, c.Next())
	c.Until(func(m Msg) bool { return Progress(m) == 1 })
	c.Send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":41,"reason":"user"}}`)
	c.WaitStatusErr(t, "41", pol.ResumeToken, spec.ReasonCancelled)
	if h.Calls != nil {
		// The handler returns (it would count down for a minute otherwise), and
		// any answer it got is written before the count drops: the round trip
		// below then comes after it on a one-stream connection.
		poll.Until(t, timeout, "the cancelled call's handler to return", func() bool { return h.Calls() == 0 })
	}
	for _, m := range c.Quiet(`"quiet"`) {
		if m.IsResponse("41") {
			t.Fatalf("a cancelled request got a response: %s", m.Raw)
		}
	}
}

func badInput(t *testing.T, h Harness) {
	c := h.client(t, `{"resumableRequests":{},"elicitation":{}}`)
	// In flight until its question is answered, after everything below, and then
	// it must finish, untouched by all of it (a countdown of its own length
	// could end before the duplicate id below on a loaded machine).
	c.Send(`{"jsonrpc":"2.0","id":"long","method":"tools/call","params":{"name":"ask","arguments":{"question":"Still there?"}}}`)
	PolicyOf(t, c.Next())
	ask := c.Next()
	if ask.Method != "elicitation/create" {
		t.Fatalf("want the call's elicitation/create, got %s", ask.Raw)
	}
	cases := []struct {
		name, msg string
		id        string // the id of the error response; "" for none expected
		code      int
		reason    spec.Reason
	}{
		{"malformed JSON", `{"jsonrpc":"2.0","id":1,`, "null", spec.CodeParseError, spec.ReasonParseError},
		{"not an object", `[1,2]`, "null", spec.CodeInvalidRequest, spec.ReasonInvalidRequest},
		{"mistyped method keeps the id", `{"jsonrpc":"2.0","id":12,"method":5}`, "12", spec.CodeInvalidRequest, spec.ReasonInvalidRequest},
		{"wrong jsonrpc", `{"jsonrpc":"1.0","id":2,"method":"ping"}`, "2", spec.CodeInvalidRequest, spec.ReasonInvalidRequest},
		{"missing jsonrpc", `{"id":3,"method":"ping"}`, "3", spec.CodeInvalidRequest, spec.ReasonInvalidRequest},
		{"bad id type", `{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`, "null", spec.CodeInvalidRequest, spec.ReasonInvalidRequest},
		{"null id request", `{"jsonrpc":"2.0","id":null,"method":"ping"}`, "null", spec.CodeInvalidRequest, spec.ReasonInvalidRequest},
		{"params not structured", `{"jsonrpc":"2.0","id":4,"method":"ping","params":7}`, "4", spec.CodeInvalidRequest, spec.ReasonInvalidRequest},
		{"resume without params", `{"jsonrpc":"2.0","id":5,"method":"requests/resume"}`, "5", spec.CodeInvalidParams, spec.ReasonInvalidParams},
		{"resume token mistyped", `{"jsonrpc":"2.0","id":6,"method":"requests/resume","params":{"resumeToken":42}}`, "6", spec.CodeInvalidParams, spec.ReasonInvalidParams},
		{"resume token empty", `{"jsonrpc":"2.0","id":7,"method":"requests/resume","params":{"resumeToken":""}}`, "7", spec.CodeInvalidParams, spec.ReasonInvalidParams},
		{"resume token huge", `{"jsonrpc":"2.0","id":8,"method":"requests/resume","params":{"resumeToken":"` + strings.Repeat("x", 300) + `"}}`, "8", spec.CodeInvalidParams, spec.ReasonInvalidParams},
		{"getStatus without requestId", `{"jsonrpc":"2.0","id":9,"method":"requests/getStatus","params":{"resumeToken":"abc"}}`, "9", spec.CodeInvalidParams, spec.ReasonInvalidParams},
		{"getStatus requestId mistyped", `{"jsonrpc":"2.0","id":10,"method":"requests/getStatus","params":{"requestId":true,"resumeToken":"abc"}}`, "10", spec.CodeInvalidParams, spec.ReasonInvalidParams},
		{"getStatus without resumeToken", `{"jsonrpc":"2.0","id":13,"method":"requests/getStatus","params":{"requestId":1}}`, "13", spec.CodeInvalidParams, spec.ReasonInvalidParams},
		{"getStatus token mistyped", `{"jsonrpc":"2.0","id":14,"method":"requests/getStatus","params":{"requestId":1,"resumeToken":["abc"]}}`, "14", spec.CodeInvalidParams, spec.ReasonInvalidParams},
		{"resume ack mistyped", `{"jsonrpc":"2.0","id":15,"method":"requests/resume","params":{"resumeToken":"abc","_meta":{"io.mcp-resume/ack":"x"}}}`, "15", spec.CodeInvalidParams, spec.ReasonInvalidParams},
		{"getStatus params array", `{"jsonrpc":"2.0","id":11,"method":"requests/getStatus","params":[1]}`, "11", spec.CodeInvalidParams, spec.ReasonInvalidParams},
		{"response to unknown id", `{"jsonrpc":"2.0","id":"nobody","result":{}}`, "", 0, ""},
		{"cancel malformed", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":[]}}`, "", 0, ""},
		{"duplicate in-flight id", `{"jsonrpc":"2.0","id":"long","method":"ping"}`, `"long"`, spec.CodeInvalidRequest, spec.ReasonDuplicateID},
		// Keys that readers can take two ways: a check reading "name" exactly and
		// mcp-go's encoding/json (case-insensitive, last key wins) must not see
		// two tools in one call.
		{"tool named twice, in two cases", `{"jsonrpc":"2.0","id":16,"method":"tools/call","params":{"name":"echo","Name":"countdown","arguments":{"seconds":0,"steps":1}}}`, "16", spec.CodeInvalidParams, spec.ReasonAmbiguousKey},
		{"tool named in upper case", `{"jsonrpc":"2.0","id":17,"method":"tools/call","params":{"NAME":"countdown","arguments":{"seconds":0,"steps":1}}}`, "17", spec.CodeInvalidParams, spec.ReasonAmbiguousKey},
		{"tool named twice", `{"jsonrpc":"2.0","id":18,"method":"tools/call","params":{"name":"echo","n\u0061me":"countdown","arguments":{"seconds":0,"steps":1}}}`, "18", spec.CodeInvalidParams, spec.ReasonAmbiguousKey},
		{"call key twice", `{"jsonrpc":"2.0","id":19,"method":"tools/call","params":{"name":"echo","_meta":{"io.mcp-resume/key":"aaaaaaaaaaaaaaaaaaaaaa","io.mcp-resume/KEY":"bbbbbbbbbbbbbbbbbbbbbb"}}}`, "19", spec.CodeInvalidParams, spec.ReasonAmbiguousKey},
		{"method twice", `{"jsonrpc":"2.0","id":20,"method":"ping","Method":"tools/call","params":{"name":"countdown"}}`, "20", spec.CodeInvalidParams, spec.ReasonAmbiguousKey},
	}
	for i, tc := range cases {
		c.Send("%s", tc.msg)
		probe := fmt.Sprintf(`"probe-%d"`, i)
		c.Send(`{"jsonrpc":"2.0","id":%s,"method":"ping"}`, probe)
		var errs []Msg
		for _, m := range c.Until(func(m Msg) bool { return m.IsResponse(probe) }) {
			if m.Error != nil {
				errs = append(errs, m)
			}
		}
		if tc.id == "" {
			if len(errs) != 0 {
				t.Errorf("%s: want no answer, got %s", tc.name, errs[0].Raw)
			}
			continue
		}
		if len(errs) != 1 || string(errs[0].ID) != tc.id || errs[0].Error.Code != tc.code || errs[0].Error.Reason != tc.reason {
			t.Errorf("%s: got %v, want one error id %s code %d reason %s", tc.name, errs, tc.id, tc.code, tc.reason)
		}
	}
	c.Send(`{"jsonrpc":"2.0","id":%s,"result":{"action":"accept","content":{"answer":"yes"}}}`, ask.ID)
	resp, _ := c.Response(`"long"`)
	if Text(resp) != "answer: yes" {
		t.Errorf("the call in flight did not survive the bad input: %s", resp.Raw)
	}
}
