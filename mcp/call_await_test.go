package mcp_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/mcp/e2etest"
	"github.com/mcp-resume/mcp-resume/servers/demo"
	"github.com/mcp-resume/mcp-resume/spec"
)

// progressOf returns the progress values of ms under token.
func progressOf(ms []e2etest.Msg, token string) []int {
	var out []int
	for _, m := range ms {
		if m.Method == spec.MethodProgress && strings.Contains(string(m.Params), `"progressToken":"`+token+`"`) {
			out = append(out, e2etest.Progress(m))
		}
	}
	return out
}

// oneToN reports whether got is 1, 2, ... n, each once.
func oneToN(got []int, n int) bool {
	if len(got) != n {
		return false
	}
	for i, v := range got {
		if v != i+1 {
			return false
		}
	}
	return true
}

// deferredCountdown calls a countdown of seconds and steps (progress token
// "p") through k and returns its deferred answer and the progress that came
// before it.
func deferredCountdown(t *testing.T, k caller, seconds, steps int) (deferred, []int) {
	t.Helper()
	k.call(`"c"`, "countdown", fmt.Sprintf(`{"seconds":%d,"steps":%d}`, seconds, steps), `"progressToken":"p"`)
	resp, before := k.c.Response(`"c"`)
	d, ok := deferredOf(t, resp)
	if !ok {
		t.Fatalf("the countdown: %s, want a deferred answer", resp.Raw)
	}
	return d, progressOf(before, "p")
}

// awaitOnce calls the await tool with d's handle as id (progress token "q")
// and returns its answer and the progress that came with it.
func awaitOnce(k caller, d deferred, id string) (e2etest.Msg, []int) {
	k.call(id, d.Tool, fmt.Sprintf(`{"handle":%q}`, d.Arguments.Handle), `"progressToken":"q"`)
	resp, before := k.c.Response(id)
	return resp, progressOf(before, "q")
}

// TestAwaitExactlyOnce: every progress value of a deferred countdown reaches
// its client once, across the call and every await, whichever is there when
// it is written: the countdown's steps fall exactly on the deferral and on
// each await's deadline (10 s apart, AnswerWithin 10 s). Both eras, a plain
// client and one that declared resumable requests with acks (whose messages
// count as delivered only when acknowledged: an await must not send its
// whole outbox again).
func TestAwaitExactlyOnce(t *testing.T) {
	for _, tc := range []struct {
		name   string
		modern bool
		caps   string
	}{
		{"2025", false, `{}`},
		{"2025 acks", false, `{"resumableRequests":{"extensions":["io.mcp-resume/ack"]}}`},
		{"2026", true, `{}`},
		{"2026 acks", true, fmt.Sprintf(`{"extensions":{%q:{"extensions":[%q]}}}`, spec.ExtensionResumable, spec.ExtensionAck)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				core, err := mcp.New(demo.Server("test"), &mcp.Options{AnswerWithin: 10 * time.Second})
				if err != nil {
					t.Fatal(err)
				}
				k := caller{c: e2etest.NewClient(t, serveCore(t, core)(t)), modern: tc.modern, caps: tc.caps}
				if !tc.modern {
					k.c.Initialize(tc.caps)
				}
				d, progress := deferredCountdown(t, k, 60, 6)
				awaits := 0
				for i := 0; ; i++ {
					resp, got := awaitOnce(k, d, fmt.Sprintf(`"a%d"`, i))
					progress = append(progress, got...)
					awaits++
					if _, again := deferredOf(t, resp); again && i < 10 {
						continue
					}
					if e2etest.Text(resp) != "countdown done: 6 of 6 steps" {
						t.Fatalf("await %d: %s, want the result", i, resp.Raw)
					}
					break
				}
				if !oneToN(progress, 6) {
					t.Errorf("progress across the call and %d awaits: %v, want 1..6 each once", awaits, progress)
				}
				if awaits < 3 {
					t.Errorf("%d awaits, want at least three", awaits)
				}
			})
		})
	}
}

// TestAwaitCancelledMidway: an await whose client cancels it as progress is
// written (the same instant) leaves what it did not pass on for the next
// await: every value once.
func TestAwaitCancelledMidway(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		core, err := mcp.New(demo.Server("test"), &mcp.Options{AnswerWithin: 25 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		k := caller{c: e2etest.NewClient(t, serveCore(t, core)(t)), caps: `{}`}
		k.c.Initialize(`{}`)
		d, progress := deferredCountdown(t, k, 60, 6) // deferred at 25 s, after steps 1 and 2
		k.call(`"a0"`, d.Tool, fmt.Sprintf(`{"handle":%q}`, d.Arguments.Handle), `"progressToken":"q"`)
		time.Sleep(5 * time.Second) // t = 30 s: step 3 and the cancel at once
		k.c.Send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"a0"}}`)
		synctest.Wait()
		progress = append(progress, progressOf(k.c.Quiet(`"none"`), "q")...)
		for i := 1; ; i++ {
			resp, got := awaitOnce(k, d, fmt.Sprintf(`"a%d"`, i))
			progress = append(progress, got...)
			if _, again := deferredOf(t, resp); again && i < 10 {
				continue
			}
			if e2etest.Text(resp) != "countdown done: 6 of 6 steps" {
				t.Fatalf("await %d: %s, want the result", i, resp.Raw)
			}
			break
		}
		if !oneToN(progress, 6) {
			t.Errorf("progress %v, want 1..6 each once", progress)
		}
	})
}

// TestAwaitCancelledAsking: an await cancelled while the call waits for an
// answer to its question loses nothing the call wrote meanwhile: progress
// written after the question reaches the client once, and the next await
// gives the result.
func TestAwaitCancelledAsking(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := demo.Server("test")
		srv.AddTool(mcpgo.NewTool("ask_then_progress"), func(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
			time.Sleep(20 * time.Second)
			s := server.ServerFromContext(ctx)
			go func() {
				time.Sleep(time.Second) // while the question waits
				_ = s.SendNotificationToClient(ctx, spec.MethodProgress, map[string]any{"progressToken": "p", "progress": 1})
			}()
			res, err := s.RequestElicitation(ctx, mcpgo.ElicitationRequest{Params: mcpgo.ElicitationParams{Message: "Name?",
				RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"answer": map[string]any{"type": "string"}}}}})
			if err != nil {
				return mcpgo.NewToolResultError(err.Error()), nil
			}
			content, _ := res.Content.(map[string]any)
			return mcpgo.NewToolResultText(fmt.Sprintf("answer: %v", content["answer"])), nil
		})
		core, err := mcp.New(srv, &mcp.Options{AnswerWithin: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		k := caller{c: e2etest.NewClient(t, serveCore(t, core)(t)), caps: `{"elicitation":{}}`}
		k.c.Initialize(`{"elicitation":{}}`)
		k.call(`"c"`, "ask_then_progress", `{}`, `"progressToken":"p"`)
		resp, _ := k.c.Response(`"c"`)
		d, ok := deferredOf(t, resp)
		if !ok {
			t.Fatalf("%s, want a deferred answer", resp.Raw)
		}
		time.Sleep(5 * time.Second) // t = 15 s
		args := fmt.Sprintf(`{"handle":%q}`, d.Arguments.Handle)
		k.call(`"a0"`, d.Tool, args, `"progressToken":"q"`)
		asked := k.c.Until(func(m e2etest.Msg) bool { return m.Method == "elicitation/create" }) // t = 20 s
		q := asked[len(asked)-1]
		time.Sleep(2 * time.Second) // the progress came at 21 s
		k.c.Send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"a0"}}`)
		synctest.Wait()
		progress := progressOf(k.c.Quiet(`"none"`), "q")
		k.c.Send(`{"jsonrpc":"2.0","id":%s,"result":{"action":"accept","content":{"answer":"Ada"}}}`, q.ID)
		resp, got := awaitOnce(k, d, `"a1"`)
		progress = append(progress, got...)
		if e2etest.Text(resp) != "answer: Ada" {
			t.Fatalf("the next await: %s, want the result", resp.Raw)
		}
		if !oneToN(progress, 1) {
			t.Errorf("progress %v, want the one value once", progress)
		}
	})
}

// TestAwaitSeesTheEnd: an await waiting on a call that is cancelled (by
// another await with cancel, or by notifications/cancelled with its token)
// answers at once, with the reason.
func TestAwaitSeesTheEnd(t *testing.T) {
	for _, how := range []string{"await cancel", "token cancel"} {
		t.Run(how, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				core, err := mcp.New(demo.Server("test"), &mcp.Options{AnswerWithin: 10 * time.Second})
				if err != nil {
					t.Fatal(err)
				}
				k := caller{c: e2etest.NewClient(t, serveCore(t, core)(t)), caps: `{}`}
				k.c.Initialize(`{}`)
				d, _ := deferredCountdown(t, k, 300, 3)
				k.call(`"a"`, d.Tool, fmt.Sprintf(`{"handle":%q}`, d.Arguments.Handle), "")
				time.Sleep(5 * time.Second)
				start := time.Now()
				if how == "await cancel" {
					k.call(`"x"`, d.Tool, fmt.Sprintf(`{"handle":%q,"cancel":true}`, d.Arguments.Handle), "")
				} else {
					h := decodeTestHandle(t, d.Arguments.Handle)
					k.c.Send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%s,"resumeToken":%q}}`, h.ID, h.Token)
				}
				resp, _ := k.c.Response(`"a"`)
				if waited := time.Since(start); waited > 2*time.Second {
					t.Errorf("the await answered %v after the cancel", waited)
				}
				if !strings.Contains(string(resp.Raw), `"`+string(spec.ReasonCancelled)+`"`) {
					t.Fatalf("the await of a cancelled call: %s, want cancelled", resp.Raw)
				}
			})
		})
	}
}

// TestTwoAwaitsAtOnce: a second await of one handle takes the call over; the
// first answers at once (superseded) instead of waiting out its window; a
// question the call asks reaches the session once, and progress once.
func TestTwoAwaitsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		core, err := mcp.New(demo.Server("test"), &mcp.Options{AnswerWithin: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		k := caller{c: e2etest.NewClient(t, serveCore(t, core)(t)), caps: `{"elicitation":{}}`}
		k.c.Initialize(`{"elicitation":{}}`)
		k.call(`"c"`, "ask", `{"question":"Name?","delay":60}`, "")
		resp, _ := k.c.Response(`"c"`)
		d, ok := deferredOf(t, resp)
		if !ok {
			t.Fatalf("%s, want a deferred answer", resp.Raw)
		}
		time.Sleep(55 * time.Second) // t = 65 s: the question waits in the call
		synctest.Wait()
		args := fmt.Sprintf(`{"handle":%q}`, d.Arguments.Handle)
		k.call(`"a1"`, d.Tool, args, "")
		first := k.c.Until(func(m e2etest.Msg) bool { return m.Method == "elicitation/create" })
		q := first[len(first)-1]
		start := time.Now()
		k.call(`"a2"`, d.Tool, args, "")
		resp, between := k.c.Response(`"a1"`)
		if waited := time.Since(start); waited > 2*time.Second {
			t.Errorf("the first await answered %v after the second came", waited)
		}
		if !strings.Contains(string(resp.Raw), `"`+string(spec.ReasonSuperseded)+`"`) {
			t.Fatalf("the first await: %s, want superseded", resp.Raw)
		}
		k.c.Send(`{"jsonrpc":"2.0","id":%s,"result":{"action":"accept","content":{"answer":"Ada"}}}`, q.ID)
		resp, before := k.c.Response(`"a2"`)
		if e2etest.Text(resp) != "answer: Ada" {
			t.Fatalf("the second await: %s, want the result", resp.Raw)
		}
		for _, m := range append(between, before...) {
			if m.Method == "elicitation/create" {
				t.Errorf("the question asked again of the same session: %s", m.Raw)
			}
		}
	})
}

// TestQuestionPastTheWindow: a question the user has not answered when the
// await's window ends does not hold the await: it answers in time (the call
// asks), and the answer given later still reaches the tool.
func TestQuestionPastTheWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		core, err := mcp.New(demo.Server("test"), &mcp.Options{AnswerWithin: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		k := caller{c: e2etest.NewClient(t, serveCore(t, core)(t)), caps: `{"elicitation":{}}`}
		k.c.Initialize(`{"elicitation":{}}`)
		k.call(`"c"`, "ask", `{"question":"Name?","delay":60}`, "")
		resp, _ := k.c.Response(`"c"`)
		d, _ := deferredOf(t, resp)
		args := fmt.Sprintf(`{"handle":%q}`, d.Arguments.Handle)
		time.Sleep(45 * time.Second) // t = 55 s: the tool asks at 60 s, within the await's window
		start := time.Now()
		k.call(`"a1"`, d.Tool, args, "")
		asked := k.c.Until(func(m e2etest.Msg) bool { return m.Method == "elicitation/create" })
		q := asked[len(asked)-1]
		resp, _ = k.c.Response(`"a1"`) // nobody answers
		if waited := time.Since(start); waited != 10*time.Second {
			t.Errorf("the await answered after %v, want its window, 10s", waited)
		}
		next, ok := deferredOf(t, resp)
		if !ok || !next.InputRequested {
			t.Fatalf("the await past its window: %s, want a deferred answer that says the call asks", resp.Raw)
		}
		k.c.Send(`{"jsonrpc":"2.0","id":%s,"result":{"action":"accept","content":{"answer":"Ada"}}}`, q.ID)
		resp, _ = awaitOnce(k, next, `"a2"`)
		if e2etest.Text(resp) != "answer: Ada" {
			t.Fatalf("the next await: %s, want the tool's answer", resp.Raw)
		}
	})
}

// testHandle is what a deferred answer's handle carries (mcp/call_deferral.go):
// the call's id and token.
type testHandle struct {
	ID    json.RawMessage `json:"i"`
	Token string          `json:"t"`
}

func decodeTestHandle(t *testing.T, h string) testHandle {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(h, "dh1."))
	var th testHandle
	if err != nil || json.Unmarshal(b, &th) != nil || th.Token == "" {
		t.Fatalf("a handle that does not decode: %q", h)
	}
	return th
}
