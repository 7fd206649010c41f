package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/mcp/client"
	"github.com/mcp-resume/mcp-resume/servers/conformance"
	"github.com/mcp-resume/mcp-resume/servers/demo"
	"github.com/mcp-resume/mcp-resume/spec"
	httptransport "github.com/mcp-resume/mcp-resume/transport/http"
)

// serveHTTP serves srv through the core behind the Streamable HTTP handler,
// its POSTs' methods logged, and returns the endpoint's URL.
func serveHTTP(t testing.TB, srv *server.MCPServer, opts *httptransport.Options) (string, *methodLog) {
	core, err := mcp.New(srv, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := httptransport.NewHandler(core, opts)
	log := &methodLog{next: h, seen: map[string]int{}}
	hs := httptest.NewServer(log)
	t.Cleanup(func() {
		h.Close()
		hs.Close()
		core.Close()
	})
	return hs.URL, log
}

// modernOpts asks for the 2026-07-28 era, with handlers that answer every
// question: an elicitation by the property its schema asks for, a sampling
// with a fixed text.
func modernOpts() *client.Options {
	o := fastOpts()
	o.ProtocolVersion = spec.Version2026
	o.Elicitation = func(_ context.Context, req mcpgo.ElicitationRequest) (*mcpgo.ElicitationResult, error) {
		content := map[string]any{}
		switch {
		case strings.Contains(req.Params.Message, "name"):
			content["name"] = "Ada"
		case strings.Contains(req.Params.Message, "color"):
			content["color"] = "blue"
		case strings.Contains(req.Params.Message, "context"):
			content["context"] = "tea"
		}
		return &mcpgo.ElicitationResult{ElicitationResponse: mcpgo.ElicitationResponse{Action: mcpgo.ElicitationResponseActionAccept, Content: content}}, nil
	}
	o.Sampling = func(context.Context, mcpgo.CreateMessageRequest) (*mcpgo.CreateMessageResult, error) {
		return &mcpgo.CreateMessageResult{SamplingMessage: mcpgo.SamplingMessage{Role: mcpgo.RoleAssistant, Content: mcpgo.NewTextContent("Hi")}, Model: "m"}, nil
	}
	return o
}

// Against a server of both eras the client asks server/discover, never
// initializes, and its calls go in the 2026-07-28 era: resumable (SEP-975 as
// the era's extension), their progress delivered.
func TestModernEra(t *testing.T) {
	url, log := serveHTTP(t, demo.Server("test"), nil)
	c := connect(t, httpDialer(t, url), modernOpts())
	if v := c.ProtocolVersion(); v != spec.Version2026 {
		t.Fatalf("protocol version %q", v)
	}
	if r := c.InitializeResult(); r == nil || r.ServerInfo.Name != "mcp-resume-demo" || r.ProtocolVersion != spec.Version2026 {
		t.Fatalf("discovered %+v", r)
	}
	if c.Resumable() == nil {
		t.Fatal("no resumableRequests extension discovered")
	}
	var progress []float64
	var policy client.Policy
	res, err := c.CallTool(t.Context(), "countdown", map[string]any{"seconds": 0.02, "steps": 3}, &client.CallOptions{
		Progress: func(p client.Progress) { progress = append(progress, p.Progress) },
		Policy:   func(p client.Policy) { policy = p },
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := text(t, res); got != "countdown done: 3 of 3 steps" || len(progress) != 3 || policy.Token == "" {
		t.Fatalf("result %q, progress %v, policy %+v", got, progress, policy)
	}
	if n := log.count("initialize"); n != 0 {
		t.Fatalf("%d initialize sent", n)
	}
	if n := log.count("server/discover"); n != 1 {
		t.Fatalf("%d server/discover sent, want 1", n)
	}
	if n := log.count("GET"); n != 0 {
		t.Fatalf("%d GET streams opened: the 2026 era has none", n)
	}
}

// A server's questions come as input_required results: the handlers answer
// them, and the call is sent again with the answers and the requestState, as
// many rounds as the server asks, by Call and by Go (whose params wait
// encoded); prompts/get likewise.
func TestModernMultiRound(t *testing.T) {
	url, log := serveHTTP(t, conformance.Server("test"), nil)
	c := connect(t, httpDialer(t, url), modernOpts())
	for _, tc := range []struct{ tool, want string }{
		{"test_input_required_result_multi_round", "Ada likes blue"},
		{"test_input_required_result_multiple_inputs", "Hi, Ada (0 roots)"},
		{"test_input_required_result_request_state", "state-ok: confirmed"},
		// A tool of the 2025 era asking through RequestElicitation: the core
		// makes the round and its requestState.
		{"test_input_required_result_tampered_state", "Hello, Ada!"},
	} {
		res, err := c.CallTool(t.Context(), tc.tool, nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.tool, err)
		}
		if got := text(t, res); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.tool, got, tc.want)
		}
		type answer struct {
			raw json.RawMessage
			err error
		}
		got := make(chan answer, 1)
		c.Go(t.Context(), "tools/call", map[string]any{"name": tc.tool}, nil, func(raw json.RawMessage, err error) { got <- answer{raw, err} })
		if a := <-got; a.err != nil || !strings.Contains(string(a.raw), tc.want) {
			t.Errorf("%s by Go: %s, %v; want %q", tc.tool, a.raw, a.err, tc.want)
		}
	}
	if n := log.count("tools/call"); n != 2*(3+2+2+2) {
		t.Errorf("%d tools/call sent, want 18 (3 rounds, then 2 each, by Call and by Go)", n)
	}
	raw, err := c.Call(t.Context(), "prompts/get", map[string]any{"name": "test_input_required_result_prompt"}, nil)
	if err != nil || !strings.Contains(string(raw), "Answer with this context in mind: tea") {
		t.Fatalf("prompts/get: %s, %v", raw, err)
	}
}

// A question the client has no handler for fails the call, naming it.
func TestModernInputWithoutHandler(t *testing.T) {
	url, _ := serveHTTP(t, conformance.Server("test"), nil)
	opts := modernOpts()
	opts.Sampling = nil
	c := connect(t, httpDialer(t, url), opts)
	_, err := c.CallTool(t.Context(), "test_input_required_result_sampling", nil, nil)
	if err == nil || !strings.Contains(err.Error(), "sampling/createMessage") {
		t.Fatalf("err %v, want the unanswered sampling named", err)
	}
}

// A tools/call carries the Mcp-Param-* headers its tool's x-mcp-header
// annotations name (the core checks them against the body); a tool whose
// annotations are invalid is left out of ListTools and not called.
func TestModernParamHeaders(t *testing.T) {
	url, _ := serveHTTP(t, headerServer(), nil)
	dial := httpDialer(t, url)

	// Not listed: the client does not know the annotations, and the core
	// refuses a call whose headers do not mirror its arguments.
	unlisted := connect(t, dial, modernOpts())
	_, err := unlisted.CallTool(t.Context(), "test_custom_headers", map[string]any{"region": "eu"}, nil)
	var e *spec.Error
	if !errors.As(err, &e) || e.Code != spec.CodeHeaderMismatch {
		t.Fatalf("unlisted call: %v, want the core's header mismatch", err)
	}

	c := connect(t, dial, modernOpts())
	tools, err := c.ListTools(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, tl := range tools {
		names[tl.Name] = true
	}
	if !names["test_custom_headers"] || names["bad_header"] {
		t.Fatalf("listed %v: want test_custom_headers, not bad_header", names)
	}
	args := map[string]any{"region": " Zürich", "priority": 3, "dryRun": false, "note": "body only"}
	res, err := c.CallTool(t.Context(), "test_custom_headers", args, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := text(t, res); !strings.Contains(got, `"region":" Zürich"`) {
		t.Fatalf("result %q", got)
	}
	if _, err := c.CallTool(t.Context(), "bad_header", map[string]any{"score": 1.5}, nil); !errors.Is(err, client.ErrInvalidTool) {
		t.Fatalf("bad_header: %v, want ErrInvalidTool", err)
	}

	// The 2025 era knows no x-mcp-header, and a transport without headers
	// has no use for them: every tool is listed.
	legacy := connect(t, dial, fastOpts())
	if tools, err = legacy.ListTools(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !containsTool(tools, "bad_header") {
		t.Fatal("the 2025 era left bad_header out")
	}
	piped := connect(t, newPipeServerOf(t, headerServer(), nil).dial, modernOpts())
	if tools, err = piped.ListTools(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !containsTool(tools, "bad_header") || piped.ProtocolVersion() != spec.Version2026 {
		t.Fatalf("over a pipe in %s, bad_header left out", piped.ProtocolVersion())
	}
}

// headerServer serves test_custom_headers, whose arguments are mirrored in
// Mcp-Param-* headers, and lists bad_header, whose annotation is invalid
// (never served: mcp-go refuses to register it).
func headerServer() *server.MCPServer {
	bad := mcpgo.NewToolWithRawSchema("bad_header", "x-mcp-header on a number",
		[]byte(`{"type":"object","properties":{"score":{"type":"number","x-mcp-header":"Score"}}}`))
	srv := server.NewMCPServer("headers", "1", server.WithToolFilter(func(_ context.Context, tools []mcpgo.Tool) []mcpgo.Tool {
		return append(tools, bad)
	}))
	srv.AddTool(mcpgo.NewToolWithRawSchema("test_custom_headers", "echoes its arguments", []byte(`{"type":"object","properties":{
		"region":{"type":"string","x-mcp-header":"Region"},
		"priority":{"type":"integer","x-mcp-header":"Priority"},
		"dryRun":{"type":"boolean","x-mcp-header":"Dry-Run"},
		"note":{"type":"string"}},"required":["region"]}`)),
		func(_ context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
			b, _ := json.Marshal(req.GetArguments())
			return mcpgo.NewToolResultText(string(b)), nil
		})
	return srv
}

func containsTool(tools []mcpgo.Tool, name string) bool {
	for _, t := range tools {
		if t.Name == name {
			return true
		}
	}
	return false
}

// ListTools keeps each tool's input schema as the server wrote it.
func TestListToolsKeepsSchemas(t *testing.T) {
	url, _ := serveHTTP(t, conformance.Server("test"), nil)
	c := connect(t, httpDialer(t, url), modernOpts())
	tools, err := c.ListTools(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range tools {
		if tl.Name != "json_schema_2020_12_tool" {
			continue
		}
		s := string(tl.RawInputSchema)
		for _, kw := range []string{`"$schema"`, `"$defs"`, `"additionalProperties":false`} {
			if !strings.Contains(s, kw) {
				t.Errorf("schema %s lost %s", s, kw)
			}
		}
		return
	}
	t.Fatal("json_schema_2020_12_tool not listed")
}

// A server of the 2025 era answers the 2026 server/discover with -32022 and
// the versions it speaks: the client initializes in the newest of them.
func TestModernNegotiatesDown(t *testing.T) {
	log := &methodLog{seen: map[string]int{}, next: server.NewStreamableHTTPServer(demo.Server("old"),
		server.WithStreamableHTTPProtocolVersions("2025-11-25", "2025-06-18"))}
	srv := httptest.NewServer(log)
	t.Cleanup(srv.Close)
	c := connect(t, httpDialer(t, srv.URL+"/mcp"), modernOpts())
	if v := c.ProtocolVersion(); v != "2025-11-25" {
		t.Fatalf("protocol version %q, want 2025-11-25", v)
	}
	res, err := c.CallTool(t.Context(), "echo", map[string]any{"text": "old"}, nil)
	if err != nil || text(t, res) != "old" {
		t.Fatalf("echo: %v %v", res, err)
	}
	if log.count("server/discover") != 1 || log.count("initialize") != 1 {
		t.Fatalf("discover %d, initialize %d: want one of each", log.count("server/discover"), log.count("initialize"))
	}
}

// A cut in the middle of a 2026-era call: the client discovers again on a new
// connection and resumes the call in that era.
func TestModernResumeAfterCut(t *testing.T) {
	s := newPipeServer(t, nil)
	c := connect(t, s.dial, modernOpts())
	var mu sync.Mutex
	var progress []float64
	res, err := c.CallTool(t.Context(), "countdown", map[string]any{"seconds": 0.3, "steps": 6}, &client.CallOptions{
		Progress: func(p client.Progress) {
			mu.Lock()
			progress = append(progress, p.Progress)
			mu.Unlock()
			if p.Progress == 2 {
				go s.cutAll()
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if text(t, res) != "countdown done: 6 of 6 steps" || len(progress) != 6 {
		t.Fatalf("result %q, progress %v", text(t, res), progress)
	}
	if c.Reconnects() == 0 || c.ProtocolVersion() != spec.Version2026 {
		t.Fatalf("%d reconnects in %s: want the call resumed in the 2026 era", c.Reconnects(), c.ProtocolVersion())
	}
}

// SEP-1034: an accepted elicitation gets the defaults of the fields its
// answer left out.
func TestElicitationDefaults(t *testing.T) {
	url, _ := serveHTTP(t, conformance.Server("test"), nil)
	opts := fastOpts()
	opts.Elicitation = func(context.Context, mcpgo.ElicitationRequest) (*mcpgo.ElicitationResult, error) {
		return &mcpgo.ElicitationResult{ElicitationResponse: mcpgo.ElicitationResponse{Action: mcpgo.ElicitationResponseActionAccept,
			Content: map[string]any{"name": "Ada"}}}, nil
	}
	c := connect(t, httpDialer(t, url), opts)
	res, err := c.CallTool(t.Context(), "test_elicitation_sep1034_defaults", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := text(t, res)
	for _, want := range []string{`"name":"Ada"`, `"age":30`, `"score":95.5`, `"status":"active"`, `"verified":true`} {
		if !strings.Contains(got, want) {
			t.Errorf("%q lacks %s", got, want)
		}
	}
}

// After initialize over Streamable HTTP the client listens on the session's
// GET stream, where the server sends what belongs to no request: here, that
// its tools changed.
func TestListenStream(t *testing.T) {
	srv := server.NewMCPServer("listen", "1", server.WithToolCapabilities(true))
	demo.Add(srv)
	url, log := serveHTTP(t, srv, nil)
	changed := make(chan struct{}, 1)
	opts := fastOpts()
	opts.OnNotification = func(method string, _ json.RawMessage) {
		if method == "notifications/tools/list_changed" {
			select {
			case changed <- struct{}{}:
			default:
			}
		}
	}
	connect(t, httpDialer(t, url), opts)
	srv.AddTool(mcpgo.NewTool("later"), func(context.Context, mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		return mcpgo.NewToolResultText("later"), nil
	})
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("no notifications/tools/list_changed: the GET stream is not open")
	}
	if n := log.count("GET"); n != 1 {
		t.Fatalf("%d GET streams opened, want 1", n)
	}
}

// A server that closes a call's stream when it is quiet (SEP-1699 polling)
// is polled back with Last-Event-ID on the same connection: every progress
// once, the result, no reconnection.
func TestSSEPolling(t *testing.T) {
	url, log := serveHTTP(t, demo.Server("test"), &httptransport.Options{StreamIdle: 30 * time.Millisecond, Retry: 10 * time.Millisecond})
	c := connect(t, httpDialer(t, url), fastOpts())
	var progress []float64
	res, err := c.CallTool(t.Context(), "countdown", map[string]any{"seconds": 0.4, "steps": 4}, &client.CallOptions{
		Progress: func(p client.Progress) { progress = append(progress, p.Progress) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if text(t, res) != "countdown done: 4 of 4 steps" || len(progress) != 4 {
		t.Fatalf("result %q, progress %v", text(t, res), progress)
	}
	if c.Reconnects() != 0 || log.count("requests/resume") != 0 || log.count("GET Last-Event-ID") == 0 {
		t.Fatalf("%d reconnects, %d resumes, %d GETs with Last-Event-ID: want the stream polled, not the call resumed",
			c.Reconnects(), log.count("requests/resume"), log.count("GET Last-Event-ID"))
	}
}
