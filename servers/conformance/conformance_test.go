package conformance_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"image/png"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-resume/mcp-resume/servers/conformance"
)

// The suite's client speaks 2025-11-25; so do these tests.
const protocolVersion = mcpgo.ProtocolVersion20251125

// testClient is an mcp-go in-process client of a fresh conformance server that
// records the notifications it receives and answers sampling and elicitation
// like the suite's client does, recording the requests.
type testClient struct {
	*client.Client
	notes chan mcpgo.JSONRPCNotification // every notification, in arrival order

	mu       sync.Mutex // guards the fields below
	sampled  []mcpgo.CreateMessageRequest
	elicited []mcpgo.ElicitationRequest
}

// newClient starts and initializes a client; with answer false it offers neither
// sampling nor elicitation.
func newClient(t *testing.T, answer bool) *testClient {
	t.Helper()
	tc := &testClient{notes: make(chan mcpgo.JSONRPCNotification, 64)}
	opts := []client.ClientOption{client.WithProtocolVersion(protocolVersion)}
	if answer {
		opts = append(opts, client.WithSamplingHandler(tc), client.WithElicitationHandler(tc))
	}
	c, err := client.NewInProcessClientWithOptions(conformance.Server("test"), opts...)
	if err != nil {
		t.Fatalf("NewInProcessClientWithOptions: %v", err)
	}
	tc.Client = c
	t.Cleanup(func() { _ = c.Close() })
	c.OnNotification(func(n mcpgo.JSONRPCNotification) {
		select {
		case tc.notes <- n:
		default:
			t.Errorf("notification buffer full, dropped %s", n.Method)
		}
	})
	ctx := testContext(t)
	if err := c.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	init := mcpgo.InitializeRequest{}
	init.Params.ProtocolVersion = protocolVersion
	init.Params.ClientInfo = mcpgo.Implementation{Name: "conformance-test", Version: "test"}
	res, err := c.Initialize(ctx, init)
	if err != nil {
		t.Fatalf("Initialize: %v", err)
	}
	if res.ServerInfo.Name == "" || res.Capabilities.Tools == nil || res.Capabilities.Logging == nil ||
		res.Capabilities.Completions == nil || res.Capabilities.Prompts == nil ||
		res.Capabilities.Resources == nil || !res.Capabilities.Resources.Subscribe {
		t.Fatalf("initialize result %+v: want server info and capabilities tools, logging, completions, prompts, resources with subscribe", res)
	}
	return tc
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func (tc *testClient) CreateMessage(_ context.Context, req mcpgo.CreateMessageRequest) (*mcpgo.CreateMessageResult, error) {
	tc.mu.Lock()
	tc.sampled = append(tc.sampled, req)
	tc.mu.Unlock()
	return &mcpgo.CreateMessageResult{
		SamplingMessage: mcpgo.SamplingMessage{Role: mcpgo.RoleAssistant, Content: mcpgo.NewTextContent("This is a test response from the client")},
		Model:           "test-model",
		StopReason:      "endTurn",
	}, nil
}

func (tc *testClient) Elicit(_ context.Context, req mcpgo.ElicitationRequest) (*mcpgo.ElicitationResult, error) {
	tc.mu.Lock()
	tc.elicited = append(tc.elicited, req)
	tc.mu.Unlock()
	return &mcpgo.ElicitationResult{ElicitationResponse: mcpgo.ElicitationResponse{
		Action:  mcpgo.ElicitationResponseActionAccept,
		Content: map[string]any{"username": "testuser", "email": "test@example.com"},
	}}, nil
}

// call calls a tool and fails the test on a protocol error.
func (tc *testClient) call(t *testing.T, name string, args map[string]any, progressToken mcpgo.ProgressToken) *mcpgo.CallToolResult {
	t.Helper()
	req := mcpgo.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	if progressToken != nil {
		req.Params.Meta = &mcpgo.Meta{ProgressToken: progressToken}
	}
	res, err := tc.CallTool(testContext(t), req)
	if err != nil {
		t.Fatalf("tools/call %s: %v", name, err)
	}
	return res
}

// waitNotes waits for the next n notifications and returns them.
func (tc *testClient) waitNotes(t *testing.T, n int) []mcpgo.JSONRPCNotification {
	t.Helper()
	ctx := testContext(t)
	var out []mcpgo.JSONRPCNotification
	for len(out) < n {
		select {
		case note := <-tc.notes:
			out = append(out, note)
		case <-ctx.Done():
			t.Fatalf("got %d notifications %v, want %d", len(out), out, n)
		}
	}
	return out
}

// noteParams is what the tests read from a progress or log notification.
type noteParams struct {
	ProgressToken any     `json:"progressToken"`
	Progress      float64 `json:"progress"`
	Total         float64 `json:"total"`
	Level         string  `json:"level"`
	Data          any     `json:"data"`
}

// params decodes a notification's params as they would go on the wire (in
// process, mcp-go hands over the server's Go values unencoded).
func params(t *testing.T, n mcpgo.JSONRPCNotification) noteParams {
	t.Helper()
	b, err := json.Marshal(n.Params)
	if err != nil {
		t.Fatalf("encoding %s params: %v", n.Method, err)
	}
	var p noteParams
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatalf("decoding %s params %s: %v", n.Method, b, err)
	}
	return p
}

// text returns the text of a result's only content item, which must be text.
func text(t *testing.T, res *mcpgo.CallToolResult) string {
	t.Helper()
	if len(res.Content) != 1 {
		t.Fatalf("result has %d content items, want 1: %+v", len(res.Content), res.Content)
	}
	tc, ok := mcpgo.AsTextContent(res.Content[0])
	if !ok {
		t.Fatalf("content %#v is not text", res.Content[0])
	}
	return tc.Text
}

func TestListTools(t *testing.T) {
	c := newClient(t, true)
	res, err := c.ListTools(testContext(t), mcpgo.ListToolsRequest{})
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	want := []string{
		"confirm_delete", "failing_job", "greet", "json_schema_2020_12_tool", "multi_input", "protocol_error_job", "slow_compute",
		"test_audio_content", "test_custom_headers", "test_elicitation",
		"test_elicitation_sep1034_defaults", "test_elicitation_sep1330_enums", "test_embedded_resource",
		"test_error_handling", "test_image_content",
		"test_input_required_result_capabilities", "test_input_required_result_elicitation",
		"test_input_required_result_list_roots", "test_input_required_result_multi_round",
		"test_input_required_result_multiple_inputs", "test_input_required_result_request_state",
		"test_input_required_result_sampling", "test_input_required_result_tampered_state",
		"test_logging_tool", "test_missing_capability", "test_multiple_content_types", "test_reconnection",
		"test_sampling", "test_simple_text", "test_streaming_elicitation", "test_tool_with_logging", "test_tool_with_progress",
		"test_tool_with_task",
	}
	var got []string
	for _, tool := range res.Tools {
		got = append(got, tool.Name)
		if tool.Description == "" {
			t.Errorf("tool %s has no description", tool.Name)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("tools %v, want %v", got, want)
	}

	// The wire form of every input schema is an object schema; the 2020-12 tool's
	// keeps its keywords. mcp-go's client decodes schemas into a struct that drops
	// $schema, so this looks at the server's own encoding.
	resp := conformance.Server("test").HandleMessage(testContext(t), []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	b, err := json.Marshal(resp)
	if err != nil {
		t.Fatal(err)
	}
	var wire struct {
		Result struct {
			Tools []struct {
				Name        string         `json:"name"`
				InputSchema map[string]any `json:"inputSchema"`
			} `json:"tools"`
		} `json:"result"`
	}
	if err := json.Unmarshal(b, &wire); err != nil || len(wire.Result.Tools) != len(want) {
		t.Fatalf("tools/list response %s (%v): want %d tools", b, err, len(want))
	}
	for _, tool := range wire.Result.Tools {
		if tool.InputSchema["type"] != "object" {
			t.Errorf("tool %s: inputSchema %v, want type object", tool.Name, tool.InputSchema)
		}
		if tool.Name != "json_schema_2020_12_tool" {
			continue
		}
		s := tool.InputSchema
		defs, _ := s["$defs"].(map[string]any)
		if s["$schema"] != "https://json-schema.org/draft/2020-12/schema" || defs["address"] == nil || s["additionalProperties"] != false {
			t.Errorf("json_schema_2020_12_tool inputSchema %v: want $schema 2020-12, $defs.address, additionalProperties false", s)
		}
	}
}

func TestContentTools(t *testing.T) {
	c := newClient(t, true)
	tests := []struct {
		tool  string
		args  map[string]any
		check func(t *testing.T, res *mcpgo.CallToolResult)
	}{
		{"test_simple_text", nil, func(t *testing.T, res *mcpgo.CallToolResult) {
			if got := text(t, res); got != "This is a simple text response for testing." {
				t.Errorf("text %q", got)
			}
		}},
		{"test_image_content", map[string]any{}, func(t *testing.T, res *mcpgo.CallToolResult) {
			wantPNG(t, res.Content[0])
		}},
		{"test_audio_content", map[string]any{}, func(t *testing.T, res *mcpgo.CallToolResult) {
			a, ok := mcpgo.AsAudioContent(res.Content[0])
			if !ok || a.MIMEType != "audio/wav" {
				t.Fatalf("content %#v: want audio/wav", res.Content[0])
			}
			b, err := base64.StdEncoding.DecodeString(a.Data)
			if err != nil || len(b) < 44 || string(b[:4]) != "RIFF" || string(b[8:16]) != "WAVEfmt " {
				t.Errorf("audio data %q (%v): want a RIFF WAVE file", a.Data, err)
			}
		}},
		{"test_embedded_resource", map[string]any{}, func(t *testing.T, res *mcpgo.CallToolResult) {
			wantEmbedded(t, res.Content[0], "test://embedded-resource", "text/plain")
		}},
		{"test_multiple_content_types", map[string]any{}, func(t *testing.T, res *mcpgo.CallToolResult) {
			if len(res.Content) != 3 {
				t.Fatalf("%d content items, want 3", len(res.Content))
			}
			if tc, ok := mcpgo.AsTextContent(res.Content[0]); !ok || tc.Text == "" {
				t.Errorf("first item %#v: want text", res.Content[0])
			}
			wantPNG(t, res.Content[1])
			r := wantEmbedded(t, res.Content[2], "test://mixed-content-resource", "application/json")
			if !json.Valid([]byte(r.Text)) {
				t.Errorf("mixed resource text %q is not JSON", r.Text)
			}
		}},
		{"test_error_handling", map[string]any{}, func(t *testing.T, res *mcpgo.CallToolResult) {
			if !res.IsError || text(t, res) != "This tool intentionally returns an error for testing" {
				t.Errorf("result %+v: want isError with the error text", res)
			}
		}},
		{"json_schema_2020_12_tool", map[string]any{"name": "n", "address": map[string]any{"city": "c"}}, func(t *testing.T, res *mcpgo.CallToolResult) {
			want := `JSON Schema 2020-12 tool called with: {"address":{"city":"c"},"name":"n"}`
			if got := text(t, res); got != want {
				t.Errorf("text %q, want %q", got, want)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.tool, func(t *testing.T) {
			res := c.call(t, tt.tool, tt.args, nil)
			if len(res.Content) == 0 {
				t.Fatalf("no content in %+v", res)
			}
			tt.check(t, res)
		})
	}
}

func wantPNG(t *testing.T, content mcpgo.Content) {
	t.Helper()
	img, ok := mcpgo.AsImageContent(content)
	if !ok || img.MIMEType != "image/png" {
		t.Fatalf("content %#v: want image/png", content)
	}
	b, err := base64.StdEncoding.DecodeString(img.Data)
	if err != nil {
		t.Fatalf("image data: %v", err)
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(b))
	if err != nil || cfg.Width != 1 || cfg.Height != 1 {
		t.Errorf("image: %+v, %v; want a 1x1 PNG", cfg, err)
	}
}

func wantEmbedded(t *testing.T, content mcpgo.Content, uri, mimeType string) *mcpgo.TextResourceContents {
	t.Helper()
	e, ok := mcpgo.AsEmbeddedResource(content)
	if !ok {
		t.Fatalf("content %#v: want an embedded resource", content)
	}
	r, ok := mcpgo.AsTextResourceContents(e.Resource)
	if !ok || r.URI != uri || r.MIMEType != mimeType || r.Text == "" {
		t.Fatalf("embedded resource %#v: want text at %s (%s)", e.Resource, uri, mimeType)
	}
	return r
}

func TestProgress(t *testing.T) {
	c := newClient(t, true)
	res := c.call(t, "test_tool_with_progress", nil, "progress-test-1")
	if res.IsError {
		t.Fatalf("result %+v", res)
	}
	for i, n := range c.waitNotes(t, 3) {
		p := params(t, n)
		if n.Method != "notifications/progress" || p.ProgressToken != "progress-test-1" || p.Progress != float64(50*i) || p.Total != 100 {
			t.Errorf("notification %d: %s %+v, want progress %d of 100 for progress-test-1", i, n.Method, p, 50*i)
		}
	}

	// Without a token the tool runs and sends nothing; the next call's
	// notifications are the next to arrive.
	c.call(t, "test_tool_with_progress", nil, nil)
	c.call(t, "test_tool_with_progress", nil, 7)
	for _, n := range c.waitNotes(t, 3) {
		if p := params(t, n); p.ProgressToken != float64(7) {
			t.Errorf("notification %s %+v: want token 7 (the call without a token sends none)", n.Method, p)
		}
	}
}

func TestLogging(t *testing.T) {
	c := newClient(t, true)
	ctx := testContext(t)
	setLevel := func(level mcpgo.LoggingLevel) {
		req := mcpgo.SetLevelRequest{}
		req.Params.Level = level
		if err := c.SetLevel(ctx, req); err != nil {
			t.Fatalf("logging/setLevel %s: %v", level, err)
		}
	}

	setLevel(mcpgo.LoggingLevelDebug)
	if res := c.call(t, "test_tool_with_logging", nil, nil); res.IsError {
		t.Fatalf("result %+v", res)
	}
	var got []any
	for _, n := range c.waitNotes(t, 3) {
		p := params(t, n)
		if n.Method != "notifications/message" || p.Level != "info" {
			t.Errorf("notification %s %+v: want an info log message", n.Method, p)
		}
		got = append(got, p.Data)
	}
	if want := []any{"Tool execution started", "Tool processing data", "Tool execution completed"}; !slices.Equal(got, want) {
		t.Errorf("log data %v, want %v", got, want)
	}

	// Above info, the messages are filtered: the progress that follows is the
	// next thing to arrive.
	setLevel(mcpgo.LoggingLevelWarning)
	c.call(t, "test_tool_with_logging", nil, nil)
	c.call(t, "test_tool_with_progress", nil, "after")
	for _, n := range c.waitNotes(t, 3) {
		if n.Method != "notifications/progress" {
			t.Errorf("got %s %v at level warning, want only progress", n.Method, n.Params.AdditionalFields)
		}
	}
}

func TestSampling(t *testing.T) {
	c := newClient(t, true)
	res := c.call(t, "test_sampling", map[string]any{"prompt": "Test prompt for sampling"}, nil)
	if got, want := text(t, res), "LLM response: This is a test response from the client"; got != want || res.IsError {
		t.Errorf("result %q (isError %v), want %q", got, res.IsError, want)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.sampled) != 1 {
		t.Fatalf("%d sampling requests, want 1", len(c.sampled))
	}
	p := c.sampled[0].CreateMessageParams
	if len(p.Messages) != 1 || p.Messages[0].Role != mcpgo.RoleUser || p.MaxTokens != 100 ||
		mcpgo.GetTextFromContent(p.Messages[0].Content) != "Test prompt for sampling" {
		t.Errorf("sampling request %+v: want one user message with the prompt, maxTokens 100", p)
	}

	if res := c.call(t, "test_sampling", map[string]any{}, nil); !res.IsError {
		t.Errorf("without prompt: %+v, want isError", res)
	}
}

func TestServerRequestsUnsupported(t *testing.T) {
	c := newClient(t, false)
	for _, call := range []struct {
		tool string
		args map[string]any
	}{
		{"test_sampling", map[string]any{"prompt": "p"}},
		{"test_elicitation", map[string]any{"message": "m"}},
	} {
		if res := c.call(t, call.tool, call.args, nil); !res.IsError {
			t.Errorf("%s on a client without the capability: %+v, want isError", call.tool, res)
		}
	}
}

func TestElicitation(t *testing.T) {
	c := newClient(t, true)
	res := c.call(t, "test_elicitation", map[string]any{"message": "Please provide your information"}, nil)
	want := `User response: action=accept, content={"email":"test@example.com","username":"testuser"}`
	if got := text(t, res); got != want {
		t.Errorf("text %q, want %q", got, want)
	}
	res = c.call(t, "test_elicitation_sep1034_defaults", nil, nil)
	if got := text(t, res); !strings.HasPrefix(got, "Elicitation completed: action=accept, content={") {
		t.Errorf("text %q", got)
	}
	c.call(t, "test_elicitation_sep1330_enums", nil, nil)

	c.mu.Lock()
	reqs := slices.Clone(c.elicited)
	c.mu.Unlock()
	if len(reqs) != 3 {
		t.Fatalf("%d elicitation requests, want 3", len(reqs))
	}
	if reqs[0].Params.Message != "Please provide your information" {
		t.Errorf("message %q", reqs[0].Params.Message)
	}
	props := func(i int) map[string]json.RawMessage {
		b, err := json.Marshal(reqs[i].Params.RequestedSchema)
		if err != nil {
			t.Fatal(err)
		}
		var s struct {
			Type       string                     `json:"type"`
			Properties map[string]json.RawMessage `json:"properties"`
		}
		if err := json.Unmarshal(b, &s); err != nil || s.Type != "object" {
			t.Fatalf("requestedSchema %s (%v): want an object schema", b, err)
		}
		return s.Properties
	}
	wantProp := func(p map[string]json.RawMessage, field, want string) {
		t.Helper()
		var got, w any
		if err := json.Unmarshal(p[field], &got); err != nil {
			t.Fatalf("property %s: %v", field, err)
		}
		if err := json.Unmarshal([]byte(want), &w); err != nil {
			t.Fatal(err)
		}
		gb, _ := json.Marshal(got)
		wb, _ := json.Marshal(w)
		if !bytes.Equal(gb, wb) {
			t.Errorf("property %s = %s, want %s", field, gb, wb)
		}
	}
	p := props(0)
	wantProp(p, "username", `{"type":"string","description":"User's response"}`)
	wantProp(p, "email", `{"type":"string","description":"User's email address"}`)

	// SEP-1034: the integer default goes out as 30, not 30.0.
	p = props(1)
	wantProp(p, "name", `{"type":"string","description":"User name","default":"John Doe"}`)
	wantProp(p, "age", `{"type":"integer","description":"User age","default":30}`)
	wantProp(p, "score", `{"type":"number","description":"User score","default":95.5}`)
	wantProp(p, "status", `{"type":"string","description":"User status","enum":["active","inactive","pending"],"default":"active"}`)
	wantProp(p, "verified", `{"type":"boolean","description":"Verification status","default":true}`)
	if !bytes.Contains(p["age"], []byte(`30`)) || bytes.Contains(p["age"], []byte(`30.`)) {
		t.Errorf("age %s: want the integer 30", p["age"])
	}

	p = props(2)
	for field, keys := range map[string][]string{
		"untitledSingle": {"type", "enum"},
		"titledSingle":   {"type", "oneOf"},
		"legacyEnum":     {"type", "enum", "enumNames"},
		"untitledMulti":  {"type", "items"},
		"titledMulti":    {"type", "items"},
	} {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(p[field], &m); err != nil {
			t.Fatalf("property %s: %v", field, err)
		}
		for _, k := range keys {
			if m[k] == nil {
				t.Errorf("property %s %s: no %s", field, p[field], k)
			}
		}
	}
}

func TestReconnectionWithoutStream(t *testing.T) {
	c := newClient(t, true)
	// In process there is no stream to close: the tool says so and returns.
	got := text(t, c.call(t, "test_reconnection", nil, nil))
	if !strings.Contains(got, "no stream to close") {
		t.Errorf("text %q: want the no-stream note", got)
	}
}

func TestResources(t *testing.T) {
	c := newClient(t, true)
	ctx := testContext(t)
	list, err := c.ListResources(ctx, mcpgo.ListResourcesRequest{})
	if err != nil {
		t.Fatalf("resources/list: %v", err)
	}
	var uris []string
	for _, r := range list.Resources {
		uris = append(uris, r.URI)
		if r.Name == "" || r.Description == "" || r.MIMEType == "" {
			t.Errorf("resource %+v: want name, description and mimeType", r)
		}
	}
	slices.Sort(uris)
	if want := []string{"test://static-binary", "test://static-text", "test://watched-resource"}; !slices.Equal(uris, want) {
		t.Errorf("resources %v, want %v", uris, want)
	}
	tmpls, err := c.ListResourceTemplates(ctx, mcpgo.ListResourceTemplatesRequest{})
	if err != nil {
		t.Fatalf("resources/templates/list: %v", err)
	}
	if len(tmpls.ResourceTemplates) != 1 || tmpls.ResourceTemplates[0].URITemplate.Raw() != "test://template/{id}/data" {
		t.Errorf("templates %+v, want test://template/{id}/data", tmpls.ResourceTemplates)
	}

	read := func(uri string) mcpgo.ResourceContents {
		t.Helper()
		req := mcpgo.ReadResourceRequest{}
		req.Params.URI = uri
		res, err := c.ReadResource(ctx, req)
		if err != nil {
			t.Fatalf("resources/read %s: %v", uri, err)
		}
		if len(res.Contents) != 1 {
			t.Fatalf("resources/read %s: %d contents, want 1", uri, len(res.Contents))
		}
		return res.Contents[0]
	}
	wantText := func(uri, mimeType, text string) {
		t.Helper()
		r, ok := mcpgo.AsTextResourceContents(read(uri))
		if !ok || r.URI != uri || r.MIMEType != mimeType || r.Text != text {
			t.Errorf("read %s: %+v, want %s %q", uri, r, mimeType, text)
		}
	}
	wantText("test://static-text", "text/plain", "This is the content of the static text resource.")
	wantText("test://watched-resource", "text/plain", "Watched resource content")
	wantText("test://template/123/data", "application/json", `{"id":"123","templateTest":true,"data":"Data for ID: 123"}`)
	if b, ok := mcpgo.AsBlobResourceContents(read("test://static-binary")); !ok || b.MIMEType != "image/png" || b.Blob == "" {
		t.Errorf("read test://static-binary: %+v, want an image/png blob", b)
	}

	req := mcpgo.ReadResourceRequest{}
	req.Params.URI = "test://nothing"
	if _, err := c.ReadResource(ctx, req); err == nil {
		t.Error("resources/read test://nothing: no error")
	}

	sub := mcpgo.SubscribeRequest{}
	sub.Params.URI = "test://watched-resource"
	if err := c.Subscribe(ctx, sub); err != nil {
		t.Errorf("resources/subscribe: %v", err)
	}
	unsub := mcpgo.UnsubscribeRequest{}
	unsub.Params.URI = "test://watched-resource"
	if err := c.Unsubscribe(ctx, unsub); err != nil {
		t.Errorf("resources/unsubscribe: %v", err)
	}
}

func TestPrompts(t *testing.T) {
	c := newClient(t, true)
	ctx := testContext(t)
	list, err := c.ListPrompts(ctx, mcpgo.ListPromptsRequest{})
	if err != nil {
		t.Fatalf("prompts/list: %v", err)
	}
	var names []string
	for _, p := range list.Prompts {
		names = append(names, p.Name)
		if p.Description == "" {
			t.Errorf("prompt %s has no description", p.Name)
		}
	}
	slices.Sort(names)
	if want := []string{"test_input_required_result_prompt", "test_prompt_with_arguments", "test_prompt_with_embedded_resource", "test_prompt_with_image", "test_simple_prompt"}; !slices.Equal(names, want) {
		t.Errorf("prompts %v, want %v", names, want)
	}

	get := func(name string, args map[string]string) []mcpgo.PromptMessage {
		t.Helper()
		req := mcpgo.GetPromptRequest{}
		req.Params.Name = name
		req.Params.Arguments = args
		res, err := c.GetPrompt(ctx, req)
		if err != nil {
			t.Fatalf("prompts/get %s: %v", name, err)
		}
		for _, m := range res.Messages {
			if m.Role != mcpgo.RoleUser || m.Content == nil {
				t.Errorf("prompt %s: message %+v, want user content", name, m)
			}
		}
		return res.Messages
	}
	if m := get("test_simple_prompt", nil); len(m) != 1 || mcpgo.GetTextFromContent(m[0].Content) != "This is a simple prompt for testing." {
		t.Errorf("test_simple_prompt: %+v", m)
	}
	m := get("test_prompt_with_arguments", map[string]string{"arg1": "testValue1", "arg2": "testValue2"})
	if want := "Prompt with arguments: arg1='testValue1', arg2='testValue2'"; len(m) != 1 || mcpgo.GetTextFromContent(m[0].Content) != want {
		t.Errorf("test_prompt_with_arguments: %+v, want %q", m, want)
	}
	m = get("test_prompt_with_embedded_resource", map[string]string{"resourceUri": "test://example-resource"})
	if len(m) != 2 {
		t.Fatalf("test_prompt_with_embedded_resource: %d messages, want 2", len(m))
	}
	wantEmbedded(t, m[0].Content, "test://example-resource", "text/plain")
	m = get("test_prompt_with_image", nil)
	if len(m) != 2 {
		t.Fatalf("test_prompt_with_image: %d messages, want 2", len(m))
	}
	wantPNG(t, m[0].Content)
}

func TestComplete(t *testing.T) {
	c := newClient(t, true)
	ctx := testContext(t)
	tests := []struct {
		ref        any
		arg, value string
		want       []string
	}{
		{mcpgo.PromptReference{Type: "ref/prompt", Name: "test_prompt_with_arguments"}, "arg1", "par", []string{"paris", "park", "party"}},
		{mcpgo.PromptReference{Type: "ref/prompt", Name: "test_prompt_with_arguments"}, "arg1", "test", []string{"test", "testValue1"}},
		{mcpgo.PromptReference{Type: "ref/prompt", Name: "test_prompt_with_arguments"}, "arg2", "zzz", []string{}},
		{mcpgo.PromptReference{Type: "ref/prompt", Name: "test_simple_prompt"}, "arg1", "", []string{}},
		{mcpgo.ResourceReference{Type: "ref/resource", URI: "test://template/{id}/data"}, "id", "12", []string{"12", "123"}},
	}
	for _, tt := range tests {
		req := mcpgo.CompleteRequest{}
		req.Params.Ref = tt.ref
		req.Params.Argument.Name = tt.arg
		req.Params.Argument.Value = tt.value
		res, err := c.Complete(ctx, req)
		if err != nil {
			t.Fatalf("completion/complete %v %s=%q: %v", tt.ref, tt.arg, tt.value, err)
		}
		if !slices.Equal(res.Completion.Values, tt.want) || res.Completion.Values == nil {
			t.Errorf("completion/complete %v %s=%q: %v, want %v", tt.ref, tt.arg, tt.value, res.Completion.Values, tt.want)
		}
	}
}
