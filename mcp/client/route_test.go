package client_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/mcp/client"
	"github.com/mcp-resume/mcp-resume/spec"
	"github.com/mcp-resume/mcp-resume/testkit/poll"
	"github.com/mcp-resume/mcp-resume/transport"
	httptransport "github.com/mcp-resume/mcp-resume/transport/http"
)

// gatedServer has a tool "gated" that waits for release to close, then logs
// its question (notifications/message) and asks it (elicitation/create), and
// answers with the answer; and a tool "logged" that logs "hello" at info
// level (the level a request asked for decides whether it is sent).
func gatedServer(release <-chan struct{}) *server.MCPServer {
	s := server.NewMCPServer("gated", "1", server.WithToolCapabilities(false), server.WithLogging())
	s.AddTool(mcpgo.NewTool("logged"), func(ctx context.Context, _ mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		_ = server.ServerFromContext(ctx).SendLogMessageToClient(ctx, mcpgo.NewLoggingMessageNotification(mcpgo.LoggingLevelInfo, "", "hello"))
		return mcpgo.NewToolResultText("logged"), nil
	})
	s.AddTool(mcpgo.NewTool("gated", mcpgo.WithString("question")), func(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		q := req.GetString("question", "?")
		srv := server.ServerFromContext(ctx)
		_ = srv.SendNotificationToClient(ctx, "notifications/message", map[string]any{"level": "info", "data": "asking " + q})
		res, err := srv.RequestElicitation(ctx, mcpgo.ElicitationRequest{Params: mcpgo.ElicitationParams{
			Message:         q,
			RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"answer": map[string]any{"type": "string"}}},
		}})
		if err != nil {
			return mcpgo.NewToolResultError("elicitation failed: " + err.Error()), nil
		}
		content, _ := res.Content.(map[string]any)
		return mcpgo.NewToolResultText("answer: " + content["answer"].(string)), nil
	})
	return s
}

// answerWith is an OnRequest that accepts an elicitation with answer, and
// counts the requests it answered in n.
func answerWith(answer string, n *atomic.Int32) func(context.Context, string, json.RawMessage) (json.RawMessage, error) {
	return func(_ context.Context, method string, _ json.RawMessage) (json.RawMessage, error) {
		n.Add(1)
		return json.RawMessage(`{"action":"accept","content":{"answer":"` + answer + `"}}`), nil
	}
}

// logsTo is an OnLog that records the data of each log message.
func logsTo(mu *sync.Mutex, got *[]string) func(mcpgo.LoggingMessageNotificationParams) {
	return func(p mcpgo.LoggingMessageNotificationParams) {
		mu.Lock()
		defer mu.Unlock()
		*got = append(*got, p.Data.(string))
	}
}

// routedOpts are client options that declare elicitation for the Calls'
// handlers and answer what no Call's handler answers with "nobody", counted
// in global; log messages of no Call go to globalLogs.
func routedOpts(global *atomic.Int32, mu *sync.Mutex, globalLogs *[]string) *client.Options {
	o := fastOpts()
	o.Capabilities = map[string]any{"elicitation": map[string]any{}}
	o.OnRequest = answerWith("nobody", global)
	o.OnLog = logsTo(mu, globalLogs)
	return o
}

// A Call with handlers of its own gets its questions and log messages on a
// connection that does not say which request they are for (a pipe), as the
// only such Call in flight; the Options' handlers get none.
func TestCallOwnHandlers(t *testing.T) {
	release := make(chan struct{})
	close(release)
	s := newPipeServerOf(t, gatedServer(release), nil)
	var global, own atomic.Int32
	var mu sync.Mutex
	var globalLogs, ownLogs []string
	c := connect(t, s.dial, routedOpts(&global, &mu, &globalLogs))
	res, err := c.CallTool(t.Context(), "gated", map[string]any{"question": "Name?"}, &client.CallOptions{
		OnRequest: answerWith("Ada", &own),
		OnLog:     logsTo(&mu, &ownLogs),
	})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if got := text(t, res); got != "answer: Ada" || own.Load() != 1 || global.Load() != 0 {
		t.Fatalf("result %q; the call's handler answered %d, the client's %d", got, own.Load(), global.Load())
	}
	if len(ownLogs) != 1 || ownLogs[0] != "asking Name?" || len(globalLogs) != 0 {
		t.Fatalf("the call's logs %q, the client's %q", ownLogs, globalLogs)
	}
}

// Two Calls with handlers of their own, each asking at once: over a pipe the
// questions name no call, so the Options' handler answers both; over
// Streamable HTTP each came on its own call's stream, and each call's handler
// answers its own.
func TestCallHandlersOfConcurrentCalls(t *testing.T) {
	for _, tc := range []struct {
		name       string
		dial       func(t *testing.T, s *pipeServer) client.Dialer
		attributed bool
	}{
		{"pipe", func(_ *testing.T, s *pipeServer) client.Dialer { return s.dial }, false},
		{"http", func(t *testing.T, s *pipeServer) client.Dialer {
			url := serveCore(t, s.core)
			return func(context.Context) (transport.Conn, error) {
				return httptransport.Dial(url, &httptransport.ClientOptions{ReportStreamLoss: true}), nil
			}
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			release := make(chan struct{})
			s := newPipeServerOf(t, gatedServer(release), nil)
			core := s.core
			var global, a, b atomic.Int32
			var mu sync.Mutex
			var globalLogs, aLogs, bLogs []string
			opts := routedOpts(&global, &mu, &globalLogs)
			// The client's handler answers once both questions and both
			// log messages came, whoever got them: both calls are in flight
			// as every message of theirs arrives. (mcp-go sends a tool's
			// notifications from a goroutine of its own: a log may reach the
			// wire after the question the tool asked next.)
			var questions, logs atomic.Int32
			both, bothLogs := make(chan struct{}), make(chan struct{})
			counted := func(f func(mcpgo.LoggingMessageNotificationParams)) func(mcpgo.LoggingMessageNotificationParams) {
				return func(p mcpgo.LoggingMessageNotificationParams) {
					f(p)
					if logs.Add(1) == 2 {
						close(bothLogs)
					}
				}
			}
			opts.OnLog = counted(opts.OnLog)
			opts.OnRequest = func(ctx context.Context, _ string, _ json.RawMessage) (json.RawMessage, error) {
				global.Add(1)
				if questions.Add(1) == 2 {
					close(both)
				}
				for _, ch := range []chan struct{}{both, bothLogs} {
					select {
					case <-ch:
					case <-ctx.Done():
						return nil, ctx.Err()
					}
				}
				return json.RawMessage(`{"action":"accept","content":{"answer":"nobody"}}`), nil
			}
			c := connect(t, tc.dial(t, s), opts)
			results := make(chan string, 2)
			for _, h := range []struct {
				name string
				n    *atomic.Int32
				logs *[]string
			}{{"A", &a, &aLogs}, {"B", &b, &bLogs}} {
				go func() {
					res, err := c.CallTool(t.Context(), "gated", map[string]any{"question": h.name + "?"}, &client.CallOptions{
						OnRequest: answerWith(h.name, h.n),
						OnLog:     counted(logsTo(&mu, h.logs)),
					})
					if err != nil {
						results <- err.Error()
						return
					}
					results <- text(t, res)
				}()
			}
			poll.Until(t, 10*time.Second, "both calls running", func() bool { return core.Calls() == 2 })
			close(release)
			got := map[string]bool{<-results: true, <-results: true}
			mu.Lock()
			defer mu.Unlock()
			if tc.attributed {
				if !got["answer: A"] || !got["answer: B"] || a.Load() != 1 || b.Load() != 1 || global.Load() != 0 {
					t.Fatalf("results %v; answered by A %d, B %d, the client %d", got, a.Load(), b.Load(), global.Load())
				}
				if len(aLogs) != 1 || aLogs[0] != "asking A?" || len(bLogs) != 1 || bLogs[0] != "asking B?" || len(globalLogs) != 0 {
					t.Fatalf("logs: A %q, B %q, the client's %q", aLogs, bLogs, globalLogs)
				}
				return
			}
			if !got["answer: nobody"] || len(got) != 1 || a.Load()+b.Load() != 0 || global.Load() != 2 {
				t.Fatalf("results %v; answered by A %d, B %d, the client %d", got, a.Load(), b.Load(), global.Load())
			}
			if len(aLogs)+len(bLogs) != 0 || len(globalLogs) != 2 {
				t.Fatalf("logs: A %q, B %q, the client's %q", aLogs, bLogs, globalLogs)
			}
		})
	}
}

// serveCore serves core behind the Streamable HTTP handler until the test
// ends, and returns its URL.
func serveCore(t testing.TB, core *mcp.Server) string {
	h := httptransport.NewHandler(core, nil)
	hs := httptest.NewServer(h)
	t.Cleanup(func() {
		h.Close()
		hs.Close()
	})
	return hs.URL
}

// rawServer is a minimal MCP server on one end of a pipe, for what the core
// never does: each tools/call asks its client an elicitation with the id
// "q1" (a server that numbers its requests per session, on a new session for
// each call) and answers with what came back.
func rawServer(t *testing.T) client.Dialer {
	return func(context.Context) (transport.Conn, error) {
		c, srv := transport.Pipe()
		go func() {
			defer srv.Close()
			var pending spec.ID // the tools/call waiting for its answer
			for {
				raw, err := srv.Read(context.Background())
				if err != nil {
					return
				}
				m, derr := spec.Decode(raw)
				if derr != nil {
					return
				}
				var out []byte
				switch {
				case m.Method == "initialize":
					out = spec.EncodeResponse(m.ID, json.RawMessage(`{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"raw","version":"1"}}`))
				case m.Method == "tools/call":
					pending = m.ID
					out = spec.EncodeRequest(spec.ID(`"q1"`), "elicitation/create", json.RawMessage(`{"message":"Name?","requestedSchema":{"type":"object"}}`))
				case m.Kind == spec.KindResponse && pending != nil:
					var r struct {
						Content struct{ Answer string } `json:"content"`
					}
					_ = json.Unmarshal(m.Result, &r)
					out = spec.EncodeResponse(pending, json.RawMessage(`{"content":[{"type":"text","text":"answer: `+r.Content.Answer+`"}]}`))
					pending = nil
				case m.Kind == spec.KindRequest:
					out = spec.EncodeError(m.ID, spec.NewError(spec.CodeMethodNotFound, "", "no"))
				}
				if out != nil && srv.Write(context.Background(), out) != nil {
					return
				}
			}
		}()
		t.Cleanup(func() { _ = c.Close() })
		return c, nil
	}
}

// A server's request with an id a request of another Call had (a server that
// numbers its requests per session) is a new question for a Call with its own
// handlers: each call gets its own answer, not the one before.
func TestCallOwnRequestIDs(t *testing.T) {
	var global, n atomic.Int32
	var mu sync.Mutex
	var logs []string
	c := connect(t, rawServer(t), routedOpts(&global, &mu, &logs))
	for _, name := range []string{"Ada", "Grace"} {
		res, err := c.CallTool(t.Context(), "any", nil, &client.CallOptions{OnRequest: answerWith(name, &n)})
		if err != nil || text(t, res) != "answer: "+name {
			t.Fatalf("%v %v, want the answer %s", res, err, name)
		}
	}
	if n.Load() != 2 || global.Load() != 0 {
		t.Fatalf("the calls' handlers answered %d, the client's %d", n.Load(), global.Load())
	}
}
