package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-resume/mcp-resume/mcp/e2etest"
	"github.com/mcp-resume/mcp-resume/testkit/logbuf"
	"github.com/mcp-resume/mcp-resume/transport"
	"github.com/mcp-resume/mcp-resume/transport/ws"
)

// startLine is what the start-up log says of one listener.
type startLine struct {
	URL  string `json:"url"`
	WS   string `json:"ws"`
	Page string `json:"page"`
	PID  int    `json:"pid"`
	// Kill kills the process (SIGKILL), which then need not exit 0, and waits
	// until it is gone (its data directory's lock and its ports are free).
	Kill func() `json:"-"`
	// Stop sends the process sig and waits for it to exit; its error says how it
	// did not exit 0, with its stderr besides the logs. Only the first call
	// signals; a stopped process gets nothing at the end of the test.
	Stop func(sig os.Signal) error `json:"-"`
	// Warnings returns the log lines at level warn or error so far; Logs
	// every line of stderr so far.
	Warnings, Logs func() string `json:"-"`
}

// spawnNet starts `mcp-resume serve ARGS` as a subprocess and returns the start-up
// lines of its listeners (want of them). The process gets SIGTERM at the end of the
// test and must exit 0, unless the test killed it (startLine.Kill).
func spawnNet(t *testing.T, args string, want int) []startLine {
	t.Helper()
	cmd := self(args)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var killed atomic.Bool
	lines := make(chan startLine, want)
	drained := make(chan struct{})
	var other strings.Builder // stderr that is not a log line; read once drained
	var warnings, all logbuf.Buffer
	go func() {
		defer close(drained)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			_, _ = fmt.Fprintf(&all, "%s\n", sc.Bytes())
			var l struct {
				startLine
				Message string `json:"message"`
				Level   string `json:"level"`
			}
			switch err := json.Unmarshal(sc.Bytes(), &l); {
			case err != nil: // not a log line: a panic, a race report
				other.Write(sc.Bytes())
				other.WriteByte('\n')
			case l.Level == "warn" || l.Level == "error":
				_, _ = fmt.Fprintf(&warnings, "%s\n", sc.Bytes())
			case l.Message == "mcp-resume serving":
				lines <- l.startLine
			}
		}
	}()
	var (
		once    sync.Once
		stopErr error // how the process did not exit 0
		byTest  bool  // the test stopped it (startLine.Stop)
	)
	signalAndWait := func(sig os.Signal) {
		_ = cmd.Process.Signal(sig)
		<-drained
		if err := cmd.Wait(); err != nil && !killed.Load() {
			stopErr = fmt.Errorf("%w; its warnings:\n%sits stderr besides the logs:\n%s", err, warnings.String(), other.String())
		}
	}
	stop := func(sig os.Signal) error {
		once.Do(func() { byTest = true; signalAndWait(sig) })
		return stopErr
	}
	kill := func() {
		killed.Store(true)
		_ = stop(syscall.SIGKILL)
	}
	t.Cleanup(func() {
		once.Do(func() { signalAndWait(syscall.SIGTERM) })
		if !byTest && stopErr != nil {
			t.Errorf("serve after SIGTERM: %v, want exit status 0", stopErr)
		}
	})
	var out []startLine
	for range want {
		select {
		case l := <-lines:
			l.Kill, l.Stop, l.Warnings, l.Logs = kill, stop, warnings.String, all.String
			out = append(out, l)
		case <-drained:
			t.Fatalf("serve %s exited at start-up; its stderr:\n%s%s", args, warnings.String(), other.String())
		case <-time.After(20 * time.Second):
			t.Fatalf("serve %s: %d start-up lines, want %d; its warnings:\n%s", args, len(out), want, warnings.String())
		}
	}
	return out
}

// The binary serves WebSocket and the page on the --http listener and on a --ws
// listener of their own; the end-to-end suite runs over the latter.
func TestServeWebSocket(t *testing.T) {
	ls := spawnNet(t, "serve --http 127.0.0.1:0 --ws 127.0.0.1:0 --ws-ping 1s --ws-ping-timeout 1s", 2)
	if !strings.HasSuffix(ls[0].URL, "/mcp") || ls[1].URL != "" || ls[0].WS == ls[1].WS {
		t.Fatalf("start-up lines %+v: want the HTTP endpoint on the first listener, /ws on both", ls)
	}
	for _, l := range ls {
		resp, err := http.Get(l.Page)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "app.js") {
			t.Fatalf("GET %s: %s %.80q", l.Page, resp.Status, b)
		}
		c, err := ws.Dial(t.Context(), l.WS, nil)
		if err != nil {
			t.Fatal(err)
		}
		cl := e2etest.NewClient(t, c)
		cl.Initialize(`{"resumableRequests":{}}`)
		cl.Close()
	}
	e2etest.Run(t, e2etest.Harness{
		Dial: func(t testing.TB) transport.Conn {
			c, err := ws.Dial(t.Context(), ls[1].WS, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Close() })
			return c
		},
		Reconnect: true,
	})
}
