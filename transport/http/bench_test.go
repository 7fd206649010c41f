package http_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	mcpgoserver "github.com/mark3labs/mcp-go/server"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-resume/mcp-resume/audit"
	"github.com/mcp-resume/mcp-resume/mcp"
	httptransport "github.com/mcp-resume/mcp-resume/transport/http"
)

// The HTTP benchmarks run one client, written here on plain net/http, against
// three Streamable HTTP servers on loopback, each serving the same two tools:
//
//   - ours: an mcp-go MCPServer behind mcp.New and httptransport.NewHandler, with a
//     client that advertises resumableRequests (ours-resume: policy notification,
//     resume engine, sequence numbers), with a plain client (ours-plain), and with
//     the resumable client and a default policy of after:1ms (ours-after1ms);
//   - mcp-go: the same kind of MCPServer behind mcp-go's own
//     mcpgoserver.NewStreamableHTTPServer, default options;
//   - go-sdk: the official Go SDK's mcp.NewStreamableHTTPHandler, default options.
//
// Tools: echo returns its text argument; burst sends count progress
// notifications with the call's progress token, as fast as it can, then returns.
// Compare the sub-benchmarks of one run: benchstat -col /server.

// benchProtocol is the protocol version the client asks for.
const benchProtocol = "2025-06-18"

// burstCount is the number of progress notifications of one burst call.
const burstCount = 1000

// benchTarget is one server under test.
type benchTarget struct {
	name string
	caps string // the client's capabilities at initialize
	// lossy: the server may drop a notification it has taken from the tool, so
	// BenchmarkHTTPProgress counts what arrives instead of failing. mcp-go's POST
	// forwarder takes a notification off the session's channel, then gives it up
	// when it sees the response path has closed done.
	lossy bool
	// modern: the client speaks 2026-07-28: no initialize, no session, every
	// request with its envelope and the headers that mirror it.
	modern bool
	// start serves the tools on a loopback listener; stop ends everything it
	// started and waits for it.
	start func() (url string, stop func())
	// authorization is sent with every request ("" for none).
	authorization string
}

var benchTargets = []benchTarget{
	{name: "ours-resume", caps: `{"resumableRequests":{}}`, start: startOurs},
	{name: "ours-plain", caps: `{}`, start: startOurs},
	// ours-after1ms: the resumable client on a server whose default policy is
	// after:1ms, so that a quick call never becomes resumable (no policy, no
	// engine), as a measure of what the resume layer costs.
	{name: "ours-after1ms", caps: `{"resumableRequests":{}}`, start: startOursAfter},
	{name: "mcp-go", caps: `{}`, start: startMCPGo, lossy: true},
	{name: "go-sdk", caps: `{}`, start: startGoSDK},
}

func startOurs() (string, func()) { return startOursWith(nil) }

func startOursWith(opts *mcp.Options) (string, func()) {
	core, err := mcp.New(mcpgoToolServer(), opts)
	if err != nil {
		log.Fatal(err)
	}
	h := httptransport.NewHandler(core, nil)
	srv := httptest.NewServer(h)
	return srv.URL + "/mcp", func() {
		h.Close()
		srv.Close()
		core.Close()
	}
}

func startOursAfter() (string, func()) {
	return startOursWith(&mcp.Options{DefaultPolicy: mcp.Policy{Mode: mcp.After, After: time.Millisecond}})
}

func startMCPGo() (string, func()) {
	s := mcpgoserver.NewStreamableHTTPServer(mcpgoToolServer())
	srv := httptest.NewServer(s)
	return srv.URL + "/mcp", func() {
		s.CloseSessions(context.Background())
		srv.Close()
	}
}

func startGoSDK() (string, func()) {
	s := goSDKToolServer()
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil)
	srv := httptest.NewServer(h)
	return srv.URL + "/mcp", srv.Close
}

// mcpgoToolServer is an MCPServer with echo and burst, a new one for each
// server under test (mcp.New adds a middleware to the one it wraps).
func mcpgoToolServer() *mcpgoserver.MCPServer {
	s := mcpgoserver.NewMCPServer("bench", "1", mcpgoserver.WithToolCapabilities(false))
	s.AddTool(mcpgo.NewTool("echo", mcpgo.WithString("text", mcpgo.Required())),
		func(_ context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
			text, err := req.RequireString("text")
			if err != nil {
				return mcpgo.NewToolResultError(err.Error()), nil
			}
			return mcpgo.NewToolResultText(text), nil
		})
	s.AddTool(mcpgo.NewTool("burst", mcpgo.WithNumber("count", mcpgo.Required())),
		func(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
			n := req.GetInt("count", 0)
			var token mcpgo.ProgressToken
			if req.Params.Meta != nil {
				token = req.Params.Meta.ProgressToken
			}
			srv := mcpgoserver.ServerFromContext(ctx)
			for i := 1; i <= n; i++ {
				params := map[string]any{"progressToken": token, "progress": i, "total": n}
				// mcp-go's notification channel is bounded and refuses when full:
				// wait a little for room (a queue that full keeps the transport
				// busy meanwhile), so that every notification is delivered. (Our
				// core holds the tool back until there is room itself, so on ours
				// the send never fails.)
				for {
					err := srv.SendNotificationToClient(ctx, "notifications/progress", params)
					if err == nil {
						break
					}
					if !errors.Is(err, mcpgoserver.ErrNotificationChannelBlocked) || ctx.Err() != nil {
						return nil, fmt.Errorf("progress %d: %w", i, err)
					}
					time.Sleep(50 * time.Microsecond)
				}
			}
			return mcpgo.NewToolResultText("done"), nil
		})
	return s
}

// goSDKToolServer is the go-sdk server with echo and burst. Its tools take raw
// arguments, as mcp-go's do: no schema validation on either side.
func goSDKToolServer() *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "bench", Version: "1"}, nil)
	s.AddTool(&sdk.Tool{Name: "echo", InputSchema: map[string]any{
		"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string"}}, "required": []string{"text"},
	}}, func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		var args struct {
			Text *string `json:"text"`
		}
		if err := json.Unmarshal(req.Params.Arguments, &args); err != nil || args.Text == nil {
			return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "required argument \"text\" not found"}}}, nil
		}
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: *args.Text}}}, nil
	})
	s.AddTool(&sdk.Tool{Name: "burst", InputSchema: map[string]any{
		"type": "object", "properties": map[string]any{"count": map[string]any{"type": "number"}}, "required": []string{"count"},
	}}, func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		var args struct {
			Count int `json:"count"`
		}
		if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
			return nil, err
		}
		token := req.Params.GetProgressToken()
		for i := 1; i <= args.Count; i++ {
			p := &sdk.ProgressNotificationParams{ProgressToken: token, Progress: float64(i), Total: float64(args.Count)}
			if err := req.Session.NotifyProgress(ctx, p); err != nil {
				return nil, fmt.Errorf("progress %d: %w", i, err)
			}
		}
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "done"}}}, nil
	})
	return s
}

// BenchmarkHTTPToolsCall measures the round trip of one tools/call (echo) at a
// time on one initialized session: POST, the tool, and the answer read up to its
// response.
func BenchmarkHTTPToolsCall(b *testing.B) {
	for _, tg := range benchTargets {
		b.Run("server="+tg.name, func(b *testing.B) {
			c := newBenchClient(b, tg)
			c.call(b, 1, `{"name":"echo","arguments":{"text":"hello"}}`, nil, checkEcho)
			id := 1
			b.ReportAllocs()
			cpu := startCPU()
			for b.Loop() {
				id++
				c.call(b, id, `{"name":"echo","arguments":{"text":"hello"}}`, nil, nil)
			}
			cpu.report(b, id-1, "cpu-ns/op")
		})
	}
}

// BenchmarkHTTPToolsCallPaired is BenchmarkHTTPToolsCall with every server in one
// loop: each iteration makes one call to each (in a random order) and times each
// call, so that all of them meet the machine at the same moments; on a shared VM
// whose speed drifts between runs, this is what makes the ratios repeatable. It
// reports each server's mean round trip (<server>-ns/call) and the ratios of
// ours-resume to mcp-go and to go-sdk.
func BenchmarkHTTPToolsCallPaired(b *testing.B) {
	clients := make([]*benchClient, len(benchTargets))
	for i, tg := range benchTargets {
		clients[i] = newBenchClient(b, tg)
		clients[i].call(b, 1, `{"name":"echo","arguments":{"text":"hello"}}`, nil, checkEcho)
	}
	spent := make([]time.Duration, len(benchTargets))
	id := 1
	b.ReportAllocs()
	// A fresh order every iteration: with a rotation, the client after the
	// slowest (go-sdk's, whose garbage the next call's collection pays) was
	// ours-resume four times in five.
	rng := rand.New(rand.NewPCG(1, 2))
	for b.Loop() {
		id++
		for _, i := range rng.Perm(len(clients)) {
			t := time.Now()
			clients[i].call(b, id, `{"name":"echo","arguments":{"text":"hello"}}`, nil, nil)
			spent[i] += time.Since(t)
		}
	}
	n := float64(id - 1)
	byName := map[string]time.Duration{}
	for i, tg := range benchTargets {
		byName[tg.name] = spent[i]
		b.ReportMetric(float64(spent[i].Nanoseconds())/n, tg.name+"-ns/call")
	}
	b.ReportMetric(float64(byName["ours-resume"])/float64(byName["mcp-go"]), "resume/mcp-go")
	b.ReportMetric(float64(byName["ours-resume"])/float64(byName["go-sdk"]), "resume/go-sdk")
}

// eraTargets are the clients of BenchmarkHTTPEra: one of each era on one server
// of ours (a server serves both eras at once), and a 2026-07-28 client of
// mcp-go's own Streamable HTTP server.
func eraTargets() []benchTarget {
	ours := shared(startOurs)
	return []benchTarget{
		{name: "ours-2025", caps: `{}`, start: ours},
		{name: "ours-2025-resume", caps: `{"resumableRequests":{}}`, start: ours},
		{name: "ours-2026", modern: true, start: ours},
		{name: "mcp-go-2026", modern: true, start: startMCPGo},
	}
}

// shared returns a start function for several clients of one server: the first
// call starts it, the last stop stops it.
func shared(start func() (string, func())) func() (string, func()) {
	var url string
	var stop func()
	users := 0
	return func() (string, func()) {
		if users == 0 {
			url, stop = start()
		}
		users++
		return url, func() {
			if users--; users == 0 {
				stop()
			}
		}
	}
}

// BenchmarkHTTPEra measures the quick call (echo) of a 2026-07-28 client, which
// sends its envelope and headers with every request and has no session, side by
// side with a 2025-era client of ours (plain, and resumable) and with mcp-go's own
// 2026-07-28 path, over loopback TCP, in one run. Our three clients share one
// server, as they would in use. The clients take turns in blocks of eraBlock
// consecutive calls, so that they meet the machine's drift alike while each
// call follows one of the same client (one call per client in turn would charge
// the background work of one kind of call, such as the engine's end of a 2025
// request, to the next call of another kind). It reports each one's median round
// trip (<server>-p50-ns) and the ratios of ours-2026 to ours-2025 and to
// mcp-go-2026.
func BenchmarkHTTPEra(b *testing.B) {
	const eraBlock = 100
	eraTargets := eraTargets()
	clients := make([]*benchClient, len(eraTargets))
	for i, tg := range eraTargets {
		clients[i] = newBenchClient(b, tg)
		clients[i].call(b, 1, `{"name":"echo","arguments":{"text":"hello"}}`, nil, checkEcho)
	}
	spent := make([][]time.Duration, len(eraTargets))
	id, n := 1, 0
	b.ReportAllocs()
	for b.Loop() {
		i := (n / eraBlock) % len(clients)
		n++
		id++
		t := time.Now()
		clients[i].call(b, id, `{"name":"echo","arguments":{"text":"hello"}}`, nil, nil)
		spent[i] = append(spent[i], time.Since(t))
	}
	p50 := map[string]float64{}
	for i, tg := range eraTargets {
		if len(spent[i]) == 0 {
			b.Fatalf("no call to %s: run at least %d iterations", tg.name, eraBlock*len(eraTargets))
		}
		slices.Sort(spent[i])
		p50[tg.name] = float64(spent[i][len(spent[i])/2].Nanoseconds())
		b.ReportMetric(p50[tg.name], tg.name+"-p50-ns")
	}
	b.ReportMetric(p50["ours-2026"]/p50["ours-2025"], "2026/2025")
	b.ReportMetric(p50["ours-2026"]/p50["mcp-go-2026"], "2026/mcp-go-2026")
}

// BenchmarkHTTPProgress measures the delivery of progress notifications on one
// SSE stream: one tools/call of burst (burstCount notifications) per op; notes/s
// and ns/note are the throughput seen by the client (notifications that arrived),
// lost/op the notifications that did not.
func BenchmarkHTTPProgress(b *testing.B) {
	for _, tg := range benchTargets {
		b.Run("server="+tg.name, func(b *testing.B) {
			c := newBenchClient(b, tg)
			params := fmt.Sprintf(`{"name":"burst","arguments":{"count":%d},"_meta":{"progressToken":"p"}}`, burstCount)
			token := []byte(`"p"`)
			var notes int
			count := func(m *benchMsg) {
				if m.Method == "notifications/progress" {
					if !bytes.Equal(m.Params.ProgressToken, token) {
						b.Fatalf("progress token %s, want %s", m.Params.ProgressToken, token)
					}
					notes++
				}
			}
			c.call(b, 1, params, count, nil)
			if notes != burstCount && !tg.lossy {
				b.Fatalf("got %d progress notifications, want %d", notes, burstCount)
			}
			id, calls := 1, 0
			notes = 0
			b.ReportAllocs()
			cpu := startCPU()
			for b.Loop() {
				id++
				calls++
				c.call(b, id, params, count, nil)
			}
			cpu.report(b, notes, "cpu-ns/note")
			lost := calls*burstCount - notes
			if lost != 0 && !tg.lossy {
				b.Fatalf("got %d progress notifications in %d calls, want %d each", notes, calls, burstCount)
			}
			b.ReportMetric(float64(notes)/b.Elapsed().Seconds(), "notes/s")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(notes), "ns/note")
			b.ReportMetric(float64(lost)/float64(calls), "lost/op")
		})
	}
}

// cpuClock measures the CPU time (user and system, all threads) the process uses:
// server and client together. On a machine shared with other work it is steadier
// than wall time; the client's share is the same for every server.
type cpuClock struct {
	start time.Duration
	ok    bool
}

func startCPU() cpuClock {
	t, ok := processCPU()
	return cpuClock{t, ok}
}

// report reports the CPU time used since start per one of n, as unit; nothing
// where the process's CPU time cannot be read.
func (c cpuClock) report(b *testing.B, n int, unit string) {
	t, ok := processCPU()
	if c.ok && ok && n > 0 {
		b.ReportMetric(float64(t-c.start)/float64(n), unit)
	}
}

// processCPU returns the CPU time the process has used, from /proc/self/stat
// (utime and stime, in ticks of 10ms: USER_HZ is 100 on Linux); false elsewhere.
func processCPU() (time.Duration, bool) {
	stat, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0, false
	}
	i := bytes.LastIndexByte(stat, ')') // the command name may hold spaces
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseUint(f[11], 10, 64)
	stime, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond, true
}

func checkEcho(b *testing.B, resp *benchMsg) {
	var r struct {
		Content []struct{ Type, Text string } `json:"content"`
		IsError bool                          `json:"isError"`
	}
	if err := json.Unmarshal(resp.Result, &r); err != nil || r.IsError || len(r.Content) != 1 || r.Content[0].Text != "hello" {
		b.Fatalf("echo result %s (%v)", resp.Result, err)
	}
}

// benchClient is the one client of every server: raw net/http, one keep-alive
// connection, the Streamable HTTP client rules and nothing else.
type benchClient struct {
	hc      *http.Client
	url     string
	session string            // Mcp-Session-Id, once initialized
	proto   string            // MCP-Protocol-Version, once initialized
	modern  bool              // 2026-07-28 (benchTarget.modern)
	auth    string            // benchTarget.authorization
	names   map[string]string // tools/call params -> their tool's name (Mcp-Name), for modern
	name    string            // the Mcp-Name of the request being posted
	br      *bufio.Reader
	line    []byte // the current SSE line, when longer than br's buffer
	data    []byte // the current SSE event's data
}

// benchMsg is what the client reads of a message from the server.
type benchMsg struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		ProgressToken json.RawMessage `json:"progressToken"`
	} `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

// newBenchClient starts tg and initializes a session on it (caps are the client
// capabilities). Everything is stopped at the end of the benchmark: the session
// is deleted, idle connections closed, the server stopped.
func newBenchClient(b *testing.B, tg benchTarget) *benchClient {
	url, stop := tg.start()
	tr := &http.Transport{MaxIdleConnsPerHost: 2, DisableCompression: true}
	c := &benchClient{hc: &http.Client{Transport: tr, Timeout: time.Minute}, url: url, br: bufio.NewReaderSize(nil, 16<<10), modern: tg.modern, auth: tg.authorization}
	b.Cleanup(func() {
		if c.session != "" {
			req, _ := http.NewRequest(http.MethodDelete, c.url, nil)
			req.Header.Set("Mcp-Session-Id", c.session)
			req.Header.Set("MCP-Protocol-Version", c.proto)
			if resp, err := c.hc.Do(req); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
			}
		}
		tr.CloseIdleConnections()
		stop()
	})

	if c.modern {
		return c
	}
	init := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":%q,"capabilities":%s,"clientInfo":{"name":"bench","version":"1"}}}`,
		benchProtocol, tg.caps)
	resp, hdr := c.post(b, init, []byte("0"), nil)
	var r struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if err := json.Unmarshal(resp.Result, &r); err != nil || r.ProtocolVersion == "" {
		b.Fatalf("initialize result %s (%v)", resp.Result, err)
	}
	c.session, c.proto = hdr.Get("Mcp-Session-Id"), r.ProtocolVersion
	if c.session == "" {
		b.Fatal("initialize: no Mcp-Session-Id")
	}
	c.post(b, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), nil, nil)
	return c
}

// call makes tools/call id with params and reads its answer to the response;
// onMsg sees every other message, check the response.
func (c *benchClient) call(b *testing.B, id int, params string, onMsg func(*benchMsg), check func(*testing.B, *benchMsg)) {
	sid := strconv.Itoa(id)
	msg := make([]byte, 0, 64+len(params))
	msg = append(msg, `{"jsonrpc":"2.0","id":`...)
	msg = append(msg, sid...)
	msg = append(msg, `,"method":"tools/call","params":`...)
	if c.modern {
		// The envelope, first in params; the tool's name for the Mcp-Name header.
		msg = append(msg, `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}},`...)
		msg = append(msg, params[1:]...)
		if c.names == nil {
			c.names = map[string]string{}
		}
		if _, ok := c.names[params]; !ok {
			var p struct{ Name string }
			_ = json.Unmarshal([]byte(params), &p)
			c.names[params] = p.Name
		}
		c.name = c.names[params]
	} else {
		msg = append(msg, params...)
	}
	msg = append(msg, '}')
	resp, _ := c.post(b, msg, []byte(sid), onMsg)
	if check != nil {
		check(b, resp)
	}
}

// post sends msg. For a request (id not nil) it reads the answer, a JSON body or
// an event stream, up to the response with id, which it returns with the
// response's headers; onMsg sees the other messages. For a notification it
// expects 202 Accepted. The body is always read to its end, so the connection
// is reused.
func (c *benchClient) post(b *testing.B, msg, id []byte, onMsg func(*benchMsg)) (*benchMsg, http.Header) {
	req, err := http.NewRequest(http.MethodPost, c.url, bytes.NewReader(msg))
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
		req.Header.Set("MCP-Protocol-Version", c.proto)
	}
	if c.auth != "" {
		req.Header.Set("Authorization", c.auth)
	}
	if c.modern {
		req.Header.Set("MCP-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", c.name)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}()
	if id == nil {
		if resp.StatusCode != http.StatusAccepted {
			b.Fatalf("notification: %s", resp.Status)
		}
		return nil, resp.Header
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		b.Fatalf("request %s: %s: %s", id, resp.Status, body)
	}
	ct := resp.Header.Get("Content-Type")
	var m *benchMsg
	switch {
	case len(ct) >= 16 && ct[:16] == "application/json":
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			b.Fatal(err)
		}
		m = c.decode(b, body)
	case len(ct) >= 17 && ct[:17] == "text/event-stream":
		m = c.events(b, resp.Body, onMsg, id)
	default:
		b.Fatalf("request %s: Content-Type %q", id, ct)
	}
	if m == nil || !bytes.Equal(m.ID, id) || m.Method != "" {
		b.Fatalf("request %s: no response", id)
	}
	if m.Error != nil {
		b.Fatalf("request %s: error %s", id, m.Error)
	}
	return m, resp.Header
}

// events reads an event stream up to the response with id, giving every other
// message to onMsg.
func (c *benchClient) events(b *testing.B, body io.Reader, onMsg func(*benchMsg), id []byte) *benchMsg {
	c.br.Reset(body)
	c.data = c.data[:0]
	inEvent := false
	for {
		line, err := c.readLine()
		if err != nil {
			b.Fatalf("request %s: event stream ended before the response: %v", id, err)
		}
		switch {
		case len(line) == 0: // the end of an event
			if inEvent && len(c.data) > 0 {
				m := c.decode(b, c.data)
				if m.Method == "" && m.ID != nil {
					if !bytes.Equal(m.ID, id) {
						b.Fatalf("request %s: response to %s on its stream", id, m.ID)
					}
					return m
				}
				if onMsg != nil {
					onMsg(m)
				}
			}
			c.data, inEvent = c.data[:0], false
		case line[0] == ':': // a comment
		case bytes.HasPrefix(line, []byte("data:")):
			v := line[5:]
			if len(v) > 0 && v[0] == ' ' {
				v = v[1:]
			}
			if inEvent {
				c.data = append(c.data, '\n')
			}
			c.data = append(c.data, v...)
			inEvent = true
		}
	}
}

// readLine returns the next line of the stream without its line ending. It is
// valid until the next call.
func (c *benchClient) readLine() ([]byte, error) {
	line, err := c.br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		c.line = append(c.line[:0], line...)
		for errors.Is(err, bufio.ErrBufferFull) {
			line, err = c.br.ReadSlice('\n')
			c.line = append(c.line, line...)
		}
		line = c.line
	}
	if err != nil {
		return nil, err
	}
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line, nil
}

func (c *benchClient) decode(b *testing.B, data []byte) *benchMsg {
	m := new(benchMsg)
	if err := json.Unmarshal(data, m); err != nil {
		b.Fatalf("a message from the server: %v: %s", err, data)
	}
	return m
}

// BenchmarkIdleSession measures what an idle Streamable HTTP session holds: b.N
// clients initialize and go away without DELETE (as a client cut off does), and
// the live heap and goroutines grow by bytes/session and goroutines/session
// while their sessions wait for SessionIdle.
func BenchmarkIdleSession(b *testing.B) { benchSessions(b, false) }

// BenchmarkParkedSession is BenchmarkIdleSession once the sessions are parked
// (EmptySessionIdle after their last stream, no work): what a session a client
// left holds until SessionIdle.
func BenchmarkParkedSession(b *testing.B) { benchSessions(b, true) }

func benchSessions(b *testing.B, parked bool) {
	opts := &httptransport.Options{MaxSessions: -1, MaxSessionsPerPrincipal: -1, MaxSessionsPerAddress: -1}
	if parked {
		opts.EmptySessionIdle = time.Millisecond
	}
	core, err := mcp.New(mcpgoToolServer(), nil)
	if err != nil {
		b.Fatal(err)
	}
	h := httptransport.NewHandler(core, opts)
	srv := httptest.NewServer(h)
	defer func() {
		h.Close()
		srv.Close()
		core.Close()
	}()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	init := []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"b","version":"1"}}}`)
	open := func() {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, bytes.NewReader(init))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := hc.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.Header.Get("Mcp-Session-Id") == "" {
			b.Fatal("no session")
		}
	}
	open() // warm up: the connection, the first session's allocations
	heap := func() (uint64, int) {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc, runtime.NumGoroutine()
	}
	h0, g0 := heap()
	n := 0
	for b.Loop() {
		open()
		n++
	}
	for deadline := time.Now().Add(30 * time.Second); parked && h.Parked() < n+1; { // every session parked
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d sessions parked", h.Parked(), n+1)
		}
		time.Sleep(time.Millisecond)
	}
	h1, g1 := heap()
	b.ReportMetric(float64(int64(h1)-int64(h0))/float64(n), "bytes/session")
	b.ReportMetric(float64(g1-g0)/float64(n), "goroutines/session")
	if got := h.Sessions(); got != n+1 {
		b.Fatalf("%d sessions, want %d", got, n+1)
	}
}

// BenchmarkHTTPControlsPaired is issue 60's benchmark where a client meets it:
// the echo of a resumable 2025 client over Streamable HTTP on loopback, on a
// server with five policies (the default and four tools'; echo's with a
// Timeout, a Rate it never spends and a Concurrency it never reaches) and an
// audit file (echo's arguments hashed), against the same echo on a server
// with neither, paired as BenchmarkHTTPToolsCallPaired is. "controls/none" is
// the ratio of their mean round trips.
func BenchmarkHTTPControlsPaired(b *testing.B) {
	file, err := audit.OpenFile(filepath.Join(b.TempDir(), "audit.jsonl"))
	if err != nil {
		b.Fatal(err)
	}
	trail := audit.NewTrail(nil, file)
	defer func() { _ = trail.Close() }()
	controls := &mcp.Options{
		Audit:         trail.Record,
		DefaultPolicy: mcp.Policy{Mode: mcp.After, After: time.Second, Timeout: time.Hour},
		Tools: map[string]mcp.Policy{
			"echo": {Mode: mcp.Always, Timeout: time.Minute, Arguments: audit.RuleHash,
				Rate: mcp.Rate{Calls: 1 << 30, Per: time.Second}, Concurrency: mcp.Concurrency{Max: 1 << 20, PerPrincipal: 1 << 20}},
			"countdown": {Mode: mcp.Always, Restartable: true, Timeout: 10 * time.Minute,
				Concurrency: mcp.Concurrency{Max: 4, PerPrincipal: 2, Queue: 8, Wait: 5 * time.Second}},
			"ask":       {Mode: mcp.After, After: 100 * time.Millisecond, Rate: mcp.Rate{Calls: 10, Per: time.Minute}},
			"summarize": {Mode: mcp.Never, Timeout: 30 * time.Second, Rate: mcp.Rate{Calls: 100, Per: time.Hour}},
		},
	}
	targets := []benchTarget{
		{name: "none", caps: `{"resumableRequests":{}}`, start: startOurs},
		{name: "controls", caps: `{"resumableRequests":{}}`, start: func() (string, func()) { return startOursWith(controls) }},
	}
	clients := make([]*benchClient, len(targets))
	for i, tg := range targets {
		clients[i] = newBenchClient(b, tg)
		clients[i].call(b, 1, `{"name":"echo","arguments":{"text":"hello"}}`, nil, checkEcho)
	}
	spent := make([]time.Duration, len(targets))
	id := 1
	rng := rand.New(rand.NewPCG(1, 2))
	for b.Loop() {
		id++
		for _, i := range rng.Perm(len(clients)) {
			t := time.Now()
			clients[i].call(b, id, `{"name":"echo","arguments":{"text":"hello"}}`, nil, nil)
			spent[i] += time.Since(t)
		}
	}
	n := float64(id - 1)
	for i, tg := range targets {
		b.ReportMetric(float64(spent[i].Nanoseconds())/n, tg.name+"-ns/call")
	}
	b.ReportMetric(float64(spent[1])/float64(spent[0]), "controls/none")
}
