package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-resume/mcp-resume/mcp/e2etest"
	"github.com/mcp-resume/mcp-resume/spec"
	"github.com/mcp-resume/mcp-resume/testkit/everything"
	"github.com/mcp-resume/mcp-resume/testkit/faultproxy"
	"github.com/mcp-resume/mcp-resume/testkit/freeport"
	"github.com/mcp-resume/mcp-resume/testkit/logbuf"
	"github.com/mcp-resume/mcp-resume/testkit/poll"
	"github.com/mcp-resume/mcp-resume/transport"
	httptransport "github.com/mcp-resume/mcp-resume/transport/http"
	"github.com/mcp-resume/mcp-resume/transport/stdio"
	"github.com/mcp-resume/mcp-resume/transport/ws"
)

// The shared end-to-end suite through the gateway: `mcp-resume gateway` in front
// of `mcp-resume serve --stdio` (this binary twice, each a real subprocess), on
// each of the gateway's transports. Everything the suite checks of the demo
// tools (progress, resumes, acks, elicitation and sampling while detached,
// cancels, both protocol eras, tasks) holds for tools the gateway only relays.
func TestGatewayEndToEnd(t *testing.T) {
	t.Parallel() // a subprocess's test, mostly waiting: beside the package's others
	t.Run("stdio", func(t *testing.T) {
		e2etest.Run(t, e2etest.Harness{
			Dial: func(t testing.TB) transport.Conn { return spawn(t, "gateway --stdio -- "+os.Args[0]) },
		})
	})
	// Two start-up lines: the gateway's listener, and its upstream child's (its
	// logs go to the gateway's stderr), in either order.
	ls := spawnNet(t, "gateway --http 127.0.0.1:0 -- "+os.Args[0], 2)
	if ls[0].URL == "" {
		ls[0], ls[1] = ls[1], ls[0]
	}
	runOnNet(t, ls[0])
}

// runOnNet runs the shared end-to-end suite on a listener's Streamable HTTP
// and WebSocket endpoints.
func runOnNet(t *testing.T, l startLine) {
	t.Run("http", func(t *testing.T) {
		e2etest.Run(t, e2etest.Harness{
			Dial: func(t testing.TB) transport.Conn {
				c := httptransport.Dial(l.URL, nil)
				t.Cleanup(func() { _ = c.Close() })
				return c
			},
			Reconnect: true,
		})
	})
	t.Run("ws", func(t *testing.T) {
		e2etest.Run(t, e2etest.Harness{
			Dial: func(t testing.TB) transport.Conn {
				c, err := ws.Dial(t.Context(), l.WS, nil)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = c.Close() })
				return c
			},
			Reconnect: true,
		})
	})
}

func TestGatewayFlags(t *testing.T) {
	for _, args := range []string{
		"gateway", // no upstream
		"gateway --upstream http://127.0.0.1:1/mcp -- x", // both
		"gateway --conformance -- x",
		"gateway --upstream-token-env NOPE_NOT_SET_X --upstream http://127.0.0.1:1/mcp",
		"serve -- x", // serve takes no command
	} {
		var out strings.Builder
		if err := run(strings.Fields(args), strings.NewReader(""), &out, &out); err == nil {
			t.Errorf("%q: no error", args)
		}
	}
}

// --upstream is checked before anything is dialled, as call checks --url:
// what is no URL, or a URL of no MCP transport, is refused saying what is
// wanted.
func TestGatewayUpstreamURL(t *testing.T) {
	for args, want := range map[string]string{
		"gateway --upstream ftp://127.0.0.1:1/mcp": `--upstream "ftp://127.0.0.1:1/mcp": the scheme is ftp:// here, want http://, https://, ws://, wss://`,
		"gateway --upstream 127.0.0.1:1":           `--upstream "127.0.0.1:1": want a URL with its scheme (http://, https://, ws://, wss://), such as http://127.0.0.1:1/mcp`,
	} {
		var out strings.Builder
		if err := run(strings.Fields(args), strings.NewReader(""), &out, &out); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error saying %s", args, err, want)
		}
	}
}

// The recipe: `mcp-resume call` prints server-everything's
// long-running tool's progress and result through the gateway, in front of the
// server as a stdio child and as a Streamable HTTP upstream.
func TestGatewayEverythingCall(t *testing.T) {
	path := everything.Path(t)
	for name, args := range map[string]string{
		"stdio child":   "gateway --http 127.0.0.1:0 -- node " + path + " stdio",
		"HTTP upstream": "gateway --http 127.0.0.1:0 --upstream " + everything.StartHTTP(t),
	} {
		t.Run(name, func(t *testing.T) {
			l := spawnNet(t, args, 1)[0]
			var out, errOut strings.Builder
			err := run([]string{"call", "--url", l.URL, "trigger-long-running-operation", "duration=1", "steps=4"}, strings.NewReader(""), &out, &errOut)
			if err != nil || !strings.Contains(out.String(), "Long running operation completed. Duration: 1 seconds, Steps: 4.") {
				t.Fatalf("call: %v; stdout %q; stderr %q", err, out.String(), errOut.String())
			}
			for i := 1; i <= 4; i++ {
				if want := fmt.Sprintf("progress %d/4", i); !strings.Contains(errOut.String(), want) {
					t.Errorf("stderr %q lacks %q", errOut.String(), want)
				}
			}
		})
	}
}

// The gateway's own stdio transport (a real subprocess) in front of
// server-everything: progress and the result.
func TestGatewayEverythingStdio(t *testing.T) {
	c := e2etest.NewClient(t, spawn(t, "gateway --stdio -- node "+everything.Path(t)+" stdio"))
	c.Initialize(`{"resumableRequests":{}}`)
	c.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"trigger-long-running-operation","arguments":{"duration":0.4,"steps":2},"_meta":{"progressToken":"p"}}}`)
	resp, before := c.Response("1")
	progress := 0
	for _, m := range before {
		if m.Method == "notifications/progress" {
			progress++
		}
	}
	if progress != 2 || !strings.Contains(e2etest.Text(resp), "Steps: 2.") {
		t.Fatalf("%d progress, result %s", progress, resp.Raw)
	}
}

// Two gateways on one NATS, each in front of its own server-everything child:
// a long-running call started on A is resumed on B with its progress and
// result; an elicitation of server-everything asked in a call on A is answered
// through B and reaches the upstream's tool on A.
func TestGatewayCluster(t *testing.T) {
	path := everything.Path(t)
	ns := natsInProcess(t)
	args := func(name string) string {
		return "gateway --http 127.0.0.1:0 --nats-url " + ns.ClientURL() + " --instance " + name + " -- node " + path + " stdio"
	}
	a := spawnNet(t, args("a"), 1)[0]
	b := spawnNet(t, args("b"), 1)[0]
	caps := `{"resumableRequests":{},"elicitation":{}}`
	client := func(url string) *e2etest.Client {
		c := e2etest.NewClient(t, httptransport.Dial(url, nil))
		c.Initialize(caps)
		return c
	}

	ca := client(a.URL)
	ca.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"trigger-long-running-operation","arguments":{"duration":0.6,"steps":3},"_meta":{"progressToken":"p1"}}}`)
	p1 := e2etest.PolicyOf(t, ca.Next())
	ca.Close()
	cb := client(b.URL)
	cb.Resume(`1`, p1.ResumeToken)
	resp, before := cb.Response("1")
	progress := 0
	for _, m := range before {
		if m.Method == "notifications/progress" {
			progress++
			if e2etest.Progress(m) != progress {
				t.Fatalf("progress on B: %s, want %d", m.Raw, progress)
			}
		}
	}
	if progress != 3 || !strings.Contains(e2etest.Text(resp), "Steps: 3.") {
		t.Fatalf("resume on B: %d progress, %s", progress, resp.Raw)
	}

	ca = client(a.URL)
	ca.Send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"trigger-elicitation-request","arguments":{}}}`)
	p2 := e2etest.PolicyOf(t, ca.Next())
	ca.Until(func(m e2etest.Msg) bool { return m.Method == "elicitation/create" })
	ca.Close()
	cb.Resume(`2`, p2.ResumeToken)
	asked := cb.Until(func(m e2etest.Msg) bool { return m.Method == "elicitation/create" })
	cb.Send(`{"jsonrpc":"2.0","id":%s,"result":{"action":"accept","content":{"name":"Grace Hopper"}}}`, asked[len(asked)-1].ID)
	resp, _ = cb.Response("2")
	if !strings.Contains(string(resp.Raw), "Grace Hopper") {
		t.Fatalf("elicitation answered through B: %s", resp.Raw)
	}
}

// With --data-dir, a result the upstream returned while its client was away
// survives the gateway's restart (SIGKILL): the client resumes on the new
// process and gets it.
func TestGatewayDataDirRestart(t *testing.T) {
	path := everything.Path(t)
	args := "gateway --http 127.0.0.1:0 --data-dir " + t.TempDir() + " -- node " + path + " stdio"
	first := spawnNet(t, args, 1)[0]
	c := e2etest.NewClient(t, httptransport.Dial(first.URL, nil))
	c.Initialize(`{"resumableRequests":{}}`)
	c.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"trigger-long-running-operation","arguments":{"duration":0.3,"steps":3},"_meta":{"progressToken":"p"}}}`)
	p := e2etest.PolicyOf(t, c.Next())
	c.Close()
	w := e2etest.NewClient(t, httptransport.Dial(first.URL, nil))
	w.Initialize(`{"resumableRequests":{}}`)
	w.WaitStatus("1", p.ResumeToken, func(st e2etest.Status) bool { return st.Status == "completed" })
	first.Kill()
	_ = first.Stop(syscall.SIGKILL)

	second := spawnNet(t, args, 1)[0]
	c = e2etest.NewClient(t, httptransport.Dial(second.URL, nil))
	c.Initialize(`{"resumableRequests":{}}`)
	c.Resume(`1`, p.ResumeToken)
	resp, before := c.Response("1")
	if !strings.Contains(e2etest.Text(resp), "Steps: 3.") {
		t.Fatalf("after the restart: %s", resp.Raw)
	}
	progress := 0
	for _, m := range before {
		if m.Method == "notifications/progress" {
			progress++
		}
	}
	if progress != 3 {
		t.Fatalf("%d progress notifications replayed, want the 3 the client never got", progress)
	}
}

// An HTTP upstream that wants a bearer token (here mcp-resume serve
// --api-keys): without --upstream-token-env the gateway does not start and says
// why; with it, calls go through.
func TestGatewayUpstreamToken(t *testing.T) {
	const key = "gateway-test-key-0123456789abcdef"
	keys := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(keys, []byte("gw:"+key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	up := spawnNet(t, "serve --http 127.0.0.1:0 --api-keys "+keys, 1)[0]

	var out strings.Builder
	err := run([]string{"gateway", "--http", "127.0.0.1:0", "--upstream", up.URL}, strings.NewReader(""), &out, &out)
	if err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("gateway without the upstream's token: %v, want a 401", err)
	}

	t.Setenv("MR_TEST_UPSTREAM_TOKEN", key)
	gw := spawnNet(t, "gateway --http 127.0.0.1:0 --upstream "+up.URL+" --upstream-token-env MR_TEST_UPSTREAM_TOKEN", 1)[0]
	var stdout, stderr strings.Builder
	if err := run([]string{"call", "--url", gw.URL, "countdown", "seconds=0.3", "steps=3"}, strings.NewReader(""), &stdout, &stderr); err != nil ||
		!strings.Contains(stdout.String(), "countdown done: 3 of 3 steps") {
		t.Fatalf("call through the gateway: %v; %q %q", err, stdout.String(), stderr.String())
	}
}

// The remote behind `gateway --upstream URL` is killed (SIGKILL) mid-call and
// started again on its data directory and address: the gateway's call, which
// the remote made resumable, is resumed on a new session once the remote is
// back; the remote runs it again (its tool is --restartable), and the client
// gets the result, with progress that only increases (the new run's 1 and 2
// are not passed on again). The next call through the same gateway works.
func TestGatewayUpstreamRestart(t *testing.T) {
	addr := freeAddr(t)
	remote := "serve --http " + addr + " --data-dir " + t.TempDir() + " --restartable countdown"
	first := spawnNet(t, remote, 1)[0]
	c := e2etest.NewClient(t, spawn(t, "gateway --stdio --upstream "+first.URL))
	c.Initialize(`{}`)
	c.Send(`{"jsonrpc":"2.0","id":"r","method":"tools/call","params":{"name":"countdown","arguments":{"seconds":2,"steps":4},"_meta":{"progressToken":"pr"}}}`)
	var seen []int
	c.Until(func(m e2etest.Msg) bool {
		if m.Method == "notifications/progress" {
			seen = append(seen, e2etest.Progress(m))
		}
		return len(seen) == 2
	})
	first.Kill()
	_ = first.Stop(syscall.SIGKILL)
	spawnNet(t, remote, 1)

	resp, before := c.Response(`"r"`)
	if e2etest.Text(resp) != "countdown done: 4 of 4 steps" {
		t.Fatalf("the call across the remote's restart: %s", resp.Raw)
	}
	for _, m := range before {
		if m.Method == "notifications/progress" {
			seen = append(seen, e2etest.Progress(m))
		}
	}
	if fmt.Sprint(seen) != "[1 2 3 4]" {
		t.Errorf("progress across the restart: %v, want 1 to 4, each once", seen)
	}
	c.Send(`{"jsonrpc":"2.0","id":"e","method":"tools/call","params":{"name":"echo","arguments":{"text":"after"}}}`)
	if m, _ := c.Response(`"e"`); e2etest.Text(m) != "after" {
		t.Fatalf("the next call: %s", m.Raw)
	}
}

// freeAddr is a loopback address whose port is free now, for a server that
// must come back on the same address (package freeport: a port no outgoing
// connection takes in between).
func freeAddr(t *testing.T) string {
	t.Helper()
	addr, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// The shared end-to-end suite through `mcp-resume connect URL` (its stdio
// face) in front of `mcp-resume serve` over Streamable HTTP.
func TestConnectEndToEnd(t *testing.T) {
	t.Parallel() // a subprocess's test, mostly waiting: beside the package's others
	remote := spawnNet(t, "serve --http 127.0.0.1:0", 1)[0]
	for name, url := range map[string]string{"HTTP": remote.URL, "WebSocket": remote.WS} {
		t.Run(name, func(t *testing.T) {
			e2etest.Run(t, e2etest.Harness{
				Dial: func(t testing.TB) transport.Conn { return spawn(t, "connect "+url) },
			})
		})
	}
}

// connect wants one http(s) or ws(s) URL and well-formed headers, and says so.
func TestConnectFlags(t *testing.T) {
	for args, want := range map[string]string{
		"connect":                                          "want the remote's URL",
		"connect ftp://127.0.0.1:1/mcp":                    "http(s):// (Streamable HTTP) or ws(s)://",
		"connect http://a/mcp http://b/mcp":                "want the remote's URL",
		"connect --header NoColon http://a/mcp":            "want Name: value",
		"connect --header X-Key:${MR_TEST_UNSET_X} ws://a": "MR_TEST_UNSET_X} is not set",
	} {
		var out, errw strings.Builder
		err := run(strings.Fields(args), nil, &out, &errw)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error saying %q", args, err, want)
		}
	}
}

// A remote that wants an API key: connect presents it from --header (the
// value's ${VAR} read from the environment), from --token-env, or from
// MCP_RESUME_API_KEY as call does; over HTTP and WebSocket alike.
func TestConnectCredentials(t *testing.T) {
	const key = "connect-test-key-0123456789abcdef"
	keys := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(keys, []byte("laptop:"+key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	remote := spawnNet(t, "serve --http 127.0.0.1:0 --api-keys "+keys, 1)[0]
	t.Setenv("MR_TEST_REMOTE_KEY", key)
	t.Setenv("MR_TEST_REMOTE_AUTH", "Bearer "+key)
	for _, url := range []string{remote.URL, remote.WS} {
		for _, args := range []string{
			"connect --header Authorization:${MR_TEST_REMOTE_AUTH} " + url,
			"connect --token-env MR_TEST_REMOTE_KEY " + url,
			"connect " + url + " MCP_RESUME_API_KEY",
		} {
			t.Run(args, func(t *testing.T) {
				if rest, ok := strings.CutSuffix(args, " "+envClientKey); ok {
					args = rest
					t.Setenv(envClientKey, key)
				}
				c := e2etest.NewClient(t, spawn(t, args))
				c.Initialize(`{}`)
				c.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"key"}}}`)
				if resp, _ := c.Response("1"); e2etest.Text(resp) != "key" {
					t.Fatalf("echo through connect: %s", resp.Raw)
				}
			})
		}
	}
}

// connect's stdio face, ten calls at once while every connection to the
// remote is cut 300-1500 ms after it opened (interop/connect.mjs's first
// scene, in Go).
func TestConnectCutsExact(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	remote := spawnNet(t, "serve --http 127.0.0.1:0 --data-dir "+t.TempDir()+" --restartable countdown", 1)[0]
	p := faultproxy.NewTimed(t, strings.TrimSuffix(strings.TrimPrefix(remote.URL, "http://"), "/mcp"), 300*time.Millisecond, 1500*time.Millisecond)
	c := e2etest.NewClient(t, spawn(t, "connect http://"+p.Addr()+"/mcp"))
	c.Initialize(`{}`)
	c.Countdowns(10, 3, 10)
}

// Two calls that ask their client a question at the same time, through the
// gateway in front of `serve --stdio`: the gateway calls its stdio child in the
// 2026-07-28 era, where each question is its own call's answer, so each reaches
// the client and each answer its call (in the 2025 era a stdio child's question
// names no call, and with two running it was refused, unattributed_request).
func TestGatewayQuestionsOfConcurrentCalls(t *testing.T) {
	c := e2etest.NewClient(t, spawn(t, "gateway --stdio -- "+os.Args[0]))
	c.Initialize(`{"elicitation":{}}`)
	c.Send(`{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"ask","arguments":{"question":"a?"}}}`)
	c.Send(`{"jsonrpc":"2.0","id":"b","method":"tools/call","params":{"name":"ask","arguments":{"question":"b?"}}}`)
	results := map[string]string{}
	for len(results) < 2 {
		m := c.Next()
		switch {
		case m.Method == "elicitation/create":
			var p struct{ Message string }
			if err := json.Unmarshal(m.Params, &p); err != nil {
				t.Fatalf("an elicitation: %s", m.Raw)
			}
			c.Send(`{"jsonrpc":"2.0","id":%s,"result":{"action":"accept","content":{"answer":%q}}}`, m.ID, "answer to "+p.Message)
		case m.Method == "":
			results[string(m.ID)] = e2etest.Text(m)
		}
	}
	if results[`"a"`] != "answer: answer to a?" || results[`"b"`] != "answer: answer to b?" {
		t.Fatalf("results %q, want each call its own answer", results)
	}
}

// gatewayOnFixtures is a client of `gateway --stdio` in front of a child that
// speaks 2026-07-28: `serve --conformance --stdio`, the fixture set.
func gatewayOnFixtures(t *testing.T) *e2etest.Client {
	t.Helper()
	t.Setenv("MCP_RESUME_TEST_UPSTREAM", "serve --conformance --stdio")
	return e2etest.NewClient(t, spawn(t, "gateway --stdio -- "+os.Args[0]))
}

// A tool's log messages through the gateway in front of a child that speaks
// 2026-07-28 (`serve --conformance --stdio`, its test_logging_tool logs three
// at info): a 2025 client gets them at its session's level, a 2026 client at
// the level its request names, and none when it names none.
func TestGatewayLogLevels(t *testing.T) {
	c := gatewayOnFixtures(t)
	logs := func(id string) int {
		t.Helper()
		resp, before := c.Response(id)
		if resp.Error != nil {
			t.Fatalf("the call: %s", resp.Raw)
		}
		n := 0
		for _, m := range before {
			if m.Method == "notifications/message" {
				n++
			}
		}
		return n
	}
	c.Initialize(`{}`)
	c.Send(`{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"test_logging_tool","arguments":{}}}`)
	if n := logs(`"a"`); n != 3 {
		t.Errorf("a 2025 client got %d log messages, want 3", n)
	}
	const call = `"name":"test_logging_tool","arguments":{}`
	c.Modern(`"b"`, "tools/call", call, `{}`)
	if n := logs(`"b"`); n != 0 {
		t.Errorf("a 2026 request that named no log level got %d log messages, want none", n)
	}
	c.Modern(`"c"`, "tools/call", call, `{}`, fmt.Sprintf(`%q:"info"`, spec.MetaLogLevel))
	if n := logs(`"c"`); n != 3 {
		t.Errorf("a 2026 request at level info got %d log messages, want 3", n)
	}
}

// A result through the gateway in front of a child that speaks 2026-07-28
// carries the _meta of the era its own client speaks: the child's serverInfo
// stays with the child (a 2025 result names none; a 2026 one names the
// gateway's, given by the gateway's core).
func TestGatewayResultMeta(t *testing.T) {
	c := gatewayOnFixtures(t)
	serverInfo := func(id string) int {
		t.Helper()
		resp, _ := c.Response(id)
		if resp.Error != nil {
			t.Fatalf("the call: %s", resp.Raw)
		}
		return strings.Count(string(resp.Raw), "io.modelcontextprotocol/serverInfo")
	}
	c.Initialize(`{}`)
	c.Send(`{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"test_simple_text","arguments":{}}}`)
	if n := serverInfo(`"a"`); n != 0 {
		t.Errorf("a 2025 result names a serverInfo %d times, want none", n)
	}
	c.Modern(`"b"`, "tools/call", `"name":"test_simple_text","arguments":{}`, `{}`)
	if n := serverInfo(`"b"`); n != 1 {
		t.Errorf("a 2026 result names a serverInfo %d times, want once", n)
	}
}

// A task-required tool that asks first and becomes a task on its final round
// (SEP-2663; the conformance fixture test_tool_with_task), through the gateway
// in front of a child that speaks 2026-07-28: the question is the call's
// input_required answer, with no task; the retry with the answer is answered
// with the gateway's CreateTaskResult (no requestState); the task ends with
// the child's result, which has the answer.
func TestGatewayTaskAfterQuestions(t *testing.T) {
	c := gatewayOnFixtures(t)
	caps := fmt.Sprintf(`{"elicitation":{},"extensions":{%q:{}}}`, spec.ExtensionTasks)
	const call = `"name":"test_tool_with_task","arguments":{}`
	c.Modern(`"r1"`, "tools/call", call, caps)
	m, _ := c.Response(`"r1"`)
	var ir e2etest.InputRequired
	if m.Error != nil || json.Unmarshal(m.Result, &ir) != nil || ir.ResultType != "input_required" || len(ir.InputRequests) != 1 || strings.Contains(string(m.Result), "taskId") {
		t.Fatalf("round 1: %s, want input_required with one question and no task", m.Raw)
	}
	var key string
	for k := range ir.InputRequests {
		key = k
	}
	c.Modern(`"r2"`, "tools/call", fmt.Sprintf(`%s,"inputResponses":{%q:{"action":"accept","content":{"name":"Alice"}}},"requestState":%q`, call, key, ir.RequestState), caps)
	m, _ = c.Response(`"r2"`)
	var created struct {
		ResultType   string  `json:"resultType"`
		TaskID       string  `json:"taskId"`
		RequestState *string `json:"requestState"`
	}
	if m.Error != nil || json.Unmarshal(m.Result, &created) != nil || created.ResultType != "task" || created.TaskID == "" || created.RequestState != nil {
		t.Fatalf("round 2: %s, want a CreateTaskResult without requestState", m.Raw)
	}
	n := 0
	poll.Until(t, 30*time.Second, "the task to complete", func() bool {
		n++
		id := fmt.Sprintf(`"get-%d"`, n)
		c.Modern(id, "tasks/get", fmt.Sprintf(`"taskId":%q`, created.TaskID), caps)
		m, _ := c.Response(id)
		var task struct {
			Status string          `json:"status"`
			Result json.RawMessage `json:"result"`
		}
		if m.Error != nil || json.Unmarshal(m.Result, &task) != nil {
			t.Fatalf("tasks/get: %s", m.Raw)
		}
		if task.Status == "completed" {
			if !strings.Contains(string(task.Result), "Alice") {
				t.Fatalf("the task's result %s, want the answer in it", task.Result)
			}
			return true
		}
		if task.Status != "working" {
			t.Fatalf("task %s, want it working, then completed", m.Result)
		}
		return false
	})
}

// connect started before its remote: it says so once and tries again; once
// the remote is up, the local client's initialize (sent meanwhile) is
// answered and calls work.
func TestConnectWaitsForRemote(t *testing.T) {
	t.Parallel() // a subprocess's test, mostly waiting: beside the package's others
	addr := freeAddr(t)
	cmd := self("connect http://" + addr + "/mcp")
	stdin, stdout := stdioPipes(t, cmd)
	var stderr logbuf.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	conn := &procConn{Conn: stdio.New(stdout, stdin, nil), cmd: cmd}
	t.Cleanup(func() { _ = conn.Close() })
	const said = "connect: the remote is not reachable; trying again"
	poll.Until(t, 20*time.Second, "connect to say it waits", func() bool { return strings.Contains(stderr.String(), said) })
	c := e2etest.NewClient(t, conn)
	c.Send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	spawnNet(t, "serve --http "+addr, 1)
	if m, _ := c.Response(`"init"`); m.Error != nil {
		t.Fatalf("initialize: %s", m.Raw)
	}
	c.Send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	c.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"up"}}}`)
	if resp, _ := c.Response("1"); e2etest.Text(resp) != "up" {
		t.Fatalf("echo: %s", resp.Raw)
	}
	if n := strings.Count(stderr.String(), said); n != 1 {
		t.Fatalf("said %d times that it waits, want once:\n%s", n, stderr.String())
	}
}

// A remote that refuses connect (no credentials) ends it at once, with an
// error about the remote (not "the gateway") that says where credentials go.
func TestConnectRefusedAtStart(t *testing.T) {
	t.Setenv(envClientKey, "")
	keys := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(keys, []byte("laptop:connect-test-key-0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	remote := spawnNet(t, "serve --http 127.0.0.1:0 --api-keys "+keys, 1)[0]
	err := run([]string{"connect", remote.URL}, strings.NewReader(""), io.Discard, io.Discard)
	if err == nil {
		t.Fatal("connect without credentials: no error")
	}
	for _, want := range []string{"connect: the remote " + remote.URL, "401", "hint: the server wants credentials", "--token-env"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q, want it to say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "gateway") || strings.Contains(err.Error(), "upstream") {
		t.Errorf("error %q speaks of the gateway", err)
	}
}

// The gateway binds its listeners before it starts its child: with its port
// taken it says so, and the child never starts. Its page at / names its
// endpoints; it is not the demo page, whose buttons call the demo tools.
func TestGatewayStartUp(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	marker := filepath.Join(t.TempDir(), "child-started")
	err = run([]string{"gateway", "--http", taken.Addr().String(), "--", "sh", "-c", `touch "$0"; exec sleep 30`, marker}, nil, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--http "+taken.Addr().String()) || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("gateway on a taken port: %v, want an error naming --http and the address in use", err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the child was started before the listener was bound")
	}

	ls := spawnNet(t, "gateway --http 127.0.0.1:0 -- "+os.Args[0], 2)
	if ls[0].URL == "" {
		ls[0], ls[1] = ls[1], ls[0]
	}
	resp, err := http.Get(strings.TrimSuffix(ls[0].URL, "/mcp") + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "Streamable HTTP at /mcp") || strings.Contains(string(b), "countdown") {
		t.Fatalf("the gateway's page: %s %q", resp.Status, b)
	}
}

// Deferred answers end to end (e2etest.RunDeferral), both eras: the binary on
// stdio, Streamable HTTP and WebSocket with --answer-within, the gateway in
// front of serve --stdio, and connect (--answer-within) in front of serve.
func TestDeferralEndToEnd(t *testing.T) {
	t.Parallel() // subprocesses, mostly waiting: beside the package's others
	within := "--answer-within " + e2etest.DeferralWithin.String()
	t.Run("stdio", func(t *testing.T) {
		e2etest.RunDeferral(t, e2etest.Harness{Dial: func(t testing.TB) transport.Conn { return spawn(t, "serve --stdio "+within) }})
	})
	ls := spawnNet(t, "serve --http 127.0.0.1:0 "+within, 1)
	t.Run("http", func(t *testing.T) {
		e2etest.RunDeferral(t, e2etest.Harness{Reconnect: true, Dial: func(t testing.TB) transport.Conn {
			c := httptransport.Dial(ls[0].URL, nil)
			t.Cleanup(func() { _ = c.Close() })
			return c
		}})
	})
	t.Run("ws", func(t *testing.T) {
		e2etest.RunDeferral(t, e2etest.Harness{Reconnect: true, Dial: func(t testing.TB) transport.Conn {
			c, err := ws.Dial(t.Context(), ls[0].WS, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Close() })
			return c
		}})
	})
	t.Run("gateway", func(t *testing.T) {
		e2etest.RunDeferral(t, e2etest.Harness{Dial: func(t testing.TB) transport.Conn { return spawn(t, "gateway --stdio "+within+" -- "+os.Args[0]) }})
	})
	remote := spawnNet(t, "serve --http 127.0.0.1:0", 1)[0]
	t.Run("connect", func(t *testing.T) {
		e2etest.RunDeferral(t, e2etest.Harness{Dial: func(t testing.TB) transport.Conn { return spawn(t, "connect "+within+" "+remote.URL) }})
	})
}

// A deferred call's handle after a kill -9 of serve --data-dir and its restart
// on the same data: a call that finished before the kill gives its result; a
// running restartable one runs again and gives the rerun's; a running one that
// is not restartable is a tool error, server_restarted.
func TestDeferralSurvivesKill(t *testing.T) {
	t.Parallel() // subprocesses, mostly waiting
	dir, addr := t.TempDir(), freeAddr(t)
	args := "serve --http " + addr + " --data-dir " + dir + " --answer-within 300ms --restartable countdown"
	first := spawnNet(t, args, 1)[0]
	dial := func(url string) *e2etest.Client {
		conn := httptransport.Dial(url, nil)
		t.Cleanup(func() { _ = conn.Close() })
		c := e2etest.NewClient(t, conn)
		c.Initialize(`{}`)
		return c
	}
	deferredCall := func(c *e2etest.Client, id, tool, args string) (string, string) {
		t.Helper()
		c.Send(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, tool, args)
		resp, _ := c.Response(id)
		var r struct {
			Meta map[string]struct {
				Tool      string          `json:"tool"`
				Arguments json.RawMessage `json:"arguments"`
			} `json:"_meta"`
		}
		_ = json.Unmarshal(resp.Result, &r)
		d, ok := r.Meta[spec.MetaDeferred]
		if !ok {
			t.Fatalf("%s: %s, want a deferred answer", tool, resp.Raw)
		}
		return d.Tool, string(d.Arguments)
	}
	c := dial(first.URL)
	tool, finished := deferredCall(c, `"f"`, "countdown", `{"seconds":0.6,"steps":2}`)
	_, rerun := deferredCall(c, `"r"`, "countdown", `{"seconds":1.5,"steps":3}`)
	_, lost := deferredCall(c, `"l"`, "ask", `{"delay":30}`)
	scrapeUntil(t, "127.0.0.1", strings.TrimSuffix(first.URL, "/mcp")+"/metrics", `mcp_resume_requests{state="completed"} 1`)
	first.Kill()

	second := spawnNet(t, args, 1)[0]
	c = dial(second.URL)
	await := func(id, args string) e2etest.Msg {
		for i := 0; ; i++ {
			cid := fmt.Sprintf(`"%s%d"`, id, i)
			c.Send(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, cid, tool, args)
			resp, _ := c.Response(cid)
			if !strings.Contains(string(resp.Raw), spec.MetaDeferred) || i > 20 {
				return resp
			}
		}
	}
	if resp := await("f", finished); e2etest.Text(resp) != "countdown done: 2 of 2 steps" {
		t.Errorf("the call that finished before the kill: %s", resp.Raw)
	}
	if resp := await("r", rerun); e2etest.Text(resp) != "countdown done: 3 of 3 steps" {
		t.Errorf("the restartable call running at the kill: %s", resp.Raw)
	}
	if resp := await("l", lost); !strings.Contains(string(resp.Raw), `"isError":true`) || !strings.Contains(string(resp.Raw), string(spec.ReasonServerRestarted)) {
		t.Errorf("the call running at the kill, not restartable: %s, want server_restarted", resp.Raw)
	}
}
