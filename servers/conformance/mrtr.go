package conformance

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// The tools and the prompt of the suite's input-required-result-* scenarios
// (multi round-trip requests, 2026-07-28). Most answer input_required
// themselves, with the input request keys the scenarios name, through mcp-go's
// MRTR types, and sign their requestState. test_input_required_result_tampered_state
// is a tool of the 2025 era: it asks through RequestElicitation, and the resume
// layer turns that into the input_required round and checks the requestState
// it hands out.

// stateKey signs the requestState of the fixtures that answer input_required
// themselves.
var stateKey = func() []byte {
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	return k
}()

func signState(payload string) string {
	m := hmac.New(sha256.New, stateKey)
	m.Write([]byte(payload))
	return base64.RawURLEncoding.EncodeToString([]byte(payload)) + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// checkState returns the payload of a state signState made, or an error for
// any other.
func checkState(state string) (string, error) {
	p, sig, ok := strings.Cut(state, ".")
	payload, err1 := base64.RawURLEncoding.DecodeString(p)
	got, err2 := base64.RawURLEncoding.DecodeString(sig)
	if !ok || err1 != nil || err2 != nil {
		return "", errBadState
	}
	m := hmac.New(sha256.New, stateKey)
	m.Write(payload)
	if !hmac.Equal(got, m.Sum(nil)) {
		return "", errBadState
	}
	return string(payload), nil
}

var errBadState = errors.New("requestState failed its integrity check")

func addMRTR(s *server.MCPServer) {
	tool := func(name, desc string, h server.ToolHandlerFunc) {
		s.AddTool(mcpgo.NewTool(name, mcpgo.WithDescription(desc)), h)
	}
	tool("test_input_required_result_elicitation", "Asks for a name through input_required (elicitation)", mrtrElicitation)
	tool("test_input_required_result_sampling", "Asks for a completion through input_required (sampling)", mrtrSampling)
	tool("test_input_required_result_list_roots", "Asks for the client's roots through input_required", mrtrRoots)
	tool("test_input_required_result_request_state", "Asks for a confirmation, with a signed requestState", mrtrRequestState)
	tool("test_input_required_result_multiple_inputs", "Asks for three inputs at once", mrtrMultiple)
	tool("test_input_required_result_multi_round", "Asks in two rounds, with a requestState per round", mrtrMultiRound)
	tool("test_input_required_result_capabilities", "Asks only for what the client declared", mrtrCapabilities)
	tool("test_input_required_result_tampered_state", "Asks through RequestElicitation (2025-era API); the resume layer signs the state", mrtrTampered)
	s.AddPrompt(mcpgo.NewPrompt("test_input_required_result_prompt",
		mcpgo.WithPromptDescription("A prompt that asks for its context through input_required")), mrtrPrompt)
}

// elicitRequest asks for one string property.
func elicitRequest(message, property string) mcpgo.InputRequest {
	schema := json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{%q:{"type":"string"}},"required":[%q]}`, property, property))
	return mcpgo.NewElicitationInputRequest(mcpgo.ElicitationParams{Message: message, RequestedSchema: schema})
}

func sampleRequest(text string, maxTokens int) mcpgo.InputRequest {
	return mcpgo.NewSamplingInputRequest(mcpgo.CreateMessageParams{
		Messages:  []mcpgo.SamplingMessage{{Role: mcpgo.RoleUser, Content: mcpgo.NewTextContent(text)}},
		MaxTokens: maxTokens,
	})
}

func inputRequired(reqs mcpgo.InputRequests, state string) *mcpgo.CallToolResult {
	return &mcpgo.CallToolResult{
		Result:               mcpgo.Result{ResultType: mcpgo.ResultTypeInputRequired},
		MultiRoundTripResult: mcpgo.MultiRoundTripResult{InputRequests: reqs, RequestState: state},
	}
}

// elicited returns the string property of an accepted elicitation answer.
func elicited(res *mcpgo.ElicitationResult, property string) (string, bool) {
	if res == nil || res.Action != mcpgo.ElicitationResponseActionAccept {
		return "", false
	}
	content, _ := res.Content.(map[string]any)
	v, ok := content[property].(string)
	return v, ok
}

func sampledText(res *mcpgo.CreateMessageResult) (string, bool) {
	if res == nil {
		return "", false
	}
	if tc, ok := res.Content.(mcpgo.TextContent); ok {
		return tc.Text, true
	}
	b, _ := json.Marshal(res.Content)
	var tc struct{ Text string }
	if json.Unmarshal(b, &tc) != nil || tc.Text == "" {
		return "", false
	}
	return tc.Text, true
}

func mrtrElicitation(_ context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
	name, ok := elicited(server.ElicitationResponse(req.Params.InputResponses, "user_name"), "name")
	if !ok {
		return inputRequired(mcpgo.InputRequests{"user_name": elicitRequest("What is your name?", "name")}, ""), nil
	}
	return mcpgo.NewToolResultText("Hello, " + name + "!"), nil
}

func mrtrSampling(_ context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
	text, ok := sampledText(server.SamplingResponse(req.Params.InputResponses, "capital_question"))
	if !ok {
		return inputRequired(mcpgo.InputRequests{"capital_question": sampleRequest("What is the capital of France?", 100)}, ""), nil
	}
	return mcpgo.NewToolResultText("The model said: " + text), nil
}

func mrtrRoots(_ context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
	res := server.RootsResponse(req.Params.InputResponses, "client_roots")
	if res == nil {
		return inputRequired(mcpgo.InputRequests{"client_roots": mcpgo.NewRootsInputRequest()}, ""), nil
	}
	uris := make([]string, 0, len(res.Roots))
	for _, r := range res.Roots {
		uris = append(uris, r.URI)
	}
	return mcpgo.NewToolResultText(fmt.Sprintf("%d roots: %s", len(uris), strings.Join(uris, ", "))), nil
}

func mrtrRequestState(_ context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
	p := req.Params
	if p.RequestState == "" || server.ElicitationResponse(p.InputResponses, "confirm") == nil {
		confirm := mcpgo.NewElicitationInputRequest(mcpgo.ElicitationParams{Message: "Please confirm",
			RequestedSchema: json.RawMessage(`{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"]}`)})
		return inputRequired(mcpgo.InputRequests{"confirm": confirm}, signState("request_state:1")), nil
	}
	if payload, err := checkState(p.RequestState); err != nil || payload != "request_state:1" {
		return nil, errBadState
	}
	return mcpgo.NewToolResultText("state-ok: confirmed"), nil
}

func mrtrMultiple(_ context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
	p := req.Params
	name, okName := elicited(server.ElicitationResponse(p.InputResponses, "user_name"), "name")
	greeting, okGreeting := sampledText(server.SamplingResponse(p.InputResponses, "greeting"))
	roots := server.RootsResponse(p.InputResponses, "client_roots")
	if p.RequestState == "" || !okName || !okGreeting || roots == nil {
		return inputRequired(mcpgo.InputRequests{
			"user_name":    elicitRequest("What is your name?", "name"),
			"greeting":     sampleRequest("Generate a greeting", 50),
			"client_roots": mcpgo.NewRootsInputRequest(),
		}, signState("multiple:1")), nil
	}
	if payload, err := checkState(p.RequestState); err != nil || payload != "multiple:1" {
		return nil, errBadState
	}
	return mcpgo.NewToolResultText(fmt.Sprintf("%s, %s (%d roots)", greeting, name, len(roots.Roots))), nil
}

func mrtrMultiRound(_ context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
	p := req.Params
	round1 := func() (*mcpgo.CallToolResult, error) {
		return inputRequired(mcpgo.InputRequests{"step1": elicitRequest("Step 1: What is your name?", "name")}, signState("multi_round:1")), nil
	}
	if p.RequestState == "" {
		return round1()
	}
	payload, err := checkState(p.RequestState)
	if err != nil {
		return nil, err
	}
	switch {
	case payload == "multi_round:1":
		name, ok := elicited(server.ElicitationResponse(p.InputResponses, "step1"), "name")
		if !ok {
			return round1()
		}
		return inputRequired(mcpgo.InputRequests{"step2": elicitRequest("Step 2: What is your favorite color?", "color")},
			signState("multi_round:2:"+name)), nil
	case strings.HasPrefix(payload, "multi_round:2:"):
		name := strings.TrimPrefix(payload, "multi_round:2:")
		color, ok := elicited(server.ElicitationResponse(p.InputResponses, "step2"), "color")
		if !ok {
			return inputRequired(mcpgo.InputRequests{"step2": elicitRequest("Step 2: What is your favorite color?", "color")}, p.RequestState), nil
		}
		return mcpgo.NewToolResultText(fmt.Sprintf("%s likes %s", name, color)), nil
	}
	return nil, errBadState
}

func mrtrCapabilities(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
	var caps mcpgo.ClientCapabilities
	if info := server.RequestProtocolInfoFromContext(ctx); info != nil && info.ClientCapabilities != nil {
		caps = *info.ClientCapabilities
	}
	p := req.Params
	if len(p.InputResponses) > 0 {
		return mcpgo.NewToolResultText(fmt.Sprintf("received %d input responses", len(p.InputResponses))), nil
	}
	reqs := mcpgo.InputRequests{}
	if caps.Elicitation != nil {
		reqs["user_name"] = elicitRequest("What is your name?", "name")
	}
	if caps.Sampling != nil {
		reqs["greeting"] = sampleRequest("Generate a greeting", 50)
	}
	if caps.Roots != nil {
		reqs["client_roots"] = mcpgo.NewRootsInputRequest()
	}
	if len(reqs) == 0 {
		return mcpgo.NewToolResultText("the client declared no capability to ask through"), nil
	}
	return inputRequired(reqs, ""), nil
}

// mrtrTampered asks through the 2025-era API: for a 2026 client the resume layer
// makes the round, hands out and checks the requestState.
func mrtrTampered(ctx context.Context, _ mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
	req := mcpgo.ElicitationRequest{}
	req.Params.Message = "What is your name?"
	req.Params.RequestedSchema = json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`)
	res, err := server.ServerFromContext(ctx).RequestElicitation(ctx, req)
	if err != nil {
		return nil, err
	}
	name, _ := elicited(res, "name")
	return mcpgo.NewToolResultText("Hello, " + name + "!"), nil
}

func mrtrPrompt(_ context.Context, req mcpgo.GetPromptRequest) (*mcpgo.GetPromptResult, error) {
	c, ok := elicited(server.ElicitationResponse(req.Params.InputResponses, "user_context"), "context")
	if !ok {
		return &mcpgo.GetPromptResult{
			Result: mcpgo.Result{ResultType: mcpgo.ResultTypeInputRequired},
			MultiRoundTripResult: mcpgo.MultiRoundTripResult{InputRequests: mcpgo.InputRequests{
				"user_context": elicitRequest("What context should the prompt use?", "context")}},
		}, nil
	}
	return prompt(mcpgo.NewTextContent("Answer with this context in mind: " + c)), nil
}

// addHeaderTool adds a tool whose arguments travel in Mcp-Param-* headers too
// (x-mcp-header, SEP-2243): the suite's http-custom-header-server-validation
// sends it headers that disagree with the body, and wants them refused.
func addHeaderTool(s *server.MCPServer) {
	schema := json.RawMessage(`{
		"type": "object",
		"properties": {
			"region": {"type": "string", "description": "Where to run", "x-mcp-header": "Region"},
			"priority": {"type": "integer", "description": "How urgent", "x-mcp-header": "Priority"},
			"dryRun": {"type": "boolean", "description": "Only pretend", "x-mcp-header": "Dry-Run"},
			"note": {"type": "string", "description": "Free text, body only"}
		},
		"required": ["region"]
	}`)
	s.AddTool(mcpgo.NewToolWithRawSchema("test_custom_headers", "Echoes arguments that are mirrored in Mcp-Param-* headers", schema),
		func(_ context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
			b, _ := json.Marshal(req.GetArguments())
			return mcpgo.NewToolResultText("arguments: " + string(b)), nil
		})
}

// addStatelessTools adds the diagnostic tools of the suite's server-stateless
// scenario. They are tools of the 2025 era: the core answers for them what
// 2026-07-28 asks (-32021 for a capability the request did not declare, input
// through input_required, no log without _meta logLevel).
func addStatelessTools(s *server.MCPServer) {
	s.AddTool(mcpgo.NewTool("test_missing_capability", mcpgo.WithDescription("Samples from the client's model: needs the sampling capability")),
		func(ctx context.Context, _ mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
			req := mcpgo.CreateMessageRequest{}
			req.CreateMessageParams.Messages = []mcpgo.SamplingMessage{{Role: mcpgo.RoleUser, Content: mcpgo.NewTextContent("Say hello")}}
			req.CreateMessageParams.MaxTokens = 20
			res, err := server.ServerFromContext(ctx).RequestSampling(ctx, req)
			if err != nil {
				return nil, err
			}
			text, _ := sampledText(res)
			return mcpgo.NewToolResultText("The model said: " + text), nil
		})
	s.AddTool(mcpgo.NewTool("test_streaming_elicitation", mcpgo.WithDescription("Asks the user through RequestElicitation (2025-era API)")), mrtrTampered)
	s.AddTool(mcpgo.NewTool("test_logging_tool", mcpgo.WithDescription("Logs three messages, then answers")),
		func(ctx context.Context, _ mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
			srv := server.ServerFromContext(ctx)
			for i := 1; i <= 3; i++ {
				_ = srv.SendLogMessageToClient(ctx, mcpgo.NewLoggingMessageNotification(mcpgo.LoggingLevelInfo, "test", fmt.Sprintf("log message %d", i)))
			}
			return mcpgo.NewToolResultText("logged 3 messages"), nil
		})
}
