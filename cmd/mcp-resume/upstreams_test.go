package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcp-resume/mcp-resume/mcp/client"
	"github.com/mcp-resume/mcp-resume/mcp/e2etest"
	"github.com/mcp-resume/mcp-resume/oauth"
	"github.com/mcp-resume/mcp-resume/spec"
	"github.com/mcp-resume/mcp-resume/testkit/everything"
	"github.com/mcp-resume/mcp-resume/testkit/faultproxy"
	"github.com/mcp-resume/mcp-resume/testkit/oauthtest"
	"github.com/mcp-resume/mcp-resume/testkit/poll"
	"github.com/mcp-resume/mcp-resume/transport"
	httptransport "github.com/mcp-resume/mcp-resume/transport/http"
	"github.com/mcp-resume/mcp-resume/transport/ws"
)

// mcpgoUpstream serves a plain mcp-go server (not ours: no resume layer) over
// Streamable HTTP in the test's process: echo, and slow, which sends steps
// progress notifications over seconds.
func mcpgoUpstream(t *testing.T) string {
	t.Helper()
	s := server.NewMCPServer("mcpgo", "1", server.WithToolCapabilities(true))
	s.AddTool(mcpgo.NewTool("echo", mcpgo.WithString("text")), func(_ context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		return mcpgo.NewToolResultText("mcpgo: " + req.GetString("text", "")), nil
	})
	s.AddTool(mcpgo.NewTool("slow", mcpgo.WithNumber("seconds"), mcpgo.WithNumber("steps")), func(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		steps := req.GetInt("steps", 1)
		each := time.Duration(req.GetFloat("seconds", 1) * float64(time.Second) / float64(steps))
		var token mcpgo.ProgressToken
		if req.Params.Meta != nil {
			token = req.Params.Meta.ProgressToken
		}
		// Each step's progress is sent as the step starts: mcp-go's
		// Streamable HTTP server writes a handler's notifications from a
		// goroutine of its own, and one sent as the handler returns may come
		// after the result, which ends the stream (it is lost).
		for i := 1; i <= steps; i++ {
			if token != nil {
				_ = server.ServerFromContext(ctx).SendNotificationToClient(ctx, "notifications/progress",
					map[string]any{"progressToken": token, "progress": i, "total": steps})
			}
			select {
			case <-time.After(each):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return mcpgo.NewToolResultText(fmt.Sprintf("slow done: %d steps", steps)), nil
	})
	hs := httptest.NewServer(server.NewStreamableHTTPServer(s))
	t.Cleanup(hs.Close)
	return hs.URL + "/mcp"
}

// upstreamsFile writes a policy file naming upstreams, each a YAML flow
// mapping, and returns its path.
func upstreamsFile(t *testing.T, extra string, ups ...string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("version: 1\nupstreams:\n")
	for _, u := range ups {
		b.WriteString("- " + u + "\n")
	}
	b.WriteString(extra)
	path := filepath.Join(t.TempDir(), "gateway.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// threeUpstreams are the three: server-everything over stdio, a plain
// mcp-go server over Streamable HTTP, and mcp-resume serve over WebSocket (its
// process, returned).
func threeUpstreams(t *testing.T, oursArgs string) (everythingUp, mcpgoUp, oursUp string, ours startLine) {
	t.Helper()
	ours = spawnNet(t, "serve --http 127.0.0.1:0"+oursArgs, 1)[0]
	return fmt.Sprintf("{name: everything, command: [node, %q, stdio]}", everything.Path(t)),
		fmt.Sprintf("{name: mcpgo, url: %q}", mcpgoUpstream(t)),
		fmt.Sprintf("{name: ours, url: %q}", ours.WS), ours
}

// base is the origin of a listener's MCP URL.
func base(l startLine) string { return strings.TrimSuffix(l.URL, "/mcp") }

// echoes calls echo-like tools and checks each answer holds want.
func echoes(t *testing.T, c *e2etest.Client, calls map[string]string) {
	t.Helper()
	n := 0
	for tool, want := range calls {
		n++
		id := fmt.Sprintf(`"e%d"`, n)
		c.Send(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":%q,"arguments":{"message":"hi","text":"hi"}}}`, id, tool)
		m, _ := c.Response(id)
		if !strings.Contains(string(m.Raw), want) {
			t.Errorf("%s: %s, want %q in it", tool, m.Raw, want)
		}
	}
}

// A gateway of three upstreams (server-everything over stdio, a plain mcp-go
// server over Streamable HTTP, mcp-resume serve over WebSocket): every tool is
// callable through the aggregate (each upstream's echo under its prefix) and
// through each upstream's own path (under its own name), over Streamable HTTP
// and WebSocket; /healthz says each is up, /metrics too.
func TestGatewayUpstreams(t *testing.T) {
	e, m, o, _ := threeUpstreams(t, "")
	gw := spawnNet(t, "gateway --http 127.0.0.1:0 --config "+upstreamsFile(t, "", e, m, o), 1)[0]

	c := e2etest.NewClient(t, httptransport.Dial(gw.URL, nil))
	c.Initialize(`{}`)
	names := c.WaitTools("everything__echo", "mcpgo__echo", "mcpgo__slow", "ours__echo", "ours__countdown", "everything__trigger-long-running-operation")
	for _, n := range names {
		if !strings.Contains(n, "__") {
			t.Errorf("a tool without its upstream's prefix: %s", n)
		}
	}
	echoes(t, c, map[string]string{"everything__echo": "Echo: hi", "mcpgo__echo": "mcpgo: hi", "ours__echo": `"text":"hi"`})
	c.Send(`{"jsonrpc":"2.0","id":"lr","method":"tools/call","params":{"name":"everything__trigger-long-running-operation","arguments":{"duration":0.3,"steps":3},"_meta":{"progressToken":"p"}}}`)
	if resp, before := c.Response(`"lr"`); !strings.Contains(e2etest.Text(resp), "Steps: 3.") || len(progressValues(before)) != 3 {
		t.Errorf("long-running through the aggregate: %s after %d messages", resp.Raw, len(before))
	}

	for _, up := range []struct{ name, tool, want string }{
		{"everything", "echo", "Echo: hi"}, {"mcpgo", "echo", "mcpgo: hi"}, {"ours", "echo", `"text":"hi"`},
	} {
		for _, dial := range []func() *e2etest.Client{
			func() *e2etest.Client {
				return e2etest.NewClient(t, httptransport.Dial(base(gw)+"/servers/"+up.name+"/mcp", nil))
			},
			func() *e2etest.Client {
				return e2etest.NewClient(t, dialWS(t, wsOf(base(gw))+"/servers/"+up.name+"/ws"))
			},
		} {
			pc := dial()
			pc.Initialize(`{}`)
			names := pc.WaitTools(up.tool)
			if slices.ContainsFunc(names, func(n string) bool { return strings.Contains(n, "__") }) {
				t.Errorf("%s's own path lists prefixed names: %v", up.name, names)
			}
			echoes(t, pc, map[string]string{up.tool: up.want})
			pc.Close()
		}
	}

	_, health := get(t, base(gw)+"/healthz")
	for _, up := range []string{"everything", "mcpgo", "ours"} {
		if !strings.Contains(health, "upstream "+up+" up") {
			t.Errorf("/healthz says %q, want %s up", health, up)
		}
	}
	_, metrics := get(t, base(gw)+"/metrics")
	for _, want := range []string{`mcp_resume_upstream_up{upstream="mcpgo"} 1`, `mcp_resume_requests{state="completed",upstream=""}`, `upstream="ours"`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// progressValues are the progress values among msgs.
func progressValues(msgs []e2etest.Msg) []int {
	var out []int
	for _, m := range msgs {
		if m.Method == "notifications/progress" {
			out = append(out, e2etest.Progress(m))
		}
	}
	return out
}

// dialWS opens a WebSocket client connection to url, closed at the end of the
// test.
func dialWS(t *testing.T, url string) transport.Conn {
	t.Helper()
	c, err := ws.Dial(t.Context(), url, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// keyedCall is one call of TestGatewayUpstreamsChaos: a tool of one of the
// upstreams that sends steps progress notifications, and what its result
// says.
type keyedCall struct {
	tool, args, want string
	steps            int
}

// threeCalls are a call of each upstream's slow tool, steps steps over
// about seconds.
func threeCalls(seconds float64, steps int) []keyedCall {
	return []keyedCall{
		{"everything__trigger-long-running-operation", fmt.Sprintf(`{"duration":%g,"steps":%d}`, seconds, steps), fmt.Sprintf("Steps: %d.", steps), steps},
		{"mcpgo__slow", fmt.Sprintf(`{"seconds":%g,"steps":%d}`, seconds, steps), fmt.Sprintf("slow done: %d steps", steps), steps},
		{"ours__countdown", fmt.Sprintf(`{"seconds":%d,"steps":%d}`, int(seconds+0.5), steps), fmt.Sprintf("countdown done: %d of %d steps", steps, steps), steps},
	}
}

// callExact makes call with c and says what was wrong with it: not its
// result, or progress other than 1..steps once each, in order.
func callExact(ctx context.Context, c *client.Client, call keyedCall) error {
	var mu sync.Mutex
	var progress []int
	res, err := c.CallTool(ctx, call.tool, json.RawMessage(call.args), &client.CallOptions{Progress: func(p client.Progress) {
		mu.Lock()
		progress = append(progress, int(p.Progress))
		mu.Unlock()
	}})
	if err != nil {
		return fmt.Errorf("%s: %w", call.tool, err)
	}
	b, _ := json.Marshal(res)
	mu.Lock()
	defer mu.Unlock()
	want := make([]int, call.steps)
	for i := range want {
		want[i] = i + 1
	}
	switch {
	case !strings.Contains(string(b), call.want):
		return fmt.Errorf("%s: %s, want %q in it", call.tool, b, call.want)
	case !slices.Equal(progress, want):
		return fmt.Errorf("%s: progress %v, want %v", call.tool, progress, want)
	}
	return nil
}

// 50 keyed calls (mcp-resume's Go client) through the aggregate, spread over
// the three upstreams, while every connection between the client and the
// gateway, and between the gateway and its WebSocket upstream, is cut 100-700
// ms after it opened: each call's result, and its progress once each, in
// order.
func TestGatewayUpstreamsChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	ours := spawnNet(t, "serve --http 127.0.0.1:0", 1)[0]
	upCut := faultproxy.NewTimed(t, strings.TrimPrefix(base(ours), "http://"), 100*time.Millisecond, 700*time.Millisecond)
	e, m, _, _ := threeUpstreams(t, "")
	o := fmt.Sprintf("{name: ours, url: %q}", "ws://"+upCut.Addr()+"/ws")
	gw := spawnNet(t, "gateway --http 127.0.0.1:0 --config "+upstreamsFile(t, "", e, m, o), 1)[0]
	cut := faultproxy.NewTimed(t, strings.TrimPrefix(base(gw), "http://"), 100*time.Millisecond, 700*time.Millisecond)

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c, err := client.Connect(ctx, httpDialer("http://"+cut.Addr()+"/mcp"), &client.Options{MinBackoff: 5 * time.Millisecond, MaxBackoff: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	names, err := waitTools(ctx, c, "everything__trigger-long-running-operation", "mcpgo__slow", "ours__countdown")
	if err != nil {
		t.Fatalf("%v (listed %v)", err, names)
	}
	calls := threeCalls(2, 5)
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for i := range 50 {
		wg.Go(func() {
			if err := callExact(ctx, c, calls[i%3]); err != nil {
				errs <- fmt.Errorf("call %d: %w", i, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("cuts: %d client-gateway, %d gateway-upstream", cut.Cuts(), upCut.Cuts())
	if cut.Cuts() == 0 || upCut.Cuts() == 0 {
		t.Errorf("cuts: %d and %d, want some of each", cut.Cuts(), upCut.Cuts())
	}
}

// waitTools waits until c's server lists want.
func waitTools(ctx context.Context, c *client.Client, want ...string) ([]string, error) {
	var names []string
	for {
		tools, err := c.ListTools(ctx)
		names = names[:0]
		for _, tl := range tools {
			names = append(names, tl.Name)
		}
		if err == nil && !slices.ContainsFunc(want, func(w string) bool { return !slices.Contains(names, w) }) {
			return names, nil
		}
		select {
		case <-ctx.Done():
			return names, fmt.Errorf("tools %v not all listed: %w", want, cmp.Or(err, ctx.Err()))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// kill -9 of one upstream (mcp-resume serve over WebSocket, started again on
// its address) while calls of all three run: its restartable call (the
// upstream's policy in the file says countdown is) runs again on the new
// process and returns its result; its other call ends with upstream_lost;
// the other two upstreams' calls return their results and all their
// progress, untouched.
func TestGatewayUpstreamKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	addr := freeAddr(t)
	ours := spawnNet(t, "serve --http "+addr, 1)[0]
	e, m, _, _ := threeUpstreams(t, "")
	o := fmt.Sprintf("{name: ours, url: %q, tools: {countdown: {restartable: true}}}", ours.WS)
	gw := spawnNet(t, "gateway --http 127.0.0.1:0 --config "+upstreamsFile(t, "", e, m, o), 1)[0]
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	c, err := client.Connect(ctx, httpDialer(gw.URL), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if names, err := waitTools(ctx, c, "everything__trigger-long-running-operation", "mcpgo__slow", "ours__countdown", "ours__ask"); err != nil {
		t.Fatalf("%v (listed %v)", err, names)
	}
	calls := threeCalls(3, 3)
	var wg sync.WaitGroup
	untouched := make([]error, 2)
	for i := range 2 {
		wg.Go(func() { untouched[i] = callExact(ctx, c, calls[i]) })
	}
	var restarted, lost error
	var restartedRes *mcpgo.CallToolResult
	progressed := make(chan struct{}, 1)
	wg.Go(func() {
		restartedRes, restarted = c.CallTool(ctx, "ours__countdown", json.RawMessage(`{"seconds":3,"steps":3}`), &client.CallOptions{
			Progress: func(client.Progress) {
				select {
				case progressed <- struct{}{}:
				default:
				}
			}})
	})
	wg.Go(func() { _, lost = c.CallTool(ctx, "ours__ask", json.RawMessage(`{"delay":30}`), nil) })
	select {
	case <-progressed: // the countdown runs upstream
	case <-ctx.Done():
		t.Fatal("no progress of the countdown")
	}
	ours.Kill()
	spawnNet(t, "serve --http "+addr, 1)
	wg.Wait()
	for i, err := range untouched {
		if err != nil {
			t.Errorf("%s, of an upstream not killed: %v", calls[i].tool, err)
		}
	}
	if b, _ := json.Marshal(restartedRes); restarted != nil || !strings.Contains(string(b), "countdown done: 3 of 3 steps") {
		t.Errorf("the restartable call: %s, %v; want its result, run again", b, restarted)
	}
	var se *spec.Error
	if !errors.As(lost, &se) || se.Reason != "upstream_lost" {
		t.Errorf("the other call of the killed upstream: %v, want upstream_lost", lost)
	}
}

// A gateway of three upstreams with --data-dir, killed (SIGKILL) and started
// again: the results its calls finished while their clients were away, of all
// three upstreams, through the aggregate and through an upstream's own path,
// are there for their resumes.
func TestGatewayUpstreamsDataDir(t *testing.T) {
	e, m, o, _ := threeUpstreams(t, "")
	args := "gateway --http 127.0.0.1:0 --data-dir " + t.TempDir() + " --config " + upstreamsFile(t, "", e, m, o)
	first := spawnNet(t, args, 1)[0]
	type started struct {
		url, id, token, want string
	}
	var calls []started
	start := func(url, tool, callArgs, want string) {
		c := e2etest.NewClient(t, httptransport.Dial(url, nil))
		c.Initialize(`{"resumableRequests":{}}`)
		if url == first.URL {
			c.WaitTools(tool)
		}
		id := fmt.Sprint(len(calls) + 1)
		c.Send(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":%q,"arguments":%s,"_meta":{"progressToken":"p"}}}`, id, tool, callArgs)
		p := e2etest.PolicyOf(t, c.Next())
		c.Close()
		calls = append(calls, started{strings.TrimPrefix(url, base(first)), id, p.ResumeToken, want})
	}
	for _, k := range threeCalls(1, 3) {
		start(first.URL, k.tool, k.args, k.want)
	}
	start(base(first)+"/servers/mcpgo/mcp", "slow", `{"seconds":0.3,"steps":3}`, "slow done: 3 steps")
	for _, k := range calls {
		w := e2etest.NewClient(t, httptransport.Dial(base(first)+k.url, nil))
		w.Initialize(`{"resumableRequests":{}}`)
		w.WaitStatus(k.id, k.token, func(st e2etest.Status) bool { return st.Status == "completed" })
		w.Close()
	}
	first.Kill()

	second := spawnNet(t, args, 1)[0]
	for _, k := range calls {
		c := e2etest.NewClient(t, httptransport.Dial(base(second)+k.url, nil))
		c.Initialize(`{"resumableRequests":{}}`)
		c.Resume(k.id, k.token)
		// Progress written to the first client before it went is not
		// replayed (it declared no ack extension): the result alone is
		// checked.
		if resp, _ := c.Response(k.id); !strings.Contains(string(resp.Raw), k.want) {
			t.Errorf("%s after the restart: %s, want %q", k.url, resp.Raw, k.want)
		}
		c.Close()
	}
}

// The shared end-to-end suite through a gateway of two upstreams' aggregated
// endpoint, on each of its transports: `mcp-resume serve --stdio` (the demo
// tools the suite calls) and `serve --conformance --stdio` (none of whose
// names is the demo's: under the conflict rule the demo's keep theirs), each
// this binary as a child. Everything the suite checks (progress, resumes,
// acks, questions while detached, cancels, both eras, tasks) holds through
// the aggregate.
func TestGatewayUpstreamsEndToEnd(t *testing.T) {
	t.Parallel() // a subprocess's test, mostly waiting: beside the package's others
	child := func(name, args string) string {
		return fmt.Sprintf("{name: %s, command: [%q], env: [%q, GORACE]}", name, os.Args[0], "MCP_RESUME_TEST_ARGS="+args)
	}
	file := upstreamsFile(t, "aggregate: {conflict: conflict}\n", child("demo", "serve --stdio"), child("conformance", "serve --conformance --stdio"))
	t.Run("stdio", func(t *testing.T) {
		e2etest.Run(t, e2etest.Harness{
			Dial: func(t testing.TB) transport.Conn {
				// The gateway serves once its upstreams answered (they
				// are children that start at once): the suite's first
				// tools/call finds the demo's tools listed.
				return spawn(t, "gateway --stdio --config "+file)
			},
		})
	})
	// Three start-up lines, in any order: the gateway's listener's and its
	// children's (their logs go to the gateway's stderr).
	ls := spawnNet(t, "gateway --http 127.0.0.1:0 --config "+file, 3)
	gw := ls[slices.IndexFunc(ls, func(l startLine) bool { return l.URL != "" })]
	poll.Until(t, 20*time.Second, "both upstreams up", func() bool {
		_, health := get(t, base(gw)+"/healthz")
		return strings.Count(health, " up\n") == 2
	})
	runOnNet(t, gw)
}

// Two instances of a gateway of two upstreams on one NATS (a cluster): a call
// started through A's aggregate, and one through A's path of an upstream,
// are resumed on B's with their progress and results (each endpoint's
// requests in its own stream and buckets, shared by the instances).
func TestGatewayUpstreamsCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	ns := natsInProcess(t)
	_, m, o, _ := threeUpstreams(t, "")
	file := upstreamsFile(t, "", m, o)
	args := func(name string) string {
		return "gateway --http 127.0.0.1:0 --nats-url " + ns.ClientURL() + " --instance " + name + " --config " + file
	}
	a := spawnNet(t, args("a"), 1)[0]
	b := spawnNet(t, args("b"), 1)[0]
	for _, tc := range []struct {
		path, tool, args, want string
	}{
		{"/mcp", "mcpgo__slow", `{"seconds":1,"steps":3}`, "slow done: 3 steps"},
		{"/servers/ours/mcp", "countdown", `{"seconds":1,"steps":3}`, "countdown done: 3 of 3 steps"},
	} {
		ca := e2etest.NewClient(t, httptransport.Dial(base(a)+tc.path, nil))
		ca.Initialize(`{"resumableRequests":{}}`)
		ca.WaitTools(tc.tool)
		ca.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":%q,"arguments":%s,"_meta":{"progressToken":"p"}}}`, tc.tool, tc.args)
		var p e2etest.Policy
		ca.Until(func(m e2etest.Msg) bool {
			if m.Method == spec.MethodResumePolicy {
				p = e2etest.PolicyOf(t, m)
				return true
			}
			return false
		})
		ca.Close()
		cb := e2etest.NewClient(t, httptransport.Dial(base(b)+tc.path, nil))
		cb.Initialize(`{"resumableRequests":{}}`)
		cb.Resume(`1`, p.ResumeToken)
		if resp, _ := cb.Response("1"); !strings.Contains(string(resp.Raw), tc.want) {
			t.Errorf("%s: resumed on B: %s, want %q", tc.path, resp.Raw, tc.want)
		}
		cb.Close()
	}
}

// A file's upstreams go with gateway alone, without the single upstream's
// flags; a gateway needs an upstream from somewhere; a file's upstream whose
// token variable is empty stops the start, naming it.
func TestGatewayUpstreamsRefused(t *testing.T) {
	ups := upstreamsFile(t, "", `{name: a, url: "http://127.0.0.1:1/mcp"}`)
	none := upstreamsFile(t, "")
	tokenless := upstreamsFile(t, "", `{name: a, url: "http://127.0.0.1:1/mcp", tokenEnv: NOPE_NOT_SET_X}`)
	for args, want := range map[string]string{
		"serve --http 127.0.0.1:0 --config " + ups:                                "upstreams are a gateway's",
		"gateway --http 127.0.0.1:0 --config " + ups + " --env HOME":              "names upstreams: give no --upstream",
		"gateway --http 127.0.0.1:0 --config " + ups + " -- x":                    "names upstreams: give no --upstream",
		"gateway --http 127.0.0.1:0 --config " + ups + " --upstream http://x/mcp": "names upstreams: give no --upstream",
		"gateway --http 127.0.0.1:0 --config " + none:                             "names no upstreams",
		"gateway --http 127.0.0.1:0 --config " + tokenless:                        "NOPE_NOT_SET_X is not set",
	} {
		var out strings.Builder
		err := run(strings.Fields(args), strings.NewReader(""), &out, &out)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q in it", args, err, want)
		}
	}
}

// With OAuth, each upstream's own endpoint of a gateway of several is a
// protected resource of its own (its metadata at its path, its challenge
// naming it): a token for it serves there, a token for the aggregate does
// not, and the other way round.
func TestGatewayUpstreamsOAuth(t *testing.T) {
	op := oauthtest.Start(t)
	m := fmt.Sprintf("{name: mcpgo, url: %q, tools: {slow: {scopes: [tools:slow]}}}", mcpgoUpstream(t))
	// A scope named for a tool by its upstream's name, and one named by the
	// aggregate's: each needed on both endpoints.
	gw := spawnNet(t, "gateway --http 127.0.0.1:0 --oauth-issuer "+op.Issuer+" --config "+upstreamsFile(t, "tools: {mcpgo__echo: {scopes: [tools:echo]}}\n", m), 1)[0]
	own := base(gw) + "/servers/mcpgo/mcp"
	resp, err := http.Get(base(gw) + "/.well-known/oauth-protected-resource/servers/mcpgo/mcp")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Resource string `json:"resource"`
	}
	err = json.NewDecoder(resp.Body).Decode(&doc)
	resp.Body.Close()
	if err != nil || doc.Resource != own {
		t.Fatalf("the upstream's endpoint's metadata: %+v %v, want resource %s", doc, err, own)
	}
	status, ch, _ := postAuth(t, own, "")
	if status != http.StatusUnauthorized || !strings.Contains(ch, `resource_metadata="`+base(gw)+`/.well-known/oauth-protected-resource/servers/mcpgo/mcp"`) {
		t.Fatalf("no token at %s: %d %q", own, status, ch)
	}
	call := func(url, tool, token string) e2etest.Msg {
		c := e2etest.NewClient(t, httptransport.Dial(url, &httptransport.ClientOptions{Client: &http.Client{Transport: transport.BearerTransport(token, nil)}}))
		defer c.Close()
		c.Initialize(`{}`)
		c.WaitTools(tool)
		c.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":%q,"arguments":{"text":"hi","seconds":0,"steps":1}}}`, tool)
		m, _ := c.Response("1")
		return m
	}
	scoped := func(resource string) string { return op.Token(t, "alice", resource, "tools:echo", "tools:slow") }
	if m := call(own, "echo", scoped(own)); e2etest.Text(m) != "mcpgo: hi" {
		t.Errorf("a token for the upstream's endpoint, there: %s", m.Raw)
	}
	if m := call(gw.URL, "mcpgo__echo", scoped(gw.URL)); e2etest.Text(m) != "mcpgo: hi" {
		t.Errorf("a token for the aggregate, there: %s", m.Raw)
	}
	for _, tc := range []struct{ url, tool string }{{own, "echo"}, {own, "slow"}, {gw.URL, "mcpgo__echo"}, {gw.URL, "mcpgo__slow"}} {
		if m := call(tc.url, tc.tool, op.Token(t, "alice", tc.url)); m.Error == nil || m.Error.Reason != oauth.ReasonScope {
			t.Errorf("%s at %s without its scope: %s", tc.tool, tc.url, m.Raw)
		}
	}
	if status, _, body := postAuth(t, own, "Bearer "+op.Token(t, "alice", gw.URL)); status != http.StatusUnauthorized || !strings.Contains(body, "wrong_audience") {
		t.Errorf("the aggregate's token at the upstream's endpoint: %d %s", status, body)
	}
	if status, _, body := postAuth(t, gw.URL, "Bearer "+op.Token(t, "alice", own)); status != http.StatusUnauthorized || !strings.Contains(body, "wrong_audience") {
		t.Errorf("the upstream's endpoint's token at the aggregate: %d %s", status, body)
	}
}
