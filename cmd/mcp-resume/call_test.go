package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/mcp/client"
	"github.com/mcp-resume/mcp-resume/servers/demo"
	"github.com/mcp-resume/mcp-resume/transport"
	httptransport "github.com/mcp-resume/mcp-resume/transport/http"
	"github.com/mcp-resume/mcp-resume/transport/ws"
)

// callServer serves the demo tools on Streamable HTTP (/mcp) and WebSocket (/ws).
func callServer(t *testing.T) (httpURL, wsURL string) {
	core, err := mcp.New(demo.Server("test"), nil)
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
		http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	})
	return srv.URL + "/mcp", "ws" + strings.TrimPrefix(srv.URL, "http") + "/ws"
}

func TestCallCommand(t *testing.T) {
	httpURL, wsURL := callServer(t)
	for _, flags := range [][]string{{"--url", httpURL}, {"--ws", wsURL}} {
		var out, errw bytes.Buffer
		args := append(append([]string{"call"}, flags...), "countdown", "seconds=0.05", "steps=3")
		if err := run(args, nil, &out, &errw); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, errw.String())
		}
		if out.String() != "countdown done: 3 of 3 steps\n" {
			t.Fatalf("stdout %q", out.String())
		}
		if !strings.Contains(errw.String(), "progress 3/3 step 3 of 3\n") {
			t.Fatalf("stderr %q", errw.String())
		}
	}
}

func TestCallJSONAndStatus(t *testing.T) {
	httpURL, _ := callServer(t)
	var out, errw bytes.Buffer
	if err := run([]string{"call", "--url", httpURL, "--json", "-v", "echo", "text=hi"}, nil, &out, &errw); err != nil {
		t.Fatalf("%v\n%s", err, errw.String())
	}
	if !strings.Contains(out.String(), `"text": "hi"`) {
		t.Fatalf("stdout %q", out.String())
	}
	m := regexp.MustCompile(`request (\S+) is resumable .*; resume token (\S+)`).FindStringSubmatch(errw.String())
	if m == nil {
		t.Fatalf("no id and token in %q", errw.String())
	}
	// The token as an argument, from stdin (-), and from the environment.
	for _, c := range []struct {
		name  string
		args  []string
		stdin io.Reader
		env   string
	}{
		{"argument", []string{m[1], m[2]}, nil, ""},
		{"stdin", []string{m[1], "-"}, strings.NewReader(m[2] + "\n"), ""},
		{"environment", []string{m[1]}, nil, m[2]},
	} {
		t.Setenv(tokenEnv, c.env)
		out.Reset()
		if err := run(append([]string{"status", "--url", httpURL}, c.args...), c.stdin, &out, &errw); err != nil {
			t.Fatalf("status, token from the %s: %v", c.name, err)
		}
		if !strings.Contains(out.String(), "status:            completed") {
			t.Fatalf("status, token from the %s: output %q", c.name, out.String())
		}
	}
	t.Setenv(tokenEnv, "")
	if err := run([]string{"status", "--url", httpURL, m[1]}, nil, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), tokenEnv) {
		t.Fatalf("status without a token: %v, want an error naming %s", err, tokenEnv)
	}
	if err := run([]string{"status", "--url", httpURL, m[1], "-"}, strings.NewReader("\n"), io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Fatalf("status with an empty stdin: %v, want an error", err)
	}
	err := run([]string{"status", "--url", httpURL, m[1], "wrong-token"}, nil, &out, &errw)
	if err == nil || !strings.Contains(err.Error(), "not_found") {
		t.Fatalf("status with a wrong token: %v", err)
	}
}

func TestCallElicitationFromStdin(t *testing.T) {
	httpURL, _ := callServer(t)
	var out, errw bytes.Buffer
	if err := run([]string{"call", "--url", httpURL, "ask"}, strings.NewReader("Grace\n"), &out, &errw); err != nil {
		t.Fatalf("%v\n%s", err, errw.String())
	}
	if out.String() != "answer: Grace\n" {
		t.Fatalf("stdout %q, stderr %q", out.String(), errw.String())
	}
}

func TestCallArgs(t *testing.T) {
	got, err := parseArgs([]string{"n=5", "s=hello", "q=\"5\"", "o={\"a\":1}", "b=true"})
	if err != nil {
		t.Fatal(err)
	}
	if got["n"] != 5.0 || got["s"] != "hello" || got["q"] != "5" || got["b"] != true {
		t.Fatalf("%v", got)
	}
	if _, err := parseArgs([]string{"novalue"}); err == nil {
		t.Fatal("want an error for an argument without =")
	}
	if err := run([]string{"call", "--url", "http://x", "--ws", "ws://x", "t"}, nil, &bytes.Buffer{}, &bytes.Buffer{}); err == nil {
		t.Fatal("want an error for two transports")
	}
}

// call --stdio starts the server as a child (this test binary, as mcp-resume).
func TestCallStdio(t *testing.T) {
	t.Setenv("MCP_RESUME_TEST_ARGS", "serve --stdio --log-level error")
	var out, errw bytes.Buffer
	if err := run([]string{"call", "--stdio", os.Args[0], "--env", "MCP_RESUME_TEST_ARGS", "--env", "GORACE", "countdown", "seconds=0.05", "steps=2"}, nil, &out, &errw); err != nil {
		t.Fatalf("%v\n%s", err, errw.String())
	}
	if out.String() != "countdown done: 2 of 2 steps\n" {
		t.Fatalf("stdout %q, stderr %q", out.String(), errw.String())
	}
}

// call checks the arguments against the tool's input schema before it sends
// the call, and says what is wrong; a string argument typed as digits goes as
// the string; an argument the schema does not name is a warning.
func TestCallChecksArguments(t *testing.T) {
	httpURL, _ := callServer(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"countdown", "seconds=abc"}, `countdown: seconds must be number, got "abc" (its arguments: fail (boolean), seconds (number), steps (number))`},
		{[]string{"echo"}, "echo: text is required"},
		{[]string{"countdwn"}, `the server has no tool "countdwn" (it has: ask, countdown, echo, summarize)`},
	} {
		var out, errw bytes.Buffer
		err := run(append([]string{"call", "--url", httpURL}, tc.args...), nil, &out, &errw)
		if err == nil || !strings.Contains(err.Error(), tc.want) || exitCode(err) != 2 {
			t.Errorf("call %v: %v, want an error with %q", tc.args, err, tc.want)
		}
	}
	var out, errw bytes.Buffer
	if err := run([]string{"call", "--url", httpURL, "echo", "text=5"}, nil, &out, &errw); err != nil || out.String() != "5\n" {
		t.Fatalf("echo text=5: %v, %q", err, out.String())
	}
	out.Reset()
	errw.Reset()
	if err := run([]string{"call", "--url", httpURL, "countdown", "seconds=0.05", "steps=1", "secnds=3"}, nil, &out, &errw); err != nil ||
		!strings.Contains(errw.String(), "warning: countdown names no argument secnds") {
		t.Fatalf("an unknown argument: %v, stderr %q", err, errw.String())
	}
}

// The demo tool itself refuses a non-number where it wants one (a client that
// does not check first gets a tool error, not the default silently).
func TestCountdownRefusesNonNumber(t *testing.T) {
	httpURL, _ := callServer(t)
	dial := func(context.Context) (transport.Conn, error) {
		return httptransport.Dial(httpURL, &httptransport.ClientOptions{FailOnStreamLoss: true}), nil
	}
	c, err := client.Connect(t.Context(), dial, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	res, err := c.CallTool(t.Context(), "countdown", map[string]any{"seconds": "abc"}, nil)
	if err != nil || !res.IsError || !strings.Contains(fmt.Sprint(res.Content), "seconds must be a number, got abc") {
		t.Fatalf("%v %+v", err, res)
	}
}

// tools lists the server's tools, a line each, or the whole result as JSON.
func TestToolsCommand(t *testing.T) {
	httpURL, wsURL := callServer(t)
	for _, flags := range [][]string{{"--url", httpURL}, {"--ws", wsURL}} {
		var out, errw bytes.Buffer
		if err := run(append([]string{"tools"}, flags...), nil, &out, &errw); err != nil {
			t.Fatalf("tools %v: %v\n%s", flags, err, errw.String())
		}
		for _, name := range []string{"ask", "countdown", "echo", "summarize"} {
			if !regexp.MustCompile(`(?m)^` + name + ` +\S`).MatchString(out.String()) {
				t.Errorf("tools %v: no line for %s in %q", flags, name, out.String())
			}
		}
		if !strings.Contains(out.String(), "arguments: text (string, required)") {
			t.Errorf("tools %v: no arguments in %q", flags, out.String())
		}
	}
	var out, errw bytes.Buffer
	if err := run([]string{"tools", "--url", httpURL, "--json"}, nil, &out, &errw); err != nil || !strings.Contains(out.String(), `"inputSchema"`) {
		t.Fatalf("tools --json: %v %q", err, out.String())
	}
}

// call --task follows the task's events (tasks/stream): its progress shows as a
// call's does; a task that asks a question is answered from stdin through
// tasks/result, and its result printed.
func TestCallTaskStreams(t *testing.T) {
	httpURL := spawnNet(t, "serve --http 127.0.0.1:0", 1)[0].URL
	var out, errw bytes.Buffer
	if err := run([]string{"call", "--url", httpURL, "--task", "countdown", "seconds=0.4", "steps=4"}, nil, &out, &errw); err != nil {
		t.Fatalf("%v\n%s", err, errw.String())
	}
	if out.String() != "countdown done: 4 of 4 steps\n" || !strings.Contains(errw.String(), "progress 4/4") || !strings.Contains(errw.String(), "task completed") {
		t.Fatalf("call --task countdown: stdout %q, stderr %q", out.String(), errw.String())
	}
	out.Reset()
	errw.Reset()
	if err := run([]string{"call", "--url", httpURL, "--task", "ask"}, strings.NewReader("Ada\n"), &out, &errw); err != nil {
		t.Fatalf("%v\n%s", err, errw.String())
	}
	if out.String() != "answer: Ada\n" {
		t.Fatalf("call --task ask: stdout %q, stderr %q", out.String(), errw.String())
	}
}
