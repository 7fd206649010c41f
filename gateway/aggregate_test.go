package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/mcp-resume/mcp-resume/gateway"
	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/mcp/e2etest"
	"github.com/mcp-resume/mcp-resume/testkit/faultproxy"
	"github.com/mcp-resume/mcp-resume/transport/ws"
)

// upstreamB is an mcp-go server with a tool named as one of the demo's (echo),
// one of its own, a resource, a resource template and a prompt.
func upstreamB(t *testing.T) string {
	t.Helper()
	url, _ := upstreamBServer(t)
	return url
}

// upstreamBServer is upstreamB, and its mcp-go server.
func upstreamBServer(t *testing.T) (string, *server.MCPServer) {
	t.Helper()
	s := server.NewMCPServer("b", "1", server.WithToolCapabilities(true), server.WithResourceCapabilities(true, true),
		server.WithPromptCapabilities(true))
	s.AddTool(mcpgo.NewTool("echo", mcpgo.WithString("text")), func(_ context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		return mcpgo.NewToolResultText("b says " + req.GetString("text", "")), nil
	})
	s.AddTool(mcpgo.NewTool("only-b"), func(context.Context, mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		return mcpgo.NewToolResultText("only b"), nil
	})
	s.AddResource(mcpgo.NewResource("b://readme", "readme"), func(context.Context, mcpgo.ReadResourceRequest) ([]mcpgo.ResourceContents, error) {
		return []mcpgo.ResourceContents{mcpgo.TextResourceContents{URI: "b://readme", Text: "b's readme"}}, nil
	})
	s.AddResourceTemplate(mcpgo.NewResourceTemplate("b://items/{id}", "item"), func(_ context.Context, req mcpgo.ReadResourceRequest) ([]mcpgo.ResourceContents, error) {
		return []mcpgo.ResourceContents{mcpgo.TextResourceContents{URI: req.Params.URI, Text: "item " + strings.TrimPrefix(req.Params.URI, "b://items/")}}, nil
	})
	s.AddPrompt(mcpgo.NewPrompt("greet", mcpgo.WithArgument("who")), func(_ context.Context, req mcpgo.GetPromptRequest) (*mcpgo.GetPromptResult, error) {
		return mcpgo.NewGetPromptResult("greeting", []mcpgo.PromptMessage{mcpgo.NewPromptMessage(mcpgo.RoleUser, mcpgo.NewTextContent("hello "+req.Params.Arguments["who"]))}), nil
	})
	core, err := mcp.New(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	return serveHTTP(t, core).URL, s
}

// aggregate starts an Aggregate of ups with rule and serves it through a
// core over WebSocket; it returns a client of it, initialized.
func aggregate(t *testing.T, rule gateway.Conflict, ups ...gateway.Upstream) (*gateway.Aggregate, *e2etest.Client) {
	t.Helper()
	a, err := gateway.Start(ups, &gateway.AggregateOptions{Conflict: rule})
	if err != nil {
		t.Fatal(err)
	}
	core, err := mcp.New(a.Server(), &mcp.Options{PolicyOf: a.PolicyOf(nil), AnswerWithin: time.Minute, DetachTools: true})
	if err != nil {
		t.Fatal(err)
	}
	h := ws.NewHandler(core, nil)
	hs := httptest.NewServer(h)
	t.Cleanup(func() {
		h.Close()
		hs.Close()
		core.Close()
		_ = a.Close()
	})
	conn, err := ws.Dial(t.Context(), "ws"+strings.TrimPrefix(hs.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	c := e2etest.NewClient(t, conn)
	t.Cleanup(c.Close)
	c.Initialize(`{}`)
	return a, c
}

func callText(t *testing.T, c *e2etest.Client, tool, args string) string {
	t.Helper()
	c.Send(`{"jsonrpc":"2.0","id":"c","method":"tools/call","params":{"name":%q,"arguments":%s}}`, tool, args)
	m, _ := c.Response(`"c"`)
	if m.Error != nil {
		t.Fatalf("%s: %s", tool, m.Raw)
	}
	return e2etest.Text(m)
}

// sameEcho serves a tool "echo", a prompt "greet" and a resource
// "same://readme", defined as every sameEcho defines them, answering as who;
// it returns the server's URL.
func sameEcho(t *testing.T, who string) string {
	t.Helper()
	s := server.NewMCPServer(who, "1", server.WithToolCapabilities(true), server.WithResourceCapabilities(true, true),
		server.WithPromptCapabilities(true))
	s.AddTool(mcpgo.NewTool("echo", mcpgo.WithString("text")), func(_ context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		return mcpgo.NewToolResultText(who + " says " + req.GetString("text", "")), nil
	})
	s.AddPrompt(mcpgo.NewPrompt("greet"), func(context.Context, mcpgo.GetPromptRequest) (*mcpgo.GetPromptResult, error) {
		return mcpgo.NewGetPromptResult(who, []mcpgo.PromptMessage{mcpgo.NewPromptMessage(mcpgo.RoleUser, mcpgo.NewTextContent(who))}), nil
	})
	s.AddResource(mcpgo.NewResource("same://readme", "readme"), func(context.Context, mcpgo.ReadResourceRequest) ([]mcpgo.ResourceContents, error) {
		return []mcpgo.ResourceContents{mcpgo.TextResourceContents{URI: "same://readme", Text: who}}, nil
	})
	core, err := mcp.New(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	return serveHTTP(t, core).URL
}

// A name that moves to another upstream (under Priority, the first
// upstream's once it is reached, though another served it meanwhile) is
// answered by the upstream its route names, as its policy, limits and scopes
// are read, even when both define it alike: the tool, the prompt and the
// resource.
func TestAggregateRouteMoves(t *testing.T) {
	first := faultproxy.New(t, strings.TrimSuffix(strings.TrimPrefix(sameEcho(t, "first"), "http://"), "/mcp"), faultproxy.NoCut, faultproxy.NoCut)
	first.Down()
	agg, c := aggregate(t, gateway.Priority,
		gateway.Upstream{Name: "first", Options: gateway.Options{URL: "http://" + first.Addr() + "/mcp", MaxBackoff: 50 * time.Millisecond}},
		gateway.Upstream{Name: "second", Options: gateway.Options{URL: sameEcho(t, "second")}})
	c.WaitTools("echo")
	if got := callText(t, c, "echo", `{"text":"x"}`); got != "second says x" {
		t.Fatalf("echo while the first upstream is away: %q", got)
	}
	first.Up()
	c.WaitTools("echo", "second__echo")
	if g, _, _ := agg.Route("echo"); g.Name() != "first" {
		t.Fatalf("echo is routed to %s, want first", g.Name())
	}
	if got := callText(t, c, "echo", `{"text":"x"}`); got != "first says x" {
		t.Errorf("echo once the first upstream came: %q, want the first's answer", got)
	}
	c.Send(`{"jsonrpc":"2.0","id":"p","method":"prompts/get","params":{"name":"greet"}}`)
	if m, _ := c.Response(`"p"`); !strings.Contains(string(m.Raw), `"first"`) {
		t.Errorf("greet once the first upstream came: %s", m.Raw)
	}
	c.Send(`{"jsonrpc":"2.0","id":"r","method":"resources/read","params":{"uri":"same://readme"}}`)
	if m, _ := c.Response(`"r"`); !strings.Contains(string(m.Raw), `"text":"first"`) {
		t.Errorf("the readme once the first upstream came: %s", m.Raw)
	}
}

// Two upstreams through one aggregate, under each conflict rule: every tool
// is callable under the name the rule gives it, and reaches its own upstream;
// an upstream that is not there holds back neither the start nor the others,
// and offers nothing.
func TestAggregateNames(t *testing.T) {
	a, _ := upstreamOurs(t)
	a = "http://" + a + "/mcp"
	b := upstreamB(t)
	ups := func() []gateway.Upstream {
		return []gateway.Upstream{
			{Name: "a", Options: gateway.Options{URL: a}},
			{Name: "b", Options: gateway.Options{URL: b}},
			{Name: "down", Options: gateway.Options{URL: "http://127.0.0.1:1/mcp", MaxBackoff: 50 * time.Millisecond}},
		}
	}
	for _, tc := range []struct {
		rule                gateway.Conflict
		aEcho, bEcho, onlyB string
	}{
		{gateway.PrefixAlways, "a__echo", "b__echo", "b__only-b"},
		{gateway.PrefixOnConflict, "a__echo", "b__echo", "only-b"},
		{gateway.Priority, "echo", "b__echo", "only-b"},
	} {
		t.Run(string(tc.rule), func(t *testing.T) {
			agg, c := aggregate(t, tc.rule, ups()...)
			names := c.WaitTools(tc.aEcho, tc.bEcho, tc.onlyB)
			if !slices.Contains(names, mcp.DefaultAwaitTool) {
				t.Errorf("the core's await tool is not listed: %v", names)
			}
			for _, n := range names {
				if strings.HasPrefix(n, "down") {
					t.Errorf("an upstream never reached lists %s", n)
				}
			}
			if got := callText(t, c, tc.aEcho, `{"text":"x"}`); got != "x" {
				t.Errorf("%s: %q", tc.aEcho, got)
			}
			if got := callText(t, c, tc.bEcho, `{"text":"x"}`); got != "b says x" {
				t.Errorf("%s: %q", tc.bEcho, got)
			}
			if got := callText(t, c, tc.onlyB, `{}`); got != "only b" {
				t.Errorf("%s: %q", tc.onlyB, got)
			}
			up := map[string]bool{}
			for _, g := range agg.Upstreams() {
				up[g.Name()] = g.Up()
			}
			if !up["a"] || !up["b"] || up["down"] {
				t.Errorf("Up: %v", up)
			}
		})
	}
}

// Resources by URI, templates by their match, prompts by name, each to its
// upstream, through the aggregate; a subscription to a resource goes to its
// upstream, whose updates come back to the subscribed session.
func TestAggregateResourcesPrompts(t *testing.T) {
	bURL, bSrv := upstreamBServer(t)
	_, c := aggregate(t, gateway.PrefixAlways,
		gateway.Upstream{Name: "a", Options: gateway.Options{URL: demoURL(t)}},
		gateway.Upstream{Name: "b", Options: gateway.Options{URL: bURL}})
	c.WaitTools("a__echo", "b__echo")
	c.Send(`{"jsonrpc":"2.0","id":"r","method":"resources/read","params":{"uri":"b://readme"}}`)
	if m, _ := c.Response(`"r"`); !strings.Contains(string(m.Result), "b's readme") {
		t.Errorf("resources/read: %s", m.Raw)
	}
	c.Send(`{"jsonrpc":"2.0","id":"t","method":"resources/read","params":{"uri":"b://items/7"}}`)
	if m, _ := c.Response(`"t"`); !strings.Contains(string(m.Result), "item 7") {
		t.Errorf("resources/read by template: %s", m.Raw)
	}
	c.Send(`{"jsonrpc":"2.0","id":"p","method":"prompts/get","params":{"name":"b__greet","arguments":{"who":"you"}}}`)
	if m, _ := c.Response(`"p"`); !strings.Contains(string(m.Result), "hello you") {
		t.Errorf("prompts/get: %s", m.Raw)
	}
	c.Send(`{"jsonrpc":"2.0","id":"pl","method":"prompts/list"}`)
	if m, _ := c.Response(`"pl"`); !strings.Contains(string(m.Result), `"b__greet"`) {
		t.Errorf("prompts/list: %s", m.Raw)
	}
	c.Send(`{"jsonrpc":"2.0","id":"s","method":"resources/subscribe","params":{"uri":"b://items/7"}}`)
	if m, _ := c.Response(`"s"`); m.Error != nil {
		t.Fatalf("resources/subscribe: %s", m.Raw)
	}
	// The upstream tells its clients (the gateway's) of an update until one
	// reaches the subscribed client: the gateway subscribes upstream first.
	stop := make(chan struct{})
	var sending sync.WaitGroup
	sending.Go(func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				bSrv.SendNotificationToAllClients("notifications/resources/updated", map[string]any{"uri": "b://items/7"})
			}
		}
	})
	stopSending := sync.OnceFunc(func() { close(stop); sending.Wait() })
	t.Cleanup(stopSending) // a failed wait below ends the test: the sender stops with it
	c.Until(func(m e2etest.Msg) bool {
		return m.Method == "notifications/resources/updated" && strings.Contains(string(m.Params), "b://items/7")
	})
	stopSending()

	// A tool added upstream is one list change of the aggregate's tools,
	// and none of its other lists.
	bSrv.AddTool(mcpgo.NewTool("late"), func(context.Context, mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		return mcpgo.NewToolResultText("late"), nil
	})
	seen := c.Until(func(m e2etest.Msg) bool { return m.Method == "notifications/tools/list_changed" })
	seen = append(seen, c.Quiet(`"q"`)...)
	for _, m := range seen {
		if m.Method == "notifications/prompts/list_changed" || m.Method == "notifications/resources/list_changed" {
			t.Errorf("a tool added upstream: %s", m.Raw)
		}
	}
	c.WaitTools("b__late")
}

func TestExposed(t *testing.T) {
	if got := gateway.Exposed("fs", "read"); got != "fs__read" {
		t.Errorf("Exposed: %q", got)
	}
	long := strings.Repeat("x", 100)
	got := gateway.Exposed("fs", long)
	if len(got) != gateway.MaxName || !strings.HasPrefix(got, "fs__xxx") || got == gateway.Exposed("fs", long+"y") {
		t.Errorf("Exposed of a long name: %q", got)
	}
	for _, bad := range []string{"", "a_b", "a b", strings.Repeat("a", 33), "a.b", "Files"} {
		if gateway.CheckName(bad) == nil {
			t.Errorf("CheckName(%q) = nil", bad)
		}
	}
	if _, err := gateway.Start([]gateway.Upstream{{Name: "x", Options: gateway.Options{URL: "http://127.0.0.1:1"}}, {Name: "x", Options: gateway.Options{URL: "http://127.0.0.1:1"}}}, &gateway.AggregateOptions{}); err == nil {
		t.Error("an upstream named twice was taken")
	}
}

// demoURL serves the demo tools over Streamable HTTP (upstreamOurs).
func demoURL(t *testing.T) string {
	t.Helper()
	addr, _ := upstreamOurs(t)
	return "http://" + addr + "/mcp"
}

// A gateway of several names the upstream on the spans of its requests to
// it (mcp_resume.upstream).
func TestAggregateSpansNameUpstream(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	_, c := aggregate(t, gateway.PrefixAlways,
		gateway.Upstream{Name: "a", Options: gateway.Options{URL: demoURL(t), TracerProvider: tp}},
		gateway.Upstream{Name: "b", Options: gateway.Options{URL: upstreamB(t), TracerProvider: tp}})
	c.WaitTools("a__echo", "b__echo")
	callText(t, c, "b__echo", `{"text":"x"}`)
	for _, s := range rec.Ended() {
		if s.Name() != "tools/call echo" {
			continue
		}
		for _, kv := range s.Attributes() {
			if kv.Key == "mcp_resume.upstream" && kv.Value.AsString() == "b" {
				return
			}
		}
		t.Fatalf("the span of the call upstream: %v, want mcp_resume.upstream b", s.Attributes())
	}
	t.Fatal("no span of the call upstream")
}

// An upstream whose first tools/list fails (here answered with an error) is listed
// again until it answers: its tools appear without a list change of its
// own.
func TestAggregateListsAgain(t *testing.T) {
	up, err := url.Parse(demoURL(t))
	if err != nil {
		t.Fatal(err)
	}
	rp := &httputil.ReverseProxy{
		Rewrite:       func(pr *httputil.ProxyRequest) { u := *up; pr.Out.URL, pr.Out.Host = &u, up.Host },
		FlushInterval: -1, // event streams pass at once
	}
	var failed atomic.Bool
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), `"tools/list"`) && failed.CompareAndSwap(false, true) {
			var m struct {
				ID json.RawMessage `json:"id"`
			}
			_ = json.Unmarshal(body, &m)
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32603,"message":"not now"}}`, m.ID)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(proxy.Close)
	_, c := aggregate(t, gateway.PrefixAlways, gateway.Upstream{Name: "a", Options: gateway.Options{URL: proxy.URL, MinBackoff: 10 * time.Millisecond}})
	c.WaitTools("a__echo")
	if !failed.Load() {
		t.Fatal("the first tools/list did not fail")
	}
}
