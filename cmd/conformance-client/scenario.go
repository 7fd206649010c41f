package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-resume/mcp-resume/mcp/client"
	"github.com/mcp-resume/mcp-resume/spec"
	"github.com/mcp-resume/mcp-resume/transport"
	httptransport "github.com/mcp-resume/mcp-resume/transport/http"
)

// scenario is one run of the suite: what the environment says.
type scenario struct {
	Name    string // MCP_CONFORMANCE_SCENARIO
	URL     string // the server's, the last argument
	Version string // the protocol version to ask for
	// Context is MCP_CONFORMANCE_CONTEXT, the scenario's data ({"name": ...,
	// ...}); nil when the scenario has none.
	Context json.RawMessage
}

// defaultVersion is asked for when the suite names none (0.1.16 never does):
// the newest version of the 2025 era.
var defaultVersion = spec.LegacyVersions[len(spec.LegacyVersions)-1]

func scenarioOf(getenv func(string) string, url string) (*scenario, error) {
	sc := &scenario{Name: getenv("MCP_CONFORMANCE_SCENARIO"), URL: url, Version: getenv("MCP_CONFORMANCE_PROTOCOL_VERSION")}
	if sc.Name == "" {
		return nil, errors.New("MCP_CONFORMANCE_SCENARIO is not set")
	}
	if sc.Version == "" {
		sc.Version = defaultVersion
	}
	if !spec.Supported(sc.Version) {
		return nil, fmt.Errorf("MCP_CONFORMANCE_PROTOCOL_VERSION %s is not a version this client speaks (%v)", sc.Version, spec.Versions)
	}
	if raw := getenv("MCP_CONFORMANCE_CONTEXT"); raw != "" {
		if !json.Valid([]byte(raw)) {
			return nil, errors.New("MCP_CONFORMANCE_CONTEXT is not JSON")
		}
		sc.Context = json.RawMessage(raw)
	}
	return sc, nil
}

// steps are what a scenario does once connected, by scenario name. A
// scenario not named here is refused: the program does not guess.
var steps = map[string]func(context.Context, *client.Client, *scenario) error{
	"initialize":                          listTools,
	"tools_call":                          callAddNumbers,
	"request-metadata":                    listTools,
	"json-schema-ref-no-deref":            listTools,
	"json-schema-2020-12-preservation":    echoSchema,
	"elicitation-sep1034-client-defaults": callTool("test_client_elicitation_defaults"),
	"sse-retry":                           callTool("test_reconnection"),
	"sep-2322-client-request-state":       multiRound,
	"http-standard-headers":               everyKind,
	"http-custom-headers":                 contextCalls,
	"http-invalid-tool-headers":           callListed,
}

// oauthTransport returns the HTTP transport of an auth/* scenario: one that
// authorizes the client as the scenario's authorization server asks (its
// data, such as pre-registered credentials, is in sc.Context), with base
// under it (authorize; a test puts another).
var oauthTransport = authorize

func (sc *scenario) run(ctx context.Context) error {
	rt := http.DefaultTransport
	if strings.HasPrefix(sc.Name, "auth/") {
		var err error
		if rt, err = oauthTransport(ctx, sc, rt); err != nil {
			return fmt.Errorf("authorizing: %w", err)
		}
	}
	do, ok := steps[sc.Name]
	if !ok && !strings.HasPrefix(sc.Name, "auth/") {
		return fmt.Errorf("unknown scenario (this client runs %d: %s)", len(steps), strings.Join(names(), ", "))
	}
	if !ok {
		do = callEachTool // what an authorized client then does: list the tools and call one
	}
	c, err := sc.connect(ctx, &http.Client{Transport: rt})
	if err != nil {
		return err
	}
	defer c.Close()
	return do(ctx, c, sc)
}

// connect connects to the scenario's server as `mcp-resume connect` connects
// to its remote: Streamable HTTP, one session kept across reconnections, a
// stream's loss ending the connection (the client resumes what it can on a
// new one).
func (sc *scenario) connect(ctx context.Context, hc *http.Client) (*client.Client, error) {
	keep := &httptransport.KeptSession{}
	dial := func(context.Context) (transport.Conn, error) {
		return httptransport.Dial(sc.URL, &httptransport.ClientOptions{Client: hc, FailOnStreamLoss: true, Keep: keep}), nil
	}
	return client.Connect(ctx, dial, &client.Options{
		ClientInfo:      mcpgo.Implementation{Name: "mcp-resume-conformance-client", Version: "1.0.0"},
		ProtocolVersion: sc.Version,
		Transport:       "http",
		Elicitation:     accept,
		Sampling:        sample,
	})
}

// accept answers every elicitation: accepted, a confirmation given, the other
// fields left to the form's defaults (the client fills those in).
func accept(_ context.Context, req mcpgo.ElicitationRequest) (*mcpgo.ElicitationResult, error) {
	content := map[string]any{}
	if props := schemaProperties(req.Params.RequestedSchema); props["confirmed"] {
		content["confirmed"] = true
	}
	return &mcpgo.ElicitationResult{ElicitationResponse: mcpgo.ElicitationResponse{Action: mcpgo.ElicitationResponseActionAccept, Content: content}}, nil
}

// schemaProperties are the names of a requested schema's properties.
func schemaProperties(schema any) map[string]bool {
	b, _ := json.Marshal(schema)
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	_ = json.Unmarshal(b, &s)
	names := map[string]bool{}
	for k := range s.Properties {
		names[k] = true
	}
	return names
}

// sample answers every sampling request with a fixed text.
func sample(context.Context, mcpgo.CreateMessageRequest) (*mcpgo.CreateMessageResult, error) {
	return &mcpgo.CreateMessageResult{
		SamplingMessage: mcpgo.SamplingMessage{Role: mcpgo.RoleAssistant, Content: mcpgo.NewTextContent("a sampled answer")},
		Model:           "conformance-model",
		StopReason:      "endTurn",
	}, nil
}

func names() []string {
	var out []string
	for n := range steps {
		out = append(out, n)
	}
	return out
}
