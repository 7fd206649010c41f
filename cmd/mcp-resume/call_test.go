package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/mcp-resume/mcp-resume/internal/demo"
	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/transport/streamable"
	"github.com/mcp-resume/mcp-resume/transport/ws"
)

// callServer serves the demo tools on Streamable HTTP (/mcp) and WebSocket (/ws).
func callServer(t *testing.T) (httpURL, wsURL string) {
	core := mcp.New(demo.Server("test"), nil)
	h := streamable.NewHandler(core, nil)
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
	if err := run([]string{"call", "--stdio", os.Args[0], "countdown", "seconds=0.05", "steps=2"}, nil, &out, &errw); err != nil {
		t.Fatalf("%v\n%s", err, errw.String())
	}
	if out.String() != "countdown done: 2 of 2 steps\n" {
		t.Fatalf("stdout %q, stderr %q", out.String(), errw.String())
	}
}

// An argument that is not a number where the demo tool wants one is a tool
// error, not the default silently.
func TestCallBadNumber(t *testing.T) {
	httpURL, _ := callServer(t)
	var out, errw bytes.Buffer
	err := run([]string{"call", "--url", httpURL, "countdown", "seconds=abc"}, nil, &out, &errw)
	if err == nil || !strings.Contains(out.String(), "seconds must be a number, got abc") {
		t.Fatalf("err %v, stdout %q", err, out.String())
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
	}
	var out, errw bytes.Buffer
	if err := run([]string{"tools", "--url", httpURL, "--json"}, nil, &out, &errw); err != nil || !strings.Contains(out.String(), `"inputSchema"`) {
		t.Fatalf("tools --json: %v %q", err, out.String())
	}
}
