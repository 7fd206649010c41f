package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"github.com/mcp-resume/mcp-resume/gateway"
	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/mcp/e2etest"
	"github.com/mcp-resume/mcp-resume/spec"
	"github.com/mcp-resume/mcp-resume/testkit/everything"
	"github.com/mcp-resume/mcp-resume/testkit/faultproxy"
	"github.com/mcp-resume/mcp-resume/testkit/poll"
	"github.com/mcp-resume/mcp-resume/transport"
	httptransport "github.com/mcp-resume/mcp-resume/transport/http"
	"github.com/mcp-resume/mcp-resume/transport/ws"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		serveChild() // this binary started again as an upstream of a test
		return
	}
	// This binary's children (it, started again) exit without the race
	// runtime's second of sleep at exit (atexit_sleep_ms, 1000 by default).
	_ = os.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	goleak.VerifyTestMain(m)
}

// rig is a gateway in front of an upstream, behind the core, on Streamable HTTP
// (/mcp) and WebSocket (/ws) over loopback.
type rig struct {
	g    *gateway.Gateway
	core *mcp.Server
	srv  *httptest.Server
}

func newRig(t testing.TB, opts gateway.Options) *rig {
	t.Helper()
	return newRigWith(t, opts, &mcp.Options{DefaultPolicy: mcp.Policy{Mode: mcp.Always, Task: mcp.AsTask}})
}

// newRigWith is newRig with the core's options.
func newRigWith(t testing.TB, opts gateway.Options, coreOpts *mcp.Options) *rig {
	t.Helper()
	if testing.Verbose() {
		opts.Stderr = os.Stderr
		log := zerolog.New(os.Stderr).Level(zerolog.DebugLevel)
		opts.Logger = &log
	}
	g, err := gateway.New(t.Context(), &opts)
	if err != nil {
		t.Fatal(err)
	}
	// As the binary runs it: a tool's call waits for its upstream with no
	// goroutine of its own (mcp.Later).
	var o mcp.Options
	if coreOpts != nil {
		o = *coreOpts
	}
	o.DetachTools = true
	core, err := mcp.New(g.Server(), &o)
	if err != nil {
		t.Fatal(err)
	}
	h := httptransport.NewHandler(core, nil)
	wh := ws.NewHandler(core, nil)
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	mux.Handle("/ws", wh)
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		h.Close()
		wh.Close()
		srv.Close()
		core.Close()
		_ = g.Close()
	})
	return &rig{g: g, core: core, srv: srv}
}

// stdioUpstream runs server-everything as a stdio child; with pidFile, the
// child's pid is written there (for a test that kills it).
func stdioUpstream(t testing.TB, pidFile string) gateway.Options {
	path := everything.Path(t)
	if pidFile == "" {
		return gateway.Options{Command: []string{"node", path, "stdio"}}
	}
	return gateway.Options{Command: []string{"sh", "-c", `echo $$ > "$0"; exec node "$1" stdio`, pidFile, path}}
}

func (r *rig) dialHTTP(t testing.TB) transport.Conn {
	c := httptransport.Dial(r.srv.URL+"/mcp", nil)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func (r *rig) dialWS(t testing.TB) transport.Conn {
	c, err := ws.Dial(t.Context(), "ws"+strings.TrimPrefix(r.srv.URL, "http")+"/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

const longRunning = "trigger-long-running-operation"

// progressOf returns the progress values among msgs.
func progressOf(msgs []e2etest.Msg) []int {
	var out []int
	for _, m := range msgs {
		if m.Method == "notifications/progress" {
			out = append(out, e2etest.Progress(m))
		}
	}
	return out
}

func checkLongRun(t *testing.T, c *e2etest.Client, id string, steps int) {
	t.Helper()
	c.Send(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":%q,"arguments":{"duration":0.4,"steps":%d},"_meta":{"progressToken":%s}}}`, id, longRunning, steps, id)
	resp, before := c.Response(id)
	if want := fmt.Sprintf("Steps: %d", steps); !strings.Contains(e2etest.Text(resp), want) {
		t.Fatalf("result %s, want one with %q", resp.Raw, want)
	}
	got := progressOf(before)
	if len(got) != steps {
		t.Fatalf("progress %v, want 1..%d", got, steps)
	}
	for i, v := range got {
		if v != i+1 {
			t.Fatalf("progress %v, want 1..%d in order", got, steps)
		}
	}
}

// server-everything's long-running tool through the gateway (its stdio child),
// on HTTP and WebSocket: every progress notification, in order, and the result.
func TestEverythingLongRunning(t *testing.T) {
	r := newRig(t, stdioUpstream(t, ""))
	for name, dial := range map[string]func(testing.TB) transport.Conn{"http": r.dialHTTP, "ws": r.dialWS} {
		t.Run(name, func(t *testing.T) {
			c := e2etest.NewClient(t, dial(t))
			c.Initialize(`{"resumableRequests":{}}`)
			checkLongRun(t, c, `"a"`, 4)
		})
	}
}

// The same through a Streamable HTTP upstream: server-everything's own
// streamableHttp transport.
func TestEverythingHTTPUpstream(t *testing.T) {
	url := everything.StartHTTP(t)
	r := newRig(t, gateway.Options{URL: url})
	c := e2etest.NewClient(t, r.dialWS(t))
	c.Initialize(`{"resumableRequests":{}}`)
	checkLongRun(t, c, `"a"`, 4)
	c.Send(`{"jsonrpc":"2.0","id":"e","method":"tools/call","params":{"name":"echo","arguments":{"message":"hi"}}}`)
	if resp, _ := c.Response(`"e"`); !strings.Contains(e2etest.Text(resp), "hi") {
		t.Fatalf("echo: %s", resp.Raw)
	}
}

// 50 concurrent long-running calls of server-everything through the gateway,
// their client connections (WebSocket, then Streamable HTTP) cut at random
// points several times each, each resumed on a new connection with the ack
// extension: every result, and every progress value exactly once and in order.
func TestEverythingCuts(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	r := newRig(t, stdioUpstream(t, ""))
	// server-everything's initialize result (its instructions) is about 2 KB:
	// each connection may carry that, then 300 to 1,500 bytes more.
	c := e2etest.NewClient(t, r.dialWS(t))
	init := len(c.Initialize(`{}`).Raw)
	c.Close()
	p := faultproxy.New(t, r.srv.Listener.Addr().String(), init+300, init+1500)
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	for _, tc := range []struct {
		name  string
		steps int // enough that each call's stream is cut at least twice
		dial  func(context.Context) (transport.Conn, error)
	}{
		{"ws", 20, func(ctx context.Context) (transport.Conn, error) {
			return ws.Dial(ctx, "ws://"+p.Addr()+"/ws", &ws.DialOptions{Options: ws.Options{CloseTimeout: 100 * time.Millisecond}})
		}},
		// Over HTTP the requests of a call share the budget of the connections
		// they go on (keep-alive): twice the steps.
		{"http", 40, func(context.Context) (transport.Conn, error) {
			return httptransport.Dial("http://"+p.Addr()+"/mcp", &httptransport.ClientOptions{Client: hc, FailOnStreamLoss: true}), nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const calls = 50
			steps, dial := tc.steps, tc.dial
			reconnects := make([]int, calls)
			var wg sync.WaitGroup
			for i := range calls {
				wg.Go(func() {
					call := &faultproxy.Call{N: i, Steps: steps, Tool: longRunning,
						Args: fmt.Sprintf(`{"duration":2,"steps":%d}`, steps), Want: fmt.Sprintf("Steps: %d.", steps)}
					if err := faultproxy.Drive(dial, call, &reconnects[i], 100); err != nil {
						t.Errorf("call %d: %v", i, err)
					}
				})
			}
			wg.Wait()
			faultproxy.CheckReconnects(t, p, reconnects)
		})
	}
}

// server-everything's elicitation and sampling tools through the gateway: the
// question reaches the client, which goes away before answering; it resumes on a
// new connection, gets the question again, answers, and the upstream's tool
// finishes with the answer.
func TestEverythingQuestionsAfterResume(t *testing.T) {
	r := newRig(t, stdioUpstream(t, ""))
	for _, tc := range []struct {
		tool, args, method, answer, want string
	}{
		{"trigger-elicitation-request", `{}`, "elicitation/create",
			`{"action":"accept","content":{"name":"Ada Lovelace"}}`, "Ada Lovelace"},
		{"trigger-sampling-request", `{"prompt":"hello","maxTokens":50}`, "sampling/createMessage",
			`{"role":"assistant","content":{"type":"text","text":"sampled reply"},"model":"test-model"}`, "sampled reply"},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			caps := `{"resumableRequests":{},"elicitation":{},"sampling":{}}`
			c := e2etest.NewClient(t, r.dialWS(t))
			c.Initialize(caps)
			c.Send(`{"jsonrpc":"2.0","id":"q","method":"tools/call","params":{"name":%q,"arguments":%s}}`, tc.tool, tc.args)
			var token string
			c.Until(func(m e2etest.Msg) bool {
				if m.Method == spec.MethodResumePolicy {
					token = e2etest.PolicyOf(t, m).ResumeToken
				}
				return m.Method == tc.method
			})
			c.Close() // gone before answering

			c2 := e2etest.NewClient(t, r.dialHTTP(t))
			c2.Initialize(caps)
			c2.Resume(`"q"`, token)
			asked := c2.Until(func(m e2etest.Msg) bool { return m.Method == tc.method })
			q := asked[len(asked)-1]
			c2.Send(`{"jsonrpc":"2.0","id":%s,"result":%s}`, q.ID, tc.answer)
			resp, _ := c2.Response(`"q"`)
			if !strings.Contains(string(resp.Raw), tc.want) {
				t.Fatalf("result %s, want one with %q", resp.Raw, tc.want)
			}
		})
	}
}

// The upstream child killed mid-call: the call ends with upstream_lost, the
// gateway starts the upstream again, and the next call works.
func TestUpstreamKilled(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	r := newRig(t, stdioUpstream(t, pidFile))
	c := e2etest.NewClient(t, r.dialWS(t))
	c.Initialize(`{"resumableRequests":{}}`)
	c.Send(`{"jsonrpc":"2.0","id":"k","method":"tools/call","params":{"name":%q,"arguments":{"duration":30,"steps":30},"_meta":{"progressToken":"pk"}}}`, longRunning)
	c.Until(func(m e2etest.Msg) bool { return m.Method == "notifications/progress" })
	killPidFile(t, pidFile)
	resp, _ := c.Response(`"k"`)
	if resp.Error == nil || resp.Error.Reason != gateway.ReasonUpstreamLost {
		t.Fatalf("the killed call answered %s, want an error with reason %s", resp.Raw, gateway.ReasonUpstreamLost)
	}
	checkLongRun(t, c, `"after"`, 2)
	if n := r.g.Connections(); n != 2 {
		t.Fatalf("%d upstream connections, want 2 (the first, and the one after the kill)", n)
	}
}

// A restartable tool's call survives its upstream's death: it runs again on the
// next one and its client gets the result.
func TestUpstreamKilledRestartable(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	opts := stdioUpstream(t, pidFile)
	opts.Restartable = func(tool string) bool { return tool == longRunning }
	r := newRig(t, opts)
	c := e2etest.NewClient(t, r.dialHTTP(t))
	c.Initialize(`{"resumableRequests":{}}`)
	c.Send(`{"jsonrpc":"2.0","id":"k","method":"tools/call","params":{"name":%q,"arguments":{"duration":1,"steps":4},"_meta":{"progressToken":"pk"}}}`, longRunning)
	c.Until(func(m e2etest.Msg) bool { return m.Method == "notifications/progress" })
	killPidFile(t, pidFile)
	resp, _ := c.Response(`"k"`)
	if !strings.Contains(e2etest.Text(resp), "Steps: 4") {
		t.Fatalf("the restartable call answered %s, want its result", resp.Raw)
	}
}

func killPidFile(t *testing.T, pidFile string) {
	t.Helper()
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
}

// An HTTP upstream's event stream of a call breaks after its first progress
// notification (the response body of the tools/call POST ends there, as when
// a connection drops): the gateway takes it up with a GET carrying the last
// event id, and the client gets every progress notification once and the
// result. (server-everything's example event store hands the SDK an event id
// where it wants a stream id, so a taken-up stream gets the events stored so
// far and nothing after: the gateway closes it after StreamIdle of silence and
// takes it up again, which replays the rest.)
func TestHTTPUpstreamStreamTakenUp(t *testing.T) {
	url := everything.StartHTTP(t)
	cut := &cutter{base: http.DefaultTransport}
	r := newRig(t, gateway.Options{URL: url, Client: &http.Client{Transport: cut}, StreamIdle: time.Second})
	c := e2etest.NewClient(t, r.dialWS(t))
	c.Initialize(`{"resumableRequests":{}}`)
	checkLongRun(t, c, `"a"`, 4)
	if cut.cuts.Load() != 1 || cut.resumes.Load() == 0 {
		t.Fatalf("%d streams cut, %d GETs with Last-Event-ID; want 1 and at least 1", cut.cuts.Load(), cut.resumes.Load())
	}
}

// cutter ends the response body of the first tools/call POST right after its
// first event that carries progress, and counts the GETs with Last-Event-ID.
type cutter struct {
	base          http.RoundTripper
	cuts, resumes atomic.Int32
}

func (c *cutter) RoundTrip(r *http.Request) (*http.Response, error) {
	var body []byte
	if r.Body != nil {
		body, _ = io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	if r.Method == http.MethodGet && r.Header.Get("Last-Event-ID") != "" {
		c.resumes.Add(1)
	}
	resp, err := c.base.RoundTrip(r)
	if err != nil || !bytes.Contains(body, []byte(`"tools/call"`)) || !c.cuts.CompareAndSwap(0, 1) {
		return resp, err
	}
	resp.Body = &cutBody{ReadCloser: resp.Body}
	return resp, nil
}

// cutBody passes an SSE body on up to the end of the first event with
// "progress" in it, then ends as a dropped connection does.
type cutBody struct {
	io.ReadCloser
	buf  bytes.Buffer
	done bool
}

func (b *cutBody) Read(p []byte) (int, error) {
	if b.done {
		return 0, io.ErrUnexpectedEOF
	}
	n, err := b.ReadCloser.Read(p)
	b.buf.Write(p[:n])
	if i := bytes.Index(b.buf.Bytes(), []byte(`"progress"`)); i >= 0 {
		if j := bytes.Index(b.buf.Bytes()[i:], []byte("\n\n")); j >= 0 {
			keep := n - (b.buf.Len() - (i + j + 2))
			b.done = true
			return keep, nil
		}
	}
	return n, err
}

// server-everything's resources, prompts and completions through the gateway,
// as the upstream gives them.
func TestEverythingResourcesPromptsCompletions(t *testing.T) {
	r := newRig(t, stdioUpstream(t, ""))
	c := e2etest.NewClient(t, r.dialHTTP(t))
	c.Initialize(`{}`)
	ask := func(id, method, params string) e2etest.Msg {
		t.Helper()
		c.Send(`{"jsonrpc":"2.0","id":%q,"method":%q,"params":%s}`, id, method, params)
		m, _ := c.Response(strconv.Quote(id))
		if m.Error != nil {
			t.Fatalf("%s: %s", method, m.Raw)
		}
		return m
	}
	list := ask("rl", "resources/list", `{}`)
	var resources struct {
		Resources []struct {
			URI string `json:"uri"`
		} `json:"resources"`
	}
	if err := json.Unmarshal(list.Result, &resources); err != nil || len(resources.Resources) == 0 {
		t.Fatalf("resources/list: %s", list.Raw)
	}
	uri := resources.Resources[0].URI
	if m := ask("rr", "resources/read", fmt.Sprintf(`{"uri":%q}`, uri)); !strings.Contains(string(m.Result), uri) {
		t.Fatalf("resources/read %s: %s", uri, m.Raw)
	}
	if m := ask("rt", "resources/templates/list", `{}`); !strings.Contains(string(m.Result), "demo://resource/dynamic/text/{resourceId}") {
		t.Fatalf("resources/templates/list: %s", m.Raw)
	}
	if m := ask("rd", "resources/read", `{"uri":"demo://resource/dynamic/text/7"}`); !strings.Contains(string(m.Result), "demo://resource/dynamic/text/7") {
		t.Fatalf("a templated resource: %s", m.Raw)
	}
	if m := ask("pg", "prompts/get", `{"name":"simple-prompt"}`); !strings.Contains(string(m.Result), "This is a simple prompt without arguments.") {
		t.Fatalf("prompts/get: %s", m.Raw)
	}
	m := ask("cc", "completion/complete", `{"ref":{"type":"ref/prompt","name":"completable-prompt"},"argument":{"name":"name","value":"A"},"context":{"arguments":{"department":"Engineering"}}}`)
	if !strings.Contains(string(m.Result), `"Alice"`) {
		t.Fatalf("completion/complete: %s", m.Raw)
	}
}

// A client of the 2026-07-28 era with the Tasks extension gets
// server-everything's long-running tool as a task (the upstream speaks
// 2025-11-25 and knows nothing of it): a task id at once, then its result from
// tasks/get on another connection.
func TestEverythingAsTask(t *testing.T) {
	r := newRig(t, stdioUpstream(t, ""))
	tasks := fmt.Sprintf(`{"extensions":{%q:{}}}`, spec.ExtensionTasks)
	c := e2etest.NewClient(t, r.dialHTTP(t))
	c.Modern(`"t"`, "tools/call", fmt.Sprintf(`"name":%q,"arguments":{"duration":0.4,"steps":2}`, longRunning), tasks)
	m, _ := c.Response(`"t"`)
	var created struct {
		ResultType string `json:"resultType"`
		TaskID     string `json:"taskId"`
	}
	if err := json.Unmarshal(m.Result, &created); err != nil || created.ResultType != "task" || created.TaskID == "" {
		t.Fatalf("tools/call as a task: %s", m.Raw)
	}
	g := e2etest.NewClient(t, r.dialWS(t))
	var last e2etest.Msg
	i := 0
	poll.Until(t, 20*time.Second, "the task to complete", func() bool {
		i++
		id := fmt.Sprintf(`"g%d"`, i)
		g.Modern(id, spec.MethodTasksGet, fmt.Sprintf(`"taskId":%q`, created.TaskID), tasks)
		last, _ = g.Response(id)
		return strings.Contains(string(last.Result), `"completed"`)
	})
	if !strings.Contains(string(last.Result), "Steps: 2.") {
		t.Fatalf("the finished task: %s", last.Raw)
	}
}

// resources/subscribe through the gateway: server-everything's simulated
// updates (toggle-subscriber-updates sends one at once) reach the session that
// subscribed, and not another.
func TestEverythingResourceUpdates(t *testing.T) {
	r := newRig(t, stdioUpstream(t, ""))
	const uri = "demo://resource/static/document/architecture.md"
	a := e2etest.NewClient(t, r.dialWS(t))
	a.Initialize(`{}`)
	b := e2etest.NewClient(t, r.dialWS(t))
	b.Initialize(`{}`)
	a.Send(`{"jsonrpc":"2.0","id":"s","method":"resources/subscribe","params":{"uri":%q}}`, uri)
	if m, _ := a.Response(`"s"`); m.Error != nil {
		t.Fatalf("subscribe: %s", m.Raw)
	}
	a.Send(`{"jsonrpc":"2.0","id":"t","method":"tools/call","params":{"name":"toggle-subscriber-updates","arguments":{}}}`)
	a.Until(func(m e2etest.Msg) bool {
		return m.Method == "notifications/resources/updated" && strings.Contains(string(m.Params), uri)
	})
	for _, m := range b.Quiet(`"q"`) {
		if m.Method == "notifications/resources/updated" {
			t.Fatalf("a session that did not subscribe got %s", m.Raw)
		}
	}
}

// A stdio child sees the variables a program needs and those the gateway was
// told to pass, never the rest of the gateway's environment: server-everything's
// get-env tool, called through the gateway, prints the child's.
func TestChildEnvironment(t *testing.T) {
	secrets := map[string]string{
		"MCP_RESUME_API_KEYS":        "alice:alice-key-0123456789,bob:bob-key-0123456789",
		"OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer otlp-secret",
		"AWS_SECRET_ACCESS_KEY":      "aws-secret",
		"UPSTREAM_TOKEN":             "upstream-secret",
	}
	for k, v := range secrets {
		t.Setenv(k, v)
	}
	t.Setenv("PASSED_BY_NAME", "by-name")
	opts := stdioUpstream(t, "")
	opts.Env = []string{"PASSED_BY_NAME", "SET_HERE=literal", "NOT_SET_ANYWHERE"}
	r := newRig(t, opts)
	c := e2etest.NewClient(t, r.dialHTTP(t))
	c.Initialize(`{}`)
	c.Send(`{"jsonrpc":"2.0","id":"env","method":"tools/call","params":{"name":"get-env","arguments":{}}}`)
	resp, _ := c.Response(`"env"`)
	var env map[string]string
	if err := json.Unmarshal([]byte(e2etest.Text(resp)), &env); err != nil {
		t.Fatalf("get-env: %v in %s", err, resp.Raw)
	}
	for k, v := range secrets {
		if _, ok := env[k]; ok {
			t.Errorf("the child sees %s", k)
		}
		if strings.Contains(string(resp.Raw), v) {
			t.Errorf("the child's environment holds the value of %s", k)
		}
	}
	if env["PATH"] != os.Getenv("PATH") {
		t.Errorf("PATH %q, want the gateway's", env["PATH"])
	}
	if env["PASSED_BY_NAME"] != "by-name" || env["SET_HERE"] != "literal" {
		t.Errorf("passed variables: PASSED_BY_NAME=%q SET_HERE=%q", env["PASSED_BY_NAME"], env["SET_HERE"])
	}
	if _, ok := env["NOT_SET_ANYWHERE"]; ok {
		t.Errorf("a variable named but not set reached the child")
	}
}
