package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-resume/mcp-resume/mcp/client"
	"github.com/mcp-resume/mcp-resume/mcp/e2etest"
	"github.com/mcp-resume/mcp-resume/resume/jsstore/embedded"
	"github.com/mcp-resume/mcp-resume/spec"
	"github.com/mcp-resume/mcp-resume/testkit/poll"
	"github.com/mcp-resume/mcp-resume/transport"
	httptransport "github.com/mcp-resume/mcp-resume/transport/http"
	"github.com/mcp-resume/mcp-resume/transport/ws"
)

// A policy file that does not read stops serve at start with the file, the
// line and the reason; config check says the same, and prints a good file's
// policies and hash.
func TestPolicyFileRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("version: 1\ntools:\n  countdown:\n    timeout: 1m\n    concurrency: {max: 2, queue: 3}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	want := bad + ":5: concurrency: a queue needs a wait"
	out, err := self("serve --http 127.0.0.1:0 --config " + bad).CombinedOutput()
	if err == nil || !strings.Contains(string(out), want) {
		t.Fatalf("serve with a bad file: %v\n%s\nwant it refused: %s", err, out, want)
	}
	out, err = self("config check " + bad).CombinedOutput()
	if err == nil || !strings.Contains(string(out), want) {
		t.Fatalf("config check of a bad file: %v\n%s", err, out)
	}
	out, err = self("config check ../../config/example.yaml").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "deploy     resume always, timeout 20m0s, concurrency max 2 per principal 1 (queue 10, wait 2m0s), rate 10 per 1h0m0s per principal, scopes deploy:write") ||
		!strings.Contains(string(out), "sha256 ") {
		t.Fatalf("config check of the example: %v\n%s", err, out)
	}
}

// serve --config: a tool's rate and timeout from the file hold over HTTP; the
// file changed under 100 calls in flight is taken up by its watch without
// dropping any of them (each keeps the policy it started with and returns its
// result), the new limits hold for the calls after, mcp_resume_config_info
// names the new file's hash. A change that does not read, signalled with
// SIGHUP, is logged with its line and leaves the policies in effect.
func TestPolicyFileReload(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "policies.yaml")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("version: 1\ntools:\n  echo:\n    rate: {calls: 2, per: 1h}\n")
	l := spawnNet(t, "serve --http 127.0.0.1:0 --config "+path, 1)[0]
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c, err := client.Connect(ctx, httpDialer(l.URL), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	call := func(tool string, args map[string]any) (string, error) {
		res, err := c.CallTool(ctx, tool, args, nil)
		if err != nil {
			return "", err
		}
		return resultText(res), nil
	}
	for i := range 3 {
		_, err := call("echo", map[string]any{"text": "x"})
		if i < 2 && err != nil || i == 2 && reasonOf(err) != spec.ReasonRateLimited {
			t.Fatalf("echo %d: %v", i+1, err)
		}
	}
	hashOf := func() string {
		text, err := metricsText(l.URL)
		if err != nil {
			t.Fatal(err)
		}
		_, rest, ok := strings.Cut(text, `mcp_resume_config_info{sha256="`)
		if !ok {
			return ""
		}
		h, _, _ := strings.Cut(rest, `"`)
		return h
	}
	first := hashOf()
	if len(first) != 64 {
		t.Fatalf("mcp_resume_config_info's hash %q", first)
	}

	// 100 calls of 6 s in flight while the file changes (a timeout of 2 s
	// from now on, which they keep clear of: each keeps its policy).
	const n = 100
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			got, err := call("countdown", map[string]any{"seconds": 6, "steps": 2})
			if err != nil || got != "countdown done: 2 of 2 steps" {
				errs <- fmt.Errorf("call %d: %q, %v", i, got, err)
			}
		})
	}
	poll.Until(t, 30*time.Second, "100 calls running", func() bool { return runningCalls(t, l) >= n })
	write("version: 1\ntools:\n  countdown:\n    timeout: 2s\n  echo:\n    rate: {calls: 1, per: 1h}\n")
	poll.Until(t, 10*time.Second, "the change taken up", func() bool { return strings.Contains(l.Logs(), "policies reloaded") })
	second := hashOf()
	if second == first || len(second) != 64 {
		t.Fatalf("mcp_resume_config_info after the change: %q (before %q)", second, first)
	}
	if _, err := call("countdown", map[string]any{"seconds": 4, "steps": 1}); reasonOf(err) != spec.ReasonTimeout {
		t.Fatalf("a countdown past the new file's timeout: %v, want reason timeout", err)
	}
	write("version: 1\ntools:\n  countdown:\n    timeout: 1s\n    rate: {calls: 0, per: 1h}\n")
	if err := syscall.Kill(l.PID, syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, "the bad file refused", func() bool { return strings.Contains(l.Warnings(), "the policy file does not read") })
	if !strings.Contains(l.Warnings(), "policies.yaml:5: rate: calls at least 1") {
		t.Errorf("the refusal does not name the line: %s", l.Warnings())
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// The second file's policies stay in effect: its timeout, and its echo
	// rate on the bucket the first file's spent.
	if _, err := call("countdown", map[string]any{"seconds": 3, "steps": 1}); reasonOf(err) != spec.ReasonTimeout {
		t.Fatalf("a countdown of 3 s after the bad file: %v, want reason timeout (2s)", err)
	}
	if _, err := call("echo", map[string]any{"text": "x"}); reasonOf(err) != spec.ReasonRateLimited {
		t.Fatalf("echo after the reload: %v, want rate_limited", err)
	}
	if h := hashOf(); h != second {
		t.Fatalf("mcp_resume_config_info after a bad file: %q, want %q still", h, second)
	}
}

// runningCalls is serve's count of calls being handled, read from /metrics
// (mcp_resume_calls_running).
func runningCalls(t *testing.T, l startLine) int {
	text, err := metricsText(l.URL)
	if err != nil {
		t.Fatal(err)
	}
	return processingIn(text)
}

// metricsText is the /metrics page of the server whose MCP endpoint is url.
func metricsText(url string) (string, error) {
	resp, err := http.Get(strings.TrimSuffix(url, "/mcp") + "/metrics")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// processingIn reads mcp_resume_requests{state="processing"} from a /metrics
// page: the requests running.
func processingIn(text string) int {
	for line := range strings.Lines(text) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), `mcp_resume_requests{state="processing"} `); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	return 0
}

// Two instances on one NATS share a tool's rate: a principal gets the rate's
// calls in all, whichever instance each goes to, not the rate on each.
func TestPolicyRateShared(t *testing.T) {
	t.Parallel()
	ns := natsInProcess(t)
	path := writePolicies(t, "version: 1\ntools:\n  echo:\n    rate: {calls: 3, per: 1h}\n")
	var allowed, refused int
	for _, name := range []string{"a", "b"} {
		l := spawnNet(t, "serve --http 127.0.0.1:0 --config "+path+" --nats-url "+ns.ClientURL()+" --instance "+name, 1)[0]
		c, err := client.Connect(t.Context(), httpDialer(l.URL), nil)
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			_, err := c.CallTool(t.Context(), "echo", map[string]any{"text": "x"}, nil)
			switch {
			case err == nil:
				allowed++
			case reasonOf(err) == spec.ReasonRateLimited:
				refused++
			default:
				t.Fatal(err)
			}
		}
		c.Close()
	}
	if allowed != 3 || refused != 3 {
		t.Fatalf("%d allowed, %d refused by two instances with a rate of 3 an hour; want 3 and 3", allowed, refused)
	}
}

// A tool's rate and timeout from --config on every transport, both eras
// (e2etest.RunLimits): stdio, Streamable HTTP, WebSocket.
func TestPolicyTransports(t *testing.T) {
	t.Parallel()
	path := writePolicies(t, e2etest.LimitsConfig)
	t.Run("stdio", func(t *testing.T) {
		e2etest.RunLimits(t, e2etest.Harness{Dial: func(t testing.TB) transport.Conn { return spawn(t, "serve --stdio --config "+path) }})
	})
	t.Run("http", func(t *testing.T) {
		l := spawnNet(t, "serve --http 127.0.0.1:0 --config "+path, 1)[0]
		e2etest.RunLimits(t, e2etest.Harness{Dial: func(testing.TB) transport.Conn { return httptransport.Dial(l.URL, nil) }})
	})
	t.Run("ws", func(t *testing.T) {
		l := spawnNet(t, "serve --http 127.0.0.1:0 --config "+path, 1)[0]
		e2etest.RunLimits(t, e2etest.Harness{Dial: func(t testing.TB) transport.Conn {
			c, err := ws.Dial(t.Context(), l.WS, nil)
			if err != nil {
				t.Fatal(err)
			}
			return c
		}})
	})
}

// A tool's timeout holds across a failover: a restartable call whose instance
// is killed runs again on another, which ends it at the first run's deadline
// (kept in its record), not a fresh one.
func TestPolicyTimeoutFailover(t *testing.T) {
	t.Parallel()
	ns := natsInProcess(t)
	path := writePolicies(t, "version: 1\ntools:\n  countdown:\n    restartable: true\n    timeout: 8s\n")
	args := func(name string) string {
		return "serve --http 127.0.0.1:0 --config " + path + " --nats-url " + ns.ClientURL() + " --instance " + name + " --lease 2s"
	}
	a, b := spawnNet(t, args("a"), 1)[0], spawnNet(t, args("b"), 1)[0]
	dial := func(url string) *e2etest.Client {
		c := e2etest.NewClient(t, httptransport.Dial(url, nil))
		c.Initialize(`{"resumableRequests":{}}`)
		return c
	}
	ca := dial(a.URL)
	start := time.Now()
	ca.Send(`{"jsonrpc":"2.0","id":"r","method":"tools/call","params":{"name":"countdown","arguments":{"seconds":60,"steps":60},"_meta":{"progressToken":"p"}}}`)
	pol := e2etest.PolicyOf(t, ca.Next())
	ca.Next() // its first progress: it runs
	a.Kill()
	cb := dial(b.URL)
	st := cb.WaitStatus(`"r"`, pol.ResumeToken, func(st e2etest.Status) bool { return st.Status != "processing" })
	took := time.Since(start)
	t.Logf("ended on b %v after its start (timeout 8s, lease 2s)", took.Round(time.Millisecond))
	if st.Status != "failed" || took < 8*time.Second || took > 10*time.Second {
		t.Fatalf("getStatus on b: %+v after %v; want failed at the first run's deadline (8s)", st, took)
	}
	cb.Resume(`"r"`, pol.ResumeToken)
	if resp := cb.Until(func(m e2etest.Msg) bool { return m.IsResponse(`"r"`) }); resp[len(resp)-1].Error == nil || resp[len(resp)-1].Error.Reason != spec.ReasonTimeout {
		t.Fatalf("resume on b: %s, want the error timeout", resp[len(resp)-1].Raw)
	}
}

// natsInProcess starts a NATS server with JetStream in the test process, on
// loopback, until the test ends.
func natsInProcess(t *testing.T) *embedded.Server {
	t.Helper()
	ns, err := embedded.Start(&embedded.Options{Dir: t.TempDir(), Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	return ns
}

// writePolicies writes a policy file of text and returns its path.
func writePolicies(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "policies.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
