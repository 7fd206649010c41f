package e2etest

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mcp-resume/mcp-resume/spec"
)

// DeferralWithin is the Options.AnswerWithin of a server RunDeferral is run
// against (serve --answer-within).
const DeferralWithin = 300 * time.Millisecond

// RunDeferral runs the deferred-answer cases against a server that defers
// after DeferralWithin: in both eras, a plain client's countdown of four
// times that is answered with a deferred answer whose await, called again
// while it defers, forwards the call's progress to its own token and ends
// with the result, every progress value once across the call and its
// awaits; across a reconnect (Reconnect) the await is made on a new
// connection.
func RunDeferral(t *testing.T, h Harness) {
	for _, modern := range []bool{false, true} {
		era := map[bool]string{false: "2025", true: "2026"}[modern]
		t.Run(era, func(t *testing.T) { deferral(t, h, modern) })
		t.Run(era+"/Question", func(t *testing.T) { deferralQuestion(t, h, modern) })
	}
}

// deferralQuestion: a question the tool asks after its deferred answer reaches
// the client through the await call (a server-to-client request in the 2025
// era, an input_required answer in the 2026 era), and the answer the tool.
func deferralQuestion(t *testing.T, h Harness, modern bool) {
	c := NewClient(t, h.Dial(t))
	const caps = `{"elicitation":{}}`
	if !modern {
		c.Initialize(caps)
	}
	delay := 2 * DeferralWithin.Seconds()
	if modern {
		c.Modern(`"q"`, "tools/call", fmt.Sprintf(`"name":"ask","arguments":{"question":"Name?","delay":%v}`, delay), caps)
	} else {
		c.Send(`{"jsonrpc":"2.0","id":"q","method":"tools/call","params":{"name":"ask","arguments":{"question":"Name?","delay":%v}}}`, delay)
	}
	resp, _ := c.Response(`"q"`)
	tool, args, ok := deferredTo(resp)
	if !ok {
		t.Fatalf("ask after %vs: %s, want a deferred answer", delay, resp.Raw)
	}
	if h.Reconnect {
		c.Close()
		c = NewClient(t, h.Dial(t))
		if !modern {
			c.Initialize(caps)
		}
	}
	for i := 0; ; i++ {
		id := fmt.Sprintf(`"a%d"`, i)
		if modern {
			c.Modern(id, "tools/call", fmt.Sprintf(`"name":%q,"arguments":%s`, tool, args), caps)
		} else {
			c.Send(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, tool, args)
		}
		var resp Msg
		if modern {
			resp, _ = c.Response(id)
			var ir InputRequired
			if json.Unmarshal(resp.Result, &ir) == nil && ir.ResultType == "input_required" {
				retry := fmt.Sprintf(`"r%d"`, i)
				for key := range ir.InputRequests {
					c.Modern(retry, "tools/call", fmt.Sprintf(`"name":%q,"arguments":%s,"inputResponses":{%q:{"action":"accept","content":{"answer":"Ada"}}},"requestState":%q`,
						tool, args, key, ir.RequestState), caps)
				}
				resp, _ = c.Response(retry)
			}
		} else {
			ms := c.Until(func(m Msg) bool { return m.Method == "elicitation/create" || m.IsResponse(id) })
			if q := ms[len(ms)-1]; q.Method == "elicitation/create" {
				c.Send(`{"jsonrpc":"2.0","id":%s,"result":{"action":"accept","content":{"answer":"Ada"}}}`, q.ID)
				resp, _ = c.Response(id)
			} else {
				resp = q
			}
		}
		if _, _, again := deferredTo(resp); again {
			if i > 8 {
				t.Fatalf("still deferred after %d awaits", i)
			}
			continue
		}
		if Text(resp) != "answer: Ada" {
			t.Fatalf("await %d: %s, want the tool's answer", i, resp.Raw)
		}
		return
	}
}

func deferral(t *testing.T, h Harness, modern bool) {
	c := NewClient(t, h.Dial(t))
	call := func(c *Client, id, tool, args, meta string) {
		if modern {
			c.Modern(id, "tools/call", fmt.Sprintf(`"name":%q,"arguments":%s`, tool, args), `{}`, meta)
			return
		}
		c.Send(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":%q,"arguments":%s,"_meta":{%s}}}`, id, tool, args, meta)
	}
	if !modern {
		c.Initialize(`{}`)
	}
	seconds := 4 * DeferralWithin.Seconds()
	call(c, `"d"`, "countdown", fmt.Sprintf(`{"seconds":%v,"steps":8}`, seconds), `"progressToken":"p"`)
	resp, before := c.Response(`"d"`)
	tool, args, ok := deferredTo(resp)
	if !ok {
		t.Fatalf("a %vs countdown: %s, want a deferred answer", seconds, resp.Raw)
	}
	var progress []int // the call's own, then each await's: every value once
	for _, m := range before {
		if m.Method == spec.MethodProgress {
			progress = append(progress, Progress(m))
		}
	}
	if h.Reconnect {
		c.Close()
		c = NewClient(t, h.Dial(t))
		if !modern {
			c.Initialize(`{}`)
		}
	}
	for i := 0; ; i++ {
		id := fmt.Sprintf(`"a%d"`, i)
		call(c, id, tool, args, `"progressToken":"q"`)
		resp, before := c.Response(id)
		for _, m := range before {
			if m.Method == spec.MethodProgress && strings.Contains(string(m.Params), `"progressToken":"q"`) {
				progress = append(progress, Progress(m))
			}
		}
		if _, _, again := deferredTo(resp); again {
			if i > 8 {
				t.Fatalf("still deferred after %d awaits", i)
			}
			continue
		}
		if Text(resp) != "countdown done: 8 of 8 steps" {
			t.Fatalf("await %d: %s, want the result", i, resp.Raw)
		}
		break
	}
	if fmt.Sprint(progress) != "[1 2 3 4 5 6 7 8]" {
		t.Errorf("progress through the call and its awaits %v, want 1..8 each once", progress)
	}
}

// deferredTo reads m as a deferred answer: the tool to call and its arguments
// (JSON).
func deferredTo(m Msg) (tool, args string, ok bool) {
	var r struct {
		Meta map[string]struct {
			Tool      string          `json:"tool"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"_meta"`
	}
	if m.Error != nil || json.Unmarshal(m.Result, &r) != nil {
		return "", "", false
	}
	d, ok := r.Meta[spec.MetaDeferred]
	return d.Tool, string(d.Arguments), ok && d.Tool != ""
}
