// Package e2etest is the end-to-end resume suite: one set of wire-level tests that
// every transport runs unchanged (in-memory pipes, a stdio subprocess, Streamable
// HTTP, WebSocket in process and as a subprocess). It speaks raw JSON-RPC through
// a small client so that every byte the server sends is checked.
package e2etest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-resume/mcp-resume/spec"
	"github.com/mcp-resume/mcp-resume/testkit/poll"
	"github.com/mcp-resume/mcp-resume/transport"
)

// Msg is one message the client received, decoded enough to check.
type Msg struct {
	Raw    []byte
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *spec.Error     `json:"error"`
}

// Seq returns the message's io.mcp-resume/seq, or 0.
func (m Msg) Seq() uint64 {
	switch {
	case m.Params != nil:
		return spec.ReadSeq(m.Params)
	case m.Result != nil:
		return spec.ReadSeq(m.Result)
	}
	return 0
}

// IsResponse reports whether m answers request id.
func (m Msg) IsResponse(id string) bool { return m.Method == "" && string(m.ID) == id }

// Client is a raw JSON-RPC client on one connection. Everything it receives goes to
// one ordered stream read with Next.
type Client struct {
	t    testing.TB
	conn transport.Conn
	in   chan Msg
	done chan struct{}
	once sync.Once
	era  eraCheck
}

// timeout bounds every wait for a message in the suite; a correct server answers in
// milliseconds, so hitting it means a lost message.
const timeout = 20 * time.Second

// NewClient starts reading conn.
func NewClient(t testing.TB, conn transport.Conn) *Client {
	c := &Client{t: t, conn: conn, in: make(chan Msg, 100000), done: make(chan struct{})}
	go func() {
		defer close(c.done)
		defer close(c.in)
		for {
			raw, err := conn.Read(context.Background())
			if err != nil {
				return
			}
			var m Msg
			if err := json.Unmarshal(raw, &m); err != nil {
				t.Errorf("server sent invalid JSON %q: %v", raw, err)
				continue
			}
			m.Raw = raw
			c.era.received(t, m)
			c.in <- m
		}
	}()
	t.Cleanup(c.Close)
	return c
}

// Close drops the connection and waits for the reader.
func (c *Client) Close() {
	c.once.Do(func() { _ = c.conn.Close() })
	<-c.done
}

// Send writes a raw message.
func (c *Client) Send(format string, args ...any) {
	c.t.Helper()
	msg := fmt.Appendf(nil, format, args...)
	c.era.sending(msg)
	if err := c.conn.Write(context.Background(), msg); err != nil {
		c.t.Fatalf("send: %v", err)
	}
}

// Next returns the next message received.
func (c *Client) Next() Msg {
	c.t.Helper()
	select {
	case m, ok := <-c.in:
		if !ok {
			c.t.Fatalf("connection closed while waiting for a message")
		}
		return m
	case <-time.After(timeout):
		c.t.Fatalf("no message within %v", timeout)
	}
	return Msg{}
}

// Until returns every message up to and including the first that matches.
func (c *Client) Until(match func(Msg) bool) []Msg {
	c.t.Helper()
	var out []Msg
	for {
		m := c.Next()
		out = append(out, m)
		if match(m) {
			return out
		}
	}
}

// Response waits for the response to id and returns it with the messages before it.
func (c *Client) Response(id string) (Msg, []Msg) {
	c.t.Helper()
	ms := c.Until(func(m Msg) bool { return m.IsResponse(id) })
	return ms[len(ms)-1], ms[:len(ms)-1]
}

// Quiet reports whether nothing arrives before a round trip of ping completes: the
// server has nothing more queued for this connection.
func (c *Client) Quiet(id string) []Msg {
	c.t.Helper()
	c.Send(`{"jsonrpc":"2.0","id":%s,"method":"ping"}`, id)
	_, before := c.Response(id)
	return before
}

// Resume sends requests/resume for the request with id (raw JSON: `"c"`, `7`) and
// its resume token, with no ack.
func (c *Client) Resume(id, token string) {
	c.Send(`{"jsonrpc":"2.0","id":%s,"method":"requests/resume","params":{"resumeToken":%q}}`, id, token)
}

// Initialize performs the handshake with the given capabilities JSON.
func (c *Client) Initialize(caps string) Msg {
	c.t.Helper()
	c.Send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":%s,"clientInfo":{"name":"e2etest","version":"1"}}}`, caps)
	m, _ := c.Response(`"init"`)
	if m.Error != nil {
		c.t.Fatalf("initialize: %v", m.Error)
	}
	c.Send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return m
}

// Policy is a received notifications/requests/resumePolicy.
type Policy struct {
	RequestID   json.RawMessage `json:"requestId"`
	ResumeToken string          `json:"resumeToken"`
	MaxWait     *int64          `json:"maxWait"`
	MinWait     *int64          `json:"minWait"`
}

// PolicyOf decodes m as a resume policy notification, failing the test otherwise.
func PolicyOf(t testing.TB, m Msg) Policy {
	t.Helper()
	if m.Method != spec.MethodResumePolicy {
		t.Fatalf("want %s, got %s", spec.MethodResumePolicy, m.Raw)
	}
	var p Policy
	if err := json.Unmarshal(m.Params, &p); err != nil {
		t.Fatalf("policy params: %v", err)
	}
	return p
}

// Progress returns the progress number of a progress notification, or -1.
func Progress(m Msg) int {
	if m.Method != spec.MethodProgress {
		return -1
	}
	var p struct {
		Progress float64 `json:"progress"`
	}
	if json.Unmarshal(m.Params, &p) != nil {
		return -1
	}
	return int(p.Progress)
}

// Text returns the first text content of a tools/call result.
func Text(m Msg) string {
	var r struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if json.Unmarshal(m.Result, &r) != nil || len(r.Content) == 0 {
		return ""
	}
	return r.Content[0].Text
}

// Status is a requests/getStatus result.
type Status struct {
	Status            string `json:"status"`
	HasPendingMessage bool   `json:"hasPendingMessage"`
	HasInputRequest   bool   `json:"hasInputRequest"`
}

// GetStatus sends requests/getStatus and returns the result or the error.
func (c *Client) GetStatus(id, reqID, token string) (Status, *spec.Error) {
	c.t.Helper()
	c.Send(`{"jsonrpc":"2.0","id":%s,"method":"requests/getStatus","params":{"requestId":%s,"resumeToken":%q}}`, id, reqID, token)
	m, _ := c.Response(id)
	if m.Error != nil {
		return Status{}, m.Error
	}
	var st Status
	if err := json.Unmarshal(m.Result, &st); err != nil {
		c.t.Fatalf("getStatus result %s: %v", m.Result, err)
	}
	return st, nil
}

// WaitStatus polls getStatus until cond holds (bounded by the suite's timeout).
func (c *Client) WaitStatus(reqID, token string, cond func(Status) bool) Status {
	c.t.Helper()
	var st Status
	i := 0
	defer func() {
		if c.t.Failed() { // Until gave up (Fatalf ends the goroutine through here)
			c.t.Logf("the last status: %+v", st)
		}
	}()
	poll.Until(c.t, timeout, "getStatus to reach the condition", func() bool {
		var err *spec.Error
		if st, err = c.GetStatus(fmt.Sprintf(`"st-%d"`, i), reqID, token); err != nil {
			c.t.Fatalf("getStatus: %v", err)
		}
		i++
		return cond(st)
	})
	return st
}

// Countdowns sends calls countdown calls of steps steps over seconds at once
// on c, each with a progress token of its own, and checks that each one's
// result comes and its progress is 1..steps, once each and in order.
func (c *Client) Countdowns(calls, seconds, steps int) {
	c.t.Helper()
	for i := range calls {
		c.Send(`{"jsonrpc":"2.0","id":"k%d","method":"tools/call","params":{"name":"countdown","arguments":{"seconds":%d,"steps":%d},"_meta":{"progressToken":"p%d"}}}`, i, seconds, steps, i)
	}
	progress := map[string][]int{}
	done := 0
	c.Until(func(m Msg) bool {
		switch {
		case m.Method == "notifications/progress":
			tok, _, _ := spec.Member(m.Params, "progressToken")
			progress[string(tok)] = append(progress[string(tok)], Progress(m))
		case m.Method == "":
			if want := fmt.Sprintf("countdown done: %d of %d steps", steps, steps); Text(m) != want {
				c.t.Errorf("a result: %s, want %q", m.Raw, want)
			}
			done++
		}
		return done == calls
	})
	want := make([]int, steps)
	for i := range want {
		want[i] = i + 1
	}
	for i := range calls {
		if got := progress[fmt.Sprintf(`"p%d"`, i)]; fmt.Sprint(got) != fmt.Sprint(want) {
			c.t.Errorf("call %d: progress %v, want 1..%d once each in order", i, got, steps)
		}
	}
}

// TaskEvent is a notifications/tasks/event as a test reads it: Type without
// its io.mcp-resume. prefix.
type TaskEvent struct {
	Seq     uint64
	Type    string
	Payload json.RawMessage
}

// TaskEvents returns the task events among ms, in order.
func TaskEvents(ms []Msg) []TaskEvent {
	var evs []TaskEvent
	for _, m := range ms {
		var ev TaskEvent
		if m.Method == spec.MethodTaskEvent && json.Unmarshal(m.Params, &ev) == nil {
			ev.Type = strings.TrimPrefix(ev.Type, "io.mcp-resume.")
			evs = append(evs, ev)
		}
	}
	return evs
}

// WaitTools lists the server's tools until want are all among them (a
// gateway lists its upstreams' as they answer), 30 s at most, and returns
// the names listed last.
func (c *Client) WaitTools(want ...string) []string {
	c.t.Helper()
	var names []string
	n := 0
	poll.Until(c.t, 30*time.Second, fmt.Sprintf("tools %v listed", want), func() bool {
		n++
		id := fmt.Sprintf(`"tools-%d"`, n)
		c.Send(`{"jsonrpc":"2.0","id":%s,"method":"tools/list"}`, id)
		m, _ := c.Response(id)
		var res struct {
			Tools []struct{ Name string } `json:"tools"`
		}
		_ = json.Unmarshal(m.Result, &res)
		names = names[:0]
		for _, tl := range res.Tools {
			names = append(names, tl.Name)
		}
		for _, w := range want {
			if !slices.Contains(names, w) {
				return false
			}
		}
		return true
	})
	return names
}
