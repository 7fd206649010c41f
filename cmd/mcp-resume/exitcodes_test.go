package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mcp-resume/mcp-resume/testkit/logbuf"
	"github.com/mcp-resume/mcp-resume/testkit/poll"
)

// script runs the binary with args as a script does, and returns its exit
// status, stdout and stderr; with interrupt, it sends SIGINT once stderr
// contains it. It fails t when the process has not exited within a minute.
func script(t *testing.T, args, interrupt string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := self(args)
	var out bytes.Buffer
	var errb logbuf.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if interrupt != "" {
		poll.Until(t, 30*time.Second, interrupt+" on stderr", func() bool { return strings.Contains(errb.String(), interrupt) })
		_ = cmd.Process.Signal(os.Interrupt)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		t.Fatalf("%s: still running after a minute; stderr %q", args, errb.String())
	}
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit) && exit.ExitCode() >= 0:
		code = exit.ExitCode()
	default:
		t.Fatalf("%s: %v; stderr %q", args, err, errb.String())
	}
	return code, out.String(), errb.String()
}

// The exit statuses docs/cli.md lists, each from the command run as a script
// runs it, against `serve --answer-within 2s` (a deferring server): 0 with
// the tool's own result, also for a call the server answered with a deferred
// answer (call awaits the result, and says so on stderr); 1 for a tool that
// reported an error, its result printed; 2 for what leaves no result; 130 for
// an interrupted call, which is cancelled on the server.
func TestExitCodesOfScripts(t *testing.T) {
	t.Parallel() // subprocesses, mostly waiting: beside the package's others
	url := spawnNet(t, "serve --http 127.0.0.1:0 --answer-within 2s", 1)[0].URL
	for _, tc := range []struct {
		name, args, interrupt string
		code                  int
		stdout, stderr        string // what stdout is ("*": anything), what stderr contains
	}{
		{name: "result", args: "call --url " + url + " echo text=hi", stdout: "hi\n"},
		{name: "deferred answer awaited", args: "call --url " + url + " countdown seconds=5 steps=5",
			stdout: "countdown done: 5 of 5 steps\n", stderr: "the server answered that the tool runs on; waiting for its result (await_tool_result)\n"},
		{name: "help", args: "call -h", stderr: "usage: mcp-resume call"},
		{name: "tools", args: "tools --url " + url, stdout: "*"},
		{name: "tool error", args: "call --url " + url + " countdown seconds=0 steps=1 fail=true", code: 1,
			stdout: "countdown failed as asked: 1 of 1 steps\n", stderr: "mcp-resume: call countdown: the tool reported an error\n"},
		{name: "no tool named", args: "call --url " + url, code: 2, stderr: "call: no tool named"},
		{name: "unknown tool", args: "call --url " + url + " nosuch", code: 2, stderr: `the server has no tool "nosuch"`},
		{name: "bad argument", args: "call --url " + url + " countdown seconds=abc", code: 2, stderr: "countdown: seconds must be number"},
		{name: "no server", args: "call --url http://127.0.0.1:1/mcp echo text=hi", code: 2, stderr: "mcp-resume: "},
		{name: "unknown request", args: `status --url ` + url + ` "c-0-1" ` + strings.Repeat("x", 43), code: 2, stderr: "not_found"},
		{name: "unknown task", args: "task --url " + url + " get nosuch", code: 2, stderr: "task get"},
		{name: "interrupted", args: "call --url " + url + " countdown seconds=60 steps=60", interrupt: "progress 1/60", code: 130,
			stderr: "cancelled: the request was cancelled on the server"},
		{name: "interrupted awaiting", args: "call --url " + url + " countdown seconds=60 steps=60", interrupt: "waiting for its result", code: 130,
			stderr: "cancelled: the request was cancelled on the server"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := script(t, tc.args, tc.interrupt)
			if code != tc.code || tc.stdout != "*" && stdout != tc.stdout || !strings.Contains(stderr, tc.stderr) {
				t.Fatalf("%s: exit status %d, stdout %q, stderr %q; want %d, %q, stderr with %q", tc.args, code, stdout, stderr, tc.code, tc.stdout, tc.stderr)
			}
		})
	}
}

// While call awaits a deferred answer, status tells the call's state by the
// id and token `call -v` printed (a deferred call is a request of the
// server's, as a resumable one is): processing, then completed once call
// printed the result.
func TestStatusOfDeferredCall(t *testing.T) {
	t.Parallel()
	url := spawnNet(t, "serve --http 127.0.0.1:0 --answer-within 1s", 1)[0].URL
	var out bytes.Buffer
	var errb logbuf.Buffer
	done := make(chan error, 1)
	go func() {
		done <- run([]string{"call", "--url", url, "-v", "countdown", "seconds=4", "steps=4"}, nil, &out, &errb)
	}()
	re := regexp.MustCompile(`request (\S+) is resumable .*; resume token (\S+)`)
	poll.Until(t, 20*time.Second, "the deferred answer awaited", func() bool {
		return re.MatchString(errb.String()) && strings.Contains(errb.String(), "waiting for its result")
	})
	m := re.FindStringSubmatch(errb.String())
	var st bytes.Buffer
	if err := run([]string{"status", "--url", url, m[1], m[2]}, nil, &st, &st); err != nil || !strings.Contains(st.String(), "status:            processing") {
		t.Fatalf("status while call awaits: %v %q, want processing", err, st.String())
	}
	select {
	case err := <-done:
		if err != nil || out.String() != "countdown done: 4 of 4 steps\n" {
			t.Fatalf("call: %v, stdout %q, stderr %q", err, out.String(), errb.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("no result; stderr %q", errb.String())
	}
	st.Reset()
	if err := run([]string{"status", "--url", url, m[1], m[2]}, nil, &st, &st); err != nil || !strings.Contains(st.String(), "status:            completed") {
		t.Fatalf("status after the result: %v %q, want completed", err, st.String())
	}
}

// `mcp-resume call countdown` against `serve --answer-within 2s` prints the
// countdown's own result and exits 0, and shows every progress step once,
// from the call and the awaits that follow its deferred answer.
func TestCallFollowsDeferred(t *testing.T) {
	t.Parallel()
	url := spawnNet(t, "serve --http 127.0.0.1:0 --answer-within 2s", 1)[0].URL
	code, stdout, stderr := script(t, "call --url "+url+" countdown seconds=6 steps=6", "")
	if code != 0 || stdout != "countdown done: 6 of 6 steps\n" {
		t.Fatalf("exit status %d, stdout %q, stderr %q; want 0 and the countdown's result", code, stdout, stderr)
	}
	for i := 1; i <= 6; i++ {
		if n := strings.Count(stderr, fmt.Sprintf("progress %d/6 ", i)); n != 1 {
			t.Errorf("progress %d/6 shown %d times, want once: %q", i, n, stderr)
		}
	}
}
