package faultproxy

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/mcp-resume/mcp-resume/spec"
)

// Call is the client side of one countdown call (the demo tool) driven to its
// result through any number of cuts, with the ack extension: on each new
// connection it says what to send, and it checks every message that comes back:
// sequence numbers only go up, progress arrives exactly once and in order, and
// the result once.
type Call struct {
	N     int // tells the call's ids apart from other calls'
	Steps int // the countdown's steps
	// Tool, Args and Want call another tool than countdown: its name, its
	// arguments (a JSON object) and a string its result contains. The tool must
	// send Steps progress notifications, 1 to Steps.
	Tool, Args, Want string

	id       string // the call's id; a new one per attempt until the policy arrives
	token    string
	ack      uint64
	progress []int
	results  int
}

// InitializeAck is the initialize request of a client using the ack extension.
var InitializeAck = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"resumableRequests":{"extensions":["` +
	spec.ExtensionAck + `"]}},"clientInfo":{"name":"fault","version":"1"}}}`

// Done reports whether the result has arrived.
func (c *Call) Done() bool { return c.results > 0 }

// Request returns what to send on the connection of attempt: the call itself
// while the client holds no token (a call whose policy never arrived cannot be
// resumed, so it is made again under a new id), then requests/resume with the ack.
func (c *Call) Request(attempt int) string {
	if c.token == "" {
		c.id = fmt.Sprintf(`"c%d-%d"`, c.N, attempt)
		tool, args := c.Tool, c.Args
		if tool == "" {
			tool, args = "countdown", fmt.Sprintf(`{"seconds":1,"steps":%d}`, c.Steps)
		}
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":%q,"arguments":%s,"_meta":{"progressToken":%s}}}`,
			c.id, tool, args, c.id)
	}
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"requests/resume","params":{"resumeToken":%q,"_meta":{%q:%d}}}`, c.id, c.token, spec.MetaAck, c.ack)
}

// Take checks one message of the call. It reports the result's arrival.
func (c *Call) Take(b []byte) (done bool, err error) {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return false, fmt.Errorf("bad message %q", b)
	}
	switch {
	case m.Method == spec.MethodResumePolicy:
		var p struct {
			ResumeToken string `json:"resumeToken"`
		}
		_ = json.Unmarshal(m.Params, &p)
		c.token = p.ResumeToken
		return false, nil
	case m.Error != nil:
		return false, fmt.Errorf("error: %s", b)
	}
	obj := m.Params
	if m.Result != nil {
		obj = m.Result
	}
	seq := spec.ReadSeq(obj)
	if seq <= c.ack {
		return false, fmt.Errorf("seq %d delivered again after ack %d: %s", seq, c.ack, b)
	}
	c.ack = seq
	if m.Result != nil {
		if string(m.ID) != c.id {
			return false, fmt.Errorf("result for id %s, want %s", m.ID, c.id)
		}
		c.results++
		want := c.Want
		if c.Tool == "" {
			want = fmt.Sprintf("countdown done: %d of %d steps", c.Steps, c.Steps)
		}
		if !strings.Contains(string(m.Result), want) {
			return false, fmt.Errorf("result %s", m.Result)
		}
		return true, nil
	}
	if m.Method != "notifications/progress" {
		// Another message of the call (a log message: a stdio upstream's log
		// of no request goes to the only call running), once like the rest.
		return false, nil
	}
	var p struct {
		Progress int `json:"progress"`
	}
	_ = json.Unmarshal(m.Params, &p)
	c.progress = append(c.progress, p.Progress)
	return false, nil
}

// Check reports whether the call got every progress notification exactly once and
// in order, and one result.
func (c *Call) Check() error {
	for i, v := range c.progress {
		if v != i+1 {
			return fmt.Errorf("progress %v, want 1..%d each once in order", c.progress, c.Steps)
		}
	}
	if len(c.progress) != c.Steps || c.results != 1 {
		return fmt.Errorf("progress %v, %d results", c.progress, c.results)
	}
	return nil
}

// Progress returns the progress values received so far.
func (c *Call) Progress() []int { return c.progress }
