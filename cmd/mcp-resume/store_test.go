package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-resume/mcp-resume/mcp/e2etest"
	"github.com/mcp-resume/mcp-resume/resume/jsstore/embedded"
	"github.com/mcp-resume/mcp-resume/spec"
	"github.com/mcp-resume/mcp-resume/testkit/logbuf"
	"github.com/mcp-resume/mcp-resume/testkit/poll"
	"github.com/mcp-resume/mcp-resume/transport"
	httptransport "github.com/mcp-resume/mcp-resume/transport/http"
	"github.com/mcp-resume/mcp-resume/transport/ws"
)

// TestRestartSubprocess: a server on --data-dir is killed (SIGKILL) with calls in
// flight and results delivered but not acknowledged; a new server on the same
// directory gives every result back on requests/resume, and answers for every call
// that was in flight with a failed status and the server_restarted error. With
// --sync always every call's record is written before its resume policy goes
// out; with --sync periodic a call started within a millisecond of the kill may
// be unknown instead (jsstore.Options.DeferRecords, TestRecoveryAfterKill).
func TestRestartSubprocess(t *testing.T) {
	n := 100
	if testing.Short() {
		n = 20
	}
	dir := t.TempDir()
	args := "serve --stdio --sync always --quick-call 0 --data-dir " + dir // every echo resumable, however quick
	conn := spawn(t, args)
	c := e2etest.NewClient(t, conn)
	c.Initialize(`{"resumableRequests":{}}`)
	for i := range n {
		c.Send(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"countdown","arguments":{"seconds":600,"steps":1}}}`, i)
		c.Send(`{"jsonrpc":"2.0","id":"done-%d","method":"tools/call","params":{"name":"echo","arguments":{"text":"result %d"}}}`, i, i)
	}
	tokens := map[string]string{} // request id -> resume token
	results := 0
	c.Until(func(m e2etest.Msg) bool {
		switch {
		case m.Method == spec.MethodResumePolicy:
			p := e2etest.PolicyOf(t, m)
			tokens[string(p.RequestID)] = p.ResumeToken
		case m.Method == "" && strings.HasPrefix(string(m.ID), `"done-`):
			results++
		}
		return len(tokens) == 2*n && results == n
	})
	if err := conn.(*procConn).cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = conn.Close()

	c = e2etest.NewClient(t, spawn(t, args))
	c.Initialize(`{"resumableRequests":{}}`)
	for i := range n {
		id := fmt.Sprintf(`"done-%d"`, i)
		c.Resume(id, tokens[id])
		resp, _ := c.Response(id)
		if got, want := e2etest.Text(resp), fmt.Sprint("result ", i); got != want {
			t.Fatalf("resumed %s after the restart: %s, want %q", id, resp.Raw, want)
		}

		id = fmt.Sprint(i)
		st, err := c.GetStatus(`"st"`, id, tokens[id])
		if err != nil || st.Status != "failed" || !st.HasPendingMessage {
			t.Fatalf("getStatus of %s, in flight at the kill: %+v, %v; want failed with a pending message", id, st, err)
		}
		c.Resume(id, tokens[id])
		resp, _ = c.Response(id)
		if resp.Error == nil || resp.Error.Code != spec.CodeInvalidParams || resp.Error.Reason != spec.ReasonServerRestarted {
			t.Fatalf("resumed %s, in flight at the kill: %s, want a -32602 error with reason %s", id, resp.Raw, spec.ReasonServerRestarted)
		}
	}
}

func TestStoreFlags(t *testing.T) {
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args string
		ok   bool
	}{
		{"serve --stdio --data-dir " + file, false}, // at once, not after the store's 10 s start timeout
		{"serve --stdio --data-dir " + t.TempDir() + " --sync always", true},
		{"serve --stdio --sync sometimes", false},
		{"serve --stdio --data-dir " + t.TempDir() + " --nats-url nats://127.0.0.1:1", false},
		{"serve --stdio --nats-url nats://127.0.0.1:1 --sync always", false},
	} {
		var out strings.Builder
		err := run(strings.Fields(tc.args), strings.NewReader(""), &out, &out)
		if (err == nil) != tc.ok {
			t.Errorf("%q: err %v, want ok=%v (output %q)", tc.args, err, tc.ok, out.String())
		}
	}
}

// startRestartable spawns serve --stdio on a fresh --data-dir with countdown
// restartable, and starts countdown "r" (1s, 4 steps, progress) from a resumable
// client. args start the next server on the same directory.
func startRestartable(t *testing.T) (args string, conn transport.Conn, c *e2etest.Client) {
	t.Helper()
	args = "serve --stdio --data-dir " + t.TempDir() + " --restartable countdown"
	conn = spawn(t, args)
	c = e2etest.NewClient(t, conn)
	c.Initialize(`{"resumableRequests":{}}`)
	c.Send(`{"jsonrpc":"2.0","id":"r","method":"tools/call","params":{"name":"countdown","arguments":{"seconds":1,"steps":4},"_meta":{"progressToken":"p"}}}`)
	return args, conn, c
}

// TestRestartableSubprocess: a call of a tool marked --restartable that is running
// when its server is killed runs again in the next server on the same --data-dir,
// and its client resumes it with its old token and gets the result.
func TestRestartableSubprocess(t *testing.T) {
	args, conn, c := startRestartable(t)
	pol := e2etest.PolicyOf(t, c.Next())
	if p := e2etest.Progress(c.Next()); p != 1 {
		t.Fatalf("first message after the policy: progress %d", p)
	}
	if err := conn.(*procConn).cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = conn.Close()

	c = e2etest.NewClient(t, spawn(t, args))
	c.Initialize(`{"resumableRequests":{}}`)
	st, err := c.GetStatus(`"st"`, `"r"`, pol.ResumeToken)
	if err != nil || st.Status != "processing" {
		t.Fatalf("getStatus after the restart: %+v, %v; want processing (running again)", st, err)
	}
	c.Resume(`"r"`, pol.ResumeToken)
	resp, before := c.Response(`"r"`)
	if got := e2etest.Text(resp); got != "countdown done: 4 of 4 steps" {
		t.Fatalf("result after the restart: %s", resp.Raw)
	}
	if len(before) == 0 || e2etest.Progress(before[len(before)-1]) != 4 {
		t.Errorf("the run after the restart sent no progress up to 4: %d messages before the result", len(before))
	}
}

// TestGracefulShutdownKeepsRequests: SIGTERM, unlike a crash, lets the server stop
// cleanly (exit status 0), and with a durable store its running requests stay for
// the next process: a restartable one runs again and completes, the other answers
// failed with server_restarted.
func TestGracefulShutdownKeepsRequests(t *testing.T) {
	args, conn, c := startRestartable(t)
	c.Send(`{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"ask","arguments":{"question":"later?","delay":60}}}`)
	tokens := map[string]string{}
	c.Until(func(m e2etest.Msg) bool {
		if m.Method == spec.MethodResumePolicy {
			p := e2etest.PolicyOf(t, m)
			tokens[string(p.RequestID)] = p.ResumeToken
		}
		return len(tokens) == 2
	})
	proc := conn.(*procConn).cmd
	if err := proc.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := proc.Wait(); err != nil {
		t.Fatalf("serve after SIGTERM: %v, want exit status 0", err)
	}

	c = e2etest.NewClient(t, spawn(t, args))
	c.Initialize(`{"resumableRequests":{}}`)
	if st, err := c.GetStatus(`"s1"`, `"r"`, tokens[`"r"`]); err != nil || st.Status != "processing" {
		t.Fatalf("getStatus of the restartable call: %+v, %v; want processing", st, err)
	}
	if st, err := c.GetStatus(`"s2"`, `"a"`, tokens[`"a"`]); err != nil || st.Status != "failed" {
		t.Fatalf("getStatus of the other call: %+v, %v; want failed", st, err)
	}
	c.Resume(`"r"`, tokens[`"r"`])
	if resp, _ := c.Response(`"r"`); e2etest.Text(resp) != "countdown done: 4 of 4 steps" {
		t.Fatalf("the restartable call after SIGTERM and restart: %s", resp.Raw)
	}
	c.Resume(`"a"`, tokens[`"a"`])
	if resp, _ := c.Response(`"a"`); resp.Error == nil || resp.Error.Reason != spec.ReasonServerRestarted {
		t.Fatalf("the other call after SIGTERM and restart: %s, want reason %s", resp.Raw, spec.ReasonServerRestarted)
	}
}

// TestTaskRestartSubprocess: tasks live in the store like any resumable request. A
// server on --data-dir --restartable countdown is killed (SIGKILL) with four
// tasks: one finished, one running of a restartable tool, one running of another
// tool, one cancelled. A new server on the same directory serves the finished
// task's result on tasks/get, runs the restartable one again to its result,
// reports the other failed with server_restarted (in statusMessage too, and in
// a 2025-11-25 session's tasks/get), and the cancelled one still cancelled.
func TestTaskRestartSubprocess(t *testing.T) {
	dir := t.TempDir()
	args := "serve --stdio --restartable countdown --data-dir " + dir
	conn := spawn(t, args)
	c := e2etest.NewClient(t, conn)
	ext := fmt.Sprintf(`{"extensions":{%q:{}}}`, spec.ExtensionTasks)
	start := func(id, params string) string {
		c.Modern(id, "tools/call", params, ext)
		m, _ := c.Response(id)
		var r struct{ TaskID string }
		if err := json.Unmarshal(m.Result, &r); err != nil || r.TaskID == "" {
			t.Fatalf("not a task: %s", m.Raw)
		}
		return r.TaskID
	}
	status := func(c *e2etest.Client, id string) e2etest.Task {
		c.Modern(`"g"`, spec.MethodTasksGet, fmt.Sprintf(`"taskId":%q`, id), ext)
		m, _ := c.Response(`"g"`)
		var tk e2etest.Task
		if err := json.Unmarshal(m.Result, &tk); err != nil || m.Error != nil {
			t.Fatalf("tasks/get: %s", m.Raw)
		}
		return tk
	}
	done := start(`1`, `"name":"countdown","arguments":{"seconds":0.05,"steps":1}`)
	rerun := start(`2`, `"name":"countdown","arguments":{"seconds":1,"steps":2}`)
	lost := start(`3`, `"name":"ask","arguments":{"delay":600}`)
	cancelled := start(`4`, `"name":"countdown","arguments":{"seconds":600,"steps":1}`)
	c.Modern(`"c"`, spec.MethodTasksCancel, fmt.Sprintf(`"taskId":%q`, cancelled), ext)
	if m, _ := c.Response(`"c"`); m.Error != nil {
		t.Fatalf("tasks/cancel: %s", m.Raw)
	}
	poll.Until(t, 10*time.Second, "the short task to finish", func() bool { return status(c, done).Status == "completed" })
	if tk := status(c, rerun); tk.Status != "working" {
		t.Fatalf("the restartable task before the kill: %+v", tk)
	}
	if err := conn.(*procConn).cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = conn.Close()

	conn = spawn(t, args)
	c = e2etest.NewClient(t, conn)
	if tk := status(c, done); tk.Status != "completed" || !strings.Contains(string(tk.Result), "countdown done: 1 of 1 steps") {
		t.Fatalf("the finished task after the restart: %+v", tk)
	}
	tk := status(c, lost)
	if tk.Status != "failed" || !strings.Contains(string(tk.Error), string(spec.ReasonServerRestarted)) || !strings.Contains(tk.StatusMessage, string(spec.ReasonServerRestarted)) {
		t.Fatalf("the running task of a tool not restartable, after the restart: %+v", tk)
	}
	if tk := status(c, cancelled); tk.Status != "cancelled" {
		t.Fatalf("the cancelled task after the restart: %+v", tk)
	}
	poll.Until(t, 20*time.Second, "the restartable task to finish its new run", func() bool {
		tk := status(c, rerun)
		if tk.Status != "working" && tk.Status != "completed" {
			t.Fatalf("the restartable task after the restart: %+v, want working, then completed", tk)
		}
		return tk.Status == "completed" && strings.Contains(string(tk.Result), "countdown done: 2 of 2 steps")
	})

	// A 2025-11-25 session, on the next process, reads the failed task in its
	// form.
	_ = conn.Close()
	old := e2etest.NewClient(t, spawn(t, args))
	old.Initialize(`{}`)
	old.Send(`{"jsonrpc":"2.0","id":"g25","method":"tasks/get","params":{"taskId":%q}}`, lost)
	m, _ := old.Response(`"g25"`)
	var legacy struct{ Status, StatusMessage string }
	if err := json.Unmarshal(m.Result, &legacy); err != nil || legacy.Status != "failed" || !strings.Contains(legacy.StatusMessage, string(spec.ReasonServerRestarted)) {
		t.Fatalf("2025-11-25 tasks/get of the failed task: %s", m.Raw)
	}
}

// A task started with `call --task --detach` on `serve --data-dir` finishes, the
// server is killed (SIGKILL) and started again on the same directory, and `task
// result ID` prints the task's result; `task get` and `task list` see it too.
func TestTaskCommandsAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	args := "serve --http 127.0.0.1:0 --data-dir " + dir
	first := spawnNet(t, args, 1)[0]
	var out, errw bytes.Buffer
	if err := run([]string{"call", "--url", first.URL, "--task", "--detach", "countdown", "seconds=0.05", "steps=2"}, nil, &out, &errw); err != nil {
		t.Fatalf("call --task --detach: %v\n%s", err, errw.String())
	}
	id := strings.TrimSpace(out.String())
	if !strings.HasPrefix(id, "tk1.") || strings.Contains(id, "\n") {
		t.Fatalf("call --task --detach printed %q, want the task id alone", out.String())
	}
	poll.Until(t, 10*time.Second, "the task to finish", func() bool {
		out.Reset()
		return run([]string{"task", "--url", first.URL, "get", id}, nil, &out, &errw) == nil && strings.Contains(out.String(), "completed")
	})
	first.Kill()

	second := spawnNet(t, args, 1)[0]
	out.Reset()
	if err := run([]string{"task", "--url", second.URL, "result", id}, nil, &out, &errw); err != nil {
		t.Fatalf("task result after the restart: %v\n%s", err, errw.String())
	}
	if out.String() != "countdown done: 2 of 2 steps\n" {
		t.Fatalf("task result printed %q", out.String())
	}
	out.Reset()
	if err := run([]string{"task", "--url", second.URL, "--json", "get", id}, nil, &out, &errw); err != nil || !strings.Contains(out.String(), `"status": "completed"`) {
		t.Fatalf("task get after the restart: %v %q", err, out.String())
	}
}

// --replicas: only with --nats-url, 1 to 5, each refused at once with a message
// that says why; on a NATS server that is not a cluster, the store refuses more
// than one replica naming the count; serve --help has it.
func TestReplicasFlag(t *testing.T) {
	ns, err := embedded.Start(&embedded.Options{Dir: t.TempDir(), Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Shutdown()
	for _, tc := range []struct{ args, want string }{
		{"serve --stdio --data-dir " + t.TempDir() + " --replicas 3", "--replicas applies to --nats-url (a cluster of NATS servers); the embedded server of --data-dir is a single node"},
		{"serve --stdio --replicas 3", "--replicas applies to --nats-url"},
		{"serve --stdio --nats-url nats://127.0.0.1:1 --replicas 0", "--replicas 0: want 1 to 5"},
		{"serve --stdio --nats-url nats://127.0.0.1:1 --replicas 6", "--replicas 6: want 1 to 5"},
		{"serve --stdio --nats-url " + ns.ClientURL() + " --replicas 3", "stream MCP_RESUME: creating it with 3 replicas: nats: API error: code=500 err_code=10074 description=replicas > 1 not supported in non-clustered mode"},
	} {
		var out strings.Builder
		err := run(strings.Fields(tc.args), strings.NewReader(""), &out, &out)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want an error with %q", tc.args, err, tc.want)
		}
	}
	var out strings.Builder
	if err := run([]string{"serve", "--help"}, nil, &out, &out); exitCode(err) != 0 || !strings.Contains(out.String(), "-replicas int") {
		t.Errorf("serve --help: %v, no --replicas in:\n%s", err, out.String())
	}
}

// A task's events are kept with it in the store: streamed after a kill -9 of
// the server and its restart on its data directory, from the start and from a
// cursor, they are the same, with the same numbers; over Streamable HTTP,
// WebSocket and stdio.
func TestTaskStreamAcrossRestart(t *testing.T) {
	// start runs the server on dir and returns a client of it, and what kills
	// it (SIGKILL, waited for).
	type start func(t *testing.T, dir string) (*e2etest.Client, func())
	overNet := func(dial func(t *testing.T, l startLine) transport.Conn) start {
		return func(t *testing.T, dir string) (*e2etest.Client, func()) {
			l := spawnNet(t, "serve --http 127.0.0.1:0 --data-dir "+dir, 1)[0]
			return e2etest.NewClient(t, dial(t, l)), l.Kill
		}
	}
	for name, start := range map[string]start{
		"http": overNet(func(t *testing.T, l startLine) transport.Conn {
			c := httptransport.Dial(l.URL, nil)
			t.Cleanup(func() { _ = c.Close() })
			return c
		}),
		"ws": overNet(func(t *testing.T, l startLine) transport.Conn {
			c, err := ws.Dial(t.Context(), l.WS, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Close() })
			return c
		}),
		"stdio": func(t *testing.T, dir string) (*e2etest.Client, func()) {
			conn := spawn(t, "serve --stdio --data-dir "+dir)
			return e2etest.NewClient(t, conn), func() {
				p := conn.(*procConn)
				_ = p.cmd.Process.Kill()
				_ = p.Close()
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			c, kill := start(t, dir)
			c.Initialize(`{}`)
			c.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"countdown","arguments":{"seconds":0.2,"steps":3},"_meta":{"progressToken":"p"},"task":{}}}`)
			m, _ := c.Response(`1`)
			var created struct {
				Task struct{ TaskID string } `json:"task"`
			}
			if err := json.Unmarshal(m.Result, &created); err != nil || created.Task.TaskID == "" {
				t.Fatalf("CreateTaskResult: %s", m.Raw)
			}
			task := created.Task.TaskID
			stream := func(c *e2etest.Client, id, after string) string {
				params := fmt.Sprintf(`{"taskId":%q%s}`, task, after)
				c.Send(`{"jsonrpc":"2.0","id":%q,"method":"tasks/stream","params":%s}`, id, params)
				resp, before := c.Response(`"` + id + `"`)
				var got []string
				for _, ev := range e2etest.TaskEvents(before) {
					got = append(got, fmt.Sprintf("%s:%d", ev.Type, ev.Seq))
				}
				if resp.Error != nil {
					t.Fatalf("tasks/stream: %s", resp.Raw)
				}
				return strings.Join(got, " ")
			}
			const all = "progress:0 progress:1 progress:2 status:3"
			if got := stream(c, "s1", ""); got != all {
				t.Fatalf("before the restart: %s, want %s", got, all)
			}
			kill()

			d, _ := start(t, dir)
			d.Initialize(`{}`)
			if got := stream(d, "s2", ""); got != all {
				t.Fatalf("after the restart: %s, want %s", got, all)
			}
			if got := stream(d, "s3", `,"after":1`); got != "progress:2 status:3" {
				t.Fatalf("after the restart, from seq 1: %s", got)
			}
		})
	}
}

// task watch follows a task's events to its end, across a kill -9 of the
// server and its restart on its data (the task, of a restartable tool, runs
// again there): progress on stderr, the end on stdout. Its flags go after its
// arguments too.
func TestTaskWatchAcrossRestart(t *testing.T) {
	addr := freeAddr(t)
	args := "serve --http " + addr + " --data-dir " + t.TempDir() + " --restartable countdown"
	first := spawnNet(t, args, 1)[0]
	var out, errw bytes.Buffer
	if err := run([]string{"call", "--url", first.URL, "--task", "--detach", "countdown", "seconds=3", "steps=6"}, nil, &out, &errw); err != nil {
		t.Fatalf("call --task --detach: %v\n%s", err, errw.String())
	}
	id := strings.TrimSpace(out.String())
	var wout, werr logbuf.Buffer
	watched := make(chan error, 1)
	go func() { watched <- run([]string{"task", "watch", id, "--url", first.URL}, nil, &wout, &werr) }()
	poll.Until(t, 20*time.Second, "progress 2 watched", func() bool { return strings.Contains(werr.String(), "progress 2/6") })
	first.Kill()
	spawnNet(t, args, 1)
	select {
	case err := <-watched:
		if err != nil || !strings.Contains(wout.String(), "task "+id+": completed") {
			t.Fatalf("task watch: %v; stdout %q; stderr %q", err, wout.String(), werr.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("task watch did not end; stderr %q", werr.String())
	}
	if !strings.Contains(werr.String(), "progress 6/6") {
		t.Errorf("the rerun's progress was not watched: %q", werr.String())
	}
}

// TestQuickKeyedCallsAfterStop: with --data-dir (--sync periodic), a keyed
// call answered at once is kept in memory alone (jsstore's
// DeliveredInMemory), and written when the server stops gracefully: the next
// server on the same directory gives its result back to a resume with its key.
func TestQuickKeyedCallsAfterStop(t *testing.T) {
	t.Parallel() // a subprocess's test, mostly waiting: beside the package's others
	const n = 20
	args := "serve --stdio --data-dir " + t.TempDir()
	conn := spawn(t, args)
	c := e2etest.NewClient(t, conn)
	c.Initialize(`{"resumableRequests":{}}`)
	key := func(i int) string { return fmt.Sprintf("quick-keyed-call-%026d", i) }
	for i := range n {
		c.Send(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"result %d"},"_meta":{"io.mcp-resume/key":%q}}}`, i, i, key(i))
		if resp, _ := c.Response(fmt.Sprint(i)); e2etest.Text(resp) != fmt.Sprint("result ", i) {
			t.Fatalf("call %d: %s", i, resp.Raw)
		}
	}
	cmd := conn.(*procConn).cmd
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the server's graceful stop: %v", err)
	}

	c = e2etest.NewClient(t, spawn(t, args))
	c.Initialize(`{"resumableRequests":{}}`)
	for i := range n {
		id := fmt.Sprint(i)
		c.Resume(id, key(i))
		if resp, _ := c.Response(id); e2etest.Text(resp) != fmt.Sprint("result ", i) {
			t.Fatalf("call %d resumed with its key after a graceful stop: %s, want its result", i, resp.Raw)
		}
	}
}
