package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-resume/mcp-resume/testkit/logbuf"
	"github.com/mcp-resume/mcp-resume/testkit/poll"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-resume/mcp-resume/mcp/client"
	"github.com/mcp-resume/mcp-resume/transport"
	httptransport "github.com/mcp-resume/mcp-resume/transport/http"
)

// spawnHTTP starts the binary serving args on addr and waits until it accepts
// connections. The returned function kills it (SIGKILL) and waits for it.
func spawnHTTP(t *testing.T, addr, args string) (kill func()) {
	t.Helper()
	cmd := self("serve --http " + addr + " " + args)
	if testing.Verbose() {
		cmd.Stderr = os.Stderr
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := false
	kill = func() {
		if !done {
			done = true
			_ = cmd.Process.Signal(syscall.SIGKILL)
			_ = cmd.Wait()
		}
	}
	t.Cleanup(kill)
	poll.Until(t, 20*time.Second, "the server on "+addr+" to accept connections", func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return kill
}

// A server restart within maxWait, with a durable store: the Go client's call
// still completes. The server is killed (SIGKILL) mid-call and started again on
// the same --data-dir and address; the tool is restartable, so the new server runs
// the call again, and the client reconnects, resumes with its token and gets the
// result from CallTool as if nothing had happened.
func TestClientSurvivesServerRestart(t *testing.T) {
	addr := freeAddr(t)
	args := "--data-dir " + t.TempDir() + " --restartable countdown"
	kill := spawnHTTP(t, addr, args)

	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	dial := func(context.Context) (transport.Conn, error) {
		return httptransport.Dial("http://"+addr+"/mcp", &httptransport.ClientOptions{Client: hc, FailOnStreamLoss: true}), nil
	}
	c, err := client.Connect(t.Context(), dial, &client.Options{MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	first := make(chan struct{})
	type outcome struct {
		res *mcpgo.CallToolResult
		err error
	}
	out := make(chan outcome, 1)
	go func() {
		n := 0
		res, err := c.CallTool(t.Context(), "countdown", map[string]any{"seconds": 1.5, "steps": 5}, &client.CallOptions{
			Progress: func(client.Progress) {
				if n++; n == 1 {
					close(first)
				}
			},
		})
		out <- outcome{res, err}
	}()
	select {
	case <-first:
	case o := <-out:
		t.Fatalf("the call ended before any progress: %v", o.err)
	case <-time.After(20 * time.Second):
		t.Fatal("no progress")
	}
	kill()
	spawnHTTP(t, addr, args)

	select {
	case o := <-out:
		if o.err != nil {
			t.Fatalf("CallTool across a server restart: %v", o.err)
		}
		if got := fmt.Sprint(o.res.Content); len(o.res.Content) != 1 || o.res.IsError {
			t.Fatalf("result %s", got)
		}
		if tc, ok := o.res.Content[0].(mcpgo.TextContent); !ok || tc.Text != "countdown done: 5 of 5 steps" {
			t.Fatalf("result %#v", o.res.Content[0])
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no result after the restart")
	}
	if c.Reconnects() < 1 {
		t.Errorf("the client never reconnected")
	}
}

// `mcp-resume call` across a restart of a server that runs the call again
// (--restartable): the result arrives, and when the progress starts over the
// client says why instead of jumping back without a word.
func TestCallSaysProgressStartsOver(t *testing.T) {
	addr := freeAddr(t)
	args := "--data-dir " + t.TempDir() + " --restartable countdown"
	kill := spawnHTTP(t, addr, args)
	var stdout, stderr logbuf.Buffer
	done := make(chan error, 1)
	go func() {
		done <- run([]string{"call", "--url", "http://" + addr + "/mcp", "countdown", "seconds=2", "steps=4"}, strings.NewReader(""), &stdout, &stderr)
	}()
	poll.Until(t, 20*time.Second, "progress 2/4", func() bool { return strings.Contains(stderr.String(), "progress 2/4") })
	kill()
	spawnHTTP(t, addr, args)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("call: %v; stderr %q", err, stderr.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("no result; stderr %q", stderr.String())
	}
	if !strings.Contains(stdout.String(), "countdown done: 4 of 4 steps") || !strings.Contains(stderr.String(), "the server ran the call again from the start") {
		t.Fatalf("stdout %q, stderr %q", stdout.String(), stderr.String())
	}
}

// `mcp-resume call` against a server that is killed mid-call and started again
// without --data-dir: stderr says each reconnection attempt as it happens (the
// ones while the server is down with why the last one failed), never says
// "resumed" (the new server does not know the call), and the error is followed
// by a hint that the server may have restarted without --data-dir.
func TestCallAfterRestartWithoutDataDir(t *testing.T) {
	addr := freeAddr(t)
	kill := spawnHTTP(t, addr, "")

	var stdout, stderr logbuf.Buffer
	done := make(chan error, 1)
	go func() {
		done <- run([]string{"call", "--url", "http://" + addr + "/mcp", "countdown", "seconds=30", "steps=30"}, strings.NewReader(""), &stdout, &stderr)
	}()
	poll.Until(t, 20*time.Second, "progress 1/30", func() bool { return strings.Contains(stderr.String(), "progress 1/30") })
	kill()
	defer func() {
		if t.Failed() || testing.Verbose() {
			t.Logf("stderr %q", stderr.String())
		}
	}()
	poll.Until(t, 20*time.Second, "a second attempt", func() bool {
		return strings.Contains(stderr.String(), "connection lost, reconnecting (attempt 2): the last attempt failed: ")
	})
	spawnHTTP(t, addr, "")

	var err error
	select {
	case err = <-done:
	case <-time.After(60 * time.Second):
		t.Fatalf("call still running 60 s after the restart; stderr %q", stderr.String())
	}
	if err == nil || !strings.Contains(err.Error(), "not_found") || !strings.Contains(err.Error(), "\nhint: ") || !strings.Contains(err.Error(), "without --data-dir") {
		t.Fatalf("call: %v, want not_found and the hint; stderr %q", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "connection lost, reconnecting (attempt 1)\n") || strings.Contains(stderr.String(), "\nresumed\n") {
		t.Fatalf("stderr %q: want the reconnection attempts and no \"resumed\"", stderr.String())
	}
}
