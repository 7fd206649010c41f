package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/mcp-resume/mcp-resume/mcp/e2etest"
	"github.com/mcp-resume/mcp-resume/spec"
	"github.com/mcp-resume/mcp-resume/transport"
	"github.com/mcp-resume/mcp-resume/transport/stdio"
)

// The test binary doubles as the mcp-resume binary: with MCP_RESUME_TEST_ARGS set it
// runs the command instead of the tests, so the suite talks to a real subprocess;
// with MCP_RESUME_TEST_NATS set it is a NATS server of its own (natsProcess);
// with MCP_RESUME_TEST_BROWSER set and a URL for argument, the browser that
// $BROWSER names (browser).
func TestMain(m *testing.M) {
	if user := os.Getenv("MCP_RESUME_TEST_BROWSER"); user != "" && len(os.Args) == 2 && strings.HasPrefix(os.Args[1], "http") {
		browser(user, os.Args[1])
		return
	}
	if dir := os.Getenv("MCP_RESUME_TEST_NATS"); dir != "" {
		natsProcess(dir)
		return
	}
	if args := os.Getenv("MCP_RESUME_TEST_ARGS"); args != "" {
		// (A gateway of the upstreams a file names gives each its own env.)
		if rest, ok := strings.CutPrefix(args, "gateway "); ok && !strings.Contains(args, "--upstream ") &&
			(strings.Contains(args, " -- ") || !strings.Contains(args, "--config ")) {
			// The gateway's upstream child is this binary again, as the
			// command MCP_RESUME_TEST_UPSTREAM says (default serve --stdio),
			// which the child learns from the variables passed on to it.
			_ = os.Setenv("MCP_RESUME_TEST_ARGS", cmp.Or(os.Getenv("MCP_RESUME_TEST_UPSTREAM"), "serve --stdio"))
			args = "gateway --env MCP_RESUME_TEST_ARGS --env GORACE " + rest
		}
		main2(withoutDrain(strings.Fields(args)))
		return
	}
	// This binary's children (it, started again) exit without the race
	// runtime's second of sleep at exit (atexit_sleep_ms, 1000 by default).
	_ = os.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	goleak.VerifyTestMain(m)
}

// withoutDrain is args, with --drain-grace 0 for serve and gateway when args
// do not set it: a test stops its processes at once, as before drains (the
// drain's own tests set it).
func withoutDrain(args []string) []string {
	if len(args) == 0 || args[0] != "serve" && args[0] != "gateway" || slices.ContainsFunc(args, func(a string) bool {
		return strings.HasPrefix(a, "--drain-grace") || strings.HasPrefix(a, "-drain-grace")
	}) {
		return args
	}
	return slices.Concat(args[:1], []string{"--drain-grace", "0"}, args[1:])
}

func main2(args []string) {
	os.Exit(report(run(args, os.Stdin, os.Stdout, os.Stderr)))
}

// procConn is a connection to a server subprocess over its stdin and stdout.
type procConn struct {
	*stdio.Conn
	cmd *exec.Cmd
}

func (p *procConn) Close() error {
	err := p.Conn.Close()
	_ = p.cmd.Wait()
	return err
}

// self returns the command that runs this test binary as mcp-resume with args.
func self(args string) *exec.Cmd {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "MCP_RESUME_TEST_ARGS="+args)
	return cmd
}

// stdioPipes returns the pipes to cmd's stdin and from its stdout (not started).
func stdioPipes(t testing.TB, cmd *exec.Cmd) (io.WriteCloser, io.ReadCloser) {
	t.Helper()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	return stdin, stdout
}

func spawn(t testing.TB, args string) transport.Conn {
	cmd := self(args)
	stdin, stdout := stdioPipes(t, cmd)
	if testing.Verbose() {
		cmd.Stderr = os.Stderr
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &procConn{Conn: stdio.New(stdout, stdin, nil), cmd: cmd}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestEndToEndStdioSubprocess(t *testing.T) {
	t.Parallel() // a subprocess's test, mostly waiting: beside the package's others
	e2etest.Run(t, e2etest.Harness{
		Dial: func(t testing.TB) transport.Conn { return spawn(t, "serve --stdio --log-level debug") },
	})
}

func TestOversizeMessageSubprocess(t *testing.T) {
	c := e2etest.NewClient(t, spawn(t, "serve --stdio --max-message-bytes 512"))
	c.Initialize(`{"resumableRequests":{}}`)
	c.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":%q}}}`, strings.Repeat("x", 600))
	c.Send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"ok"}}}`)
	first := c.Next()
	if first.Error == nil || first.Error.Reason != spec.ReasonMessageTooLarge || string(first.ID) != "null" {
		t.Fatalf("oversize message: got %s, want an error with reason %s", first.Raw, spec.ReasonMessageTooLarge)
	}
	resp, _ := c.Response("2")
	if e2etest.Text(resp) != "ok" {
		t.Fatalf("the next message after an oversize one: %s", resp.Raw)
	}
}

func TestFlags(t *testing.T) {
	for _, tc := range []struct {
		args string
		ok   bool
	}{
		{"version", true},
		{"serve --stdio --policy countdown=never,echo=after:2s --default-policy always", true},
		{"serve --policy countdown", false},
		{"serve --policy countdown=sometimes", false},
		{"serve --default-policy after:-1s", false},
		{"serve --log-level loud", false},
		{"serve --stdio --ws 127.0.0.1:0", false},
		{"nonsense", false},
	} {
		var out strings.Builder
		err := run(strings.Fields(tc.args), strings.NewReader(""), &out, &out)
		if (err == nil) != tc.ok {
			t.Errorf("%q: err %v, want ok=%v (output %q)", tc.args, err, tc.ok, out.String())
		}
	}
}

// Help is not a failure (exit 0, for every command), a tool's error exits 1,
// Ctrl-C exits 130 as a shell reports an interrupted command, any other error
// 2 (TestExitCodesOfScripts runs each as a script does).
func TestExitCodes(t *testing.T) {
	for _, args := range []string{"--help", "serve --help", "gateway --help", "call --help", "status --help", "task --help", "tools --help"} {
		var out strings.Builder
		err := run(strings.Fields(args), strings.NewReader(""), &out, &out)
		if code := exitCode(err); code != 0 || !strings.Contains(out.String(), "usage: mcp-resume") {
			t.Errorf("%q: exit %d (%v), output %q; want 0 and a usage", args, code, err, out.String())
		}
	}
	if exitCode(errCancelled) != 130 || exitCode(errors.New("x")) != 2 || exitCode(fmt.Errorf("call x: %w", errToolFailed)) != 1 {
		t.Error("Ctrl-C must exit 130, a tool's error 1, other errors 2")
	}
}
