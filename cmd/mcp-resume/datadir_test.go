//go:build unix

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-resume/mcp-resume/mcp/e2etest"
	"github.com/mcp-resume/mcp-resume/resume/jsstore/embedded"
)

// TestDataDirInUse (issue 24): a second serve, or gateway, on the --data-dir of a
// running serve exits non-zero at once, saying the directory and the first one's
// pid, and does not touch the directory's lock file; once the first is killed
// (SIGKILL: its lock file stays, naming it), a new serve starts on the directory
// and serves.
func TestDataDirInUse(t *testing.T) {
	dir := t.TempDir()
	args := "serve --stdio --data-dir " + dir
	conn := spawn(t, args)
	c := e2etest.NewClient(t, conn)
	// The store is open, and the directory locked, before the server reads a message.
	c.Initialize(`{"resumableRequests":{}}`)
	first := conn.(*procConn).cmd.Process.Pid
	lockFile := filepath.Join(dir, embedded.LockFile)
	wantLock := func(pid int) {
		t.Helper()
		if b, err := os.ReadFile(lockFile); err != nil || string(b) != fmt.Sprintln(pid) {
			t.Fatalf("lock file %s: %q, %v; want pid %d", lockFile, b, err, pid)
		}
	}
	wantLock(first)

	for _, second := range []string{args, "gateway --stdio --data-dir " + dir + " -- cat"} {
		code, stderr := runRefused(t, second)
		want := fmt.Sprintf("data directory %s is in use by pid %d", dir, first)
		if code == 0 || !strings.Contains(stderr, want) {
			t.Errorf("%q beside a running serve: exit %d, stderr %q; want non-zero and %q", second, code, stderr, want)
		}
	}
	wantLock(first)

	if err := conn.(*procConn).cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = conn.Close() // waits for its exit
	wantLock(first)  // stale: its lock went with the process

	conn = spawn(t, args)
	c = e2etest.NewClient(t, conn)
	c.Initialize(`{"resumableRequests":{}}`)
	c.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"after"}}}`)
	if resp, _ := c.Response("1"); e2etest.Text(resp) != "after" {
		t.Fatalf("echo on the server started after the kill: %s", resp.Raw)
	}
	wantLock(conn.(*procConn).cmd.Process.Pid)
}

// runRefused runs the binary's main with args in a subprocess (TestDataDirMain),
// its stdin held open (a server that did start would wait on it, not exit at its
// end), until it exits, and returns its exit code and stderr. It fails t when the
// process has not exited within 10 seconds, or was ended by a signal.
func runRefused(t *testing.T, args string) (code int, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestDataDirMain$")
	cmd.Env = append(os.Environ(), "MR_DATADIR_MAIN_ARGS="+args)
	cmd.WaitDelay = 5 * time.Second // a gateway's upstream child keeping stderr open
	var errBuf bytes.Buffer
	cmd.Stderr = &errBuf
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	err = cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%q: still running after 10 s (stderr %q)", args, errBuf.String())
	}
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, errBuf.String()
	case !errors.As(err, &exit) || exit.ExitCode() < 0:
		t.Fatalf("%q: %v (stderr %q)", args, err, errBuf.String())
	}
	return exit.ExitCode(), errBuf.String()
}

// TestDataDirMain is runRefused's subprocess, not a test of its own: it runs the
// binary's main, which prints a failure on stderr as the installed binary does
// (spawn's main2 exits with the code alone).
func TestDataDirMain(t *testing.T) {
	args := os.Getenv("MR_DATADIR_MAIN_ARGS")
	if args == "" {
		t.Skip("the subprocess of TestDataDirInUse")
	}
	os.Args = append(os.Args[:1], strings.Fields(args)...)
	main() // exits
}
