package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcp-resume/mcp-resume/mcp/e2etest"
	"github.com/mcp-resume/mcp-resume/resume/jsstore/embedded"
	"github.com/mcp-resume/mcp-resume/spec"
	"github.com/mcp-resume/mcp-resume/testkit/faultproxy"
	"github.com/mcp-resume/mcp-resume/testkit/logbuf"
	"github.com/mcp-resume/mcp-resume/testkit/poll"
	"github.com/mcp-resume/mcp-resume/transport"
	httptransport "github.com/mcp-resume/mcp-resume/transport/http"
	"github.com/mcp-resume/mcp-resume/transport/ws"
	"github.com/nats-io/nats.go/jetstream"
)

// Two server processes on one NATS (a server in the test process, listening on
// loopback), each on Streamable HTTP, with a client per instance:
//   - a request started on A is getStatus'd and resumed on B;
//   - an elicitation of a call on A is answered through B and reaches the tool;
//   - a cancel sent to B stops the call on A;
//   - A is killed (SIGKILL): its running requests end owner_lost within about
//     the lease, as B answers, and its restartable ones run again on B.
func TestClusterSubprocesses(t *testing.T) {
	ns := natsInProcess(t)
	const lease = 2 * time.Second
	args := func(name string) string {
		return "serve --http 127.0.0.1:0 --nats-url " + ns.ClientURL() + " --instance " + name + " --lease " + lease.String() + " --restartable countdown"
	}
	a := spawnNet(t, args("a"), 1)[0]
	b := spawnNet(t, args("b"), 1)[0]
	client := func(url string) *e2etest.Client {
		c := e2etest.NewClient(t, httptransport.Dial(url, nil))
		c.Initialize(`{"resumableRequests":{},"elicitation":{}}`)
		return c
	}

	// Started on A, getStatus'd and resumed on B, progress and result included.
	ca := client(a.URL)
	ca.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"countdown","arguments":{"seconds":0.6,"steps":3},"_meta":{"progressToken":"p1"}}}`)
	p1 := e2etest.PolicyOf(t, ca.Next())
	ca.Close()
	cb := client(b.URL)
	if st, e := cb.GetStatus(`"s1"`, "1", p1.ResumeToken); e != nil || st.Status != "processing" {
		t.Fatalf("getStatus on B of a call on A: %+v, %v; want processing", st, e)
	}
	cb.Resume(`1`, p1.ResumeToken)
	resp, before := cb.Response("1")
	if e2etest.Text(resp) != "countdown done: 3 of 3 steps" {
		t.Fatalf("resume on B: %s, want the result", resp.Raw)
	}
	for i, m := range before {
		if e2etest.Progress(m) != i+1 {
			t.Fatalf("resume on B: message %d is %s, want progress %d", i, m.Raw, i+1)
		}
	}
	if len(before) != 3 {
		t.Fatalf("resume on B: %d progress notifications, want 3", len(before))
	}

	// An elicitation of a call on A, answered through B.
	ca = client(a.URL)
	ca.Send(`{"jsonrpc":"2.0","id":"q","method":"tools/call","params":{"name":"ask","arguments":{"question":"Name?"}}}`)
	pq := e2etest.PolicyOf(t, ca.Next())
	if m := ca.Next(); m.Method != "elicitation/create" {
		t.Fatalf("call on A: %s, want the elicitation", m.Raw)
	}
	ca.Close()
	cb.Resume(`"q"`, pq.ResumeToken)
	el := cb.Next()
	if el.Method != "elicitation/create" {
		t.Fatalf("resume on B: %s, want the elicitation", el.Raw)
	}
	cb.Send(`{"jsonrpc":"2.0","id":%s,"result":{"action":"accept","content":{"answer":"Ada"}}}`, el.ID)
	if resp, _ := cb.Response(`"q"`); e2etest.Text(resp) != "answer: Ada" {
		t.Fatalf("the answer sent to B: %s, want the tool's result with it", resp.Raw)
	}

	// A cancel sent to B (by token: the call is not attached there) stops it on A.
	ca = client(a.URL)
	ca.Send(`{"jsonrpc":"2.0","id":"c","method":"tools/call","params":{"name":"ask","arguments":{"question":"?"}}}`)
	pc := e2etest.PolicyOf(t, ca.Next())
	ca.Next() // the elicitation
	cb.Send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"c","resumeToken":%q}}`, pc.ResumeToken)
	// The cancel is a notification, with no answer: poll A until it has taken effect.
	poll.Until(t, 10*time.Second, "getStatus on A to answer cancelled after a cancel sent to B", func() bool {
		_, e := ca.GetStatus(`"sc"`, `"c"`, pc.ResumeToken)
		return e != nil && e.Reason == spec.ReasonCancelled
	})
	if _, e := cb.GetStatus(`"sc"`, `"c"`, pc.ResumeToken); e == nil || e.Reason != spec.ReasonCancelled {
		t.Fatalf("getStatus on B after the cancel: %v, want cancelled", e)
	}
	ca.Close()

	// A dies with a call waiting for an answer and a restartable one running.
	ca = client(a.URL)
	ca.Send(`{"jsonrpc":"2.0","id":"w","method":"tools/call","params":{"name":"ask","arguments":{"question":"?"}}}`)
	pw := e2etest.PolicyOf(t, ca.Next())
	ca.Next()
	ca.Send(`{"jsonrpc":"2.0","id":"r","method":"tools/call","params":{"name":"countdown","arguments":{"seconds":30,"steps":2}}}`)
	pr := e2etest.PolicyOf(t, ca.Next())
	a.Kill()
	killed := time.Now()
	// Polling B: the lease lapses in NATS.
	st := cb.WaitStatus(`"w"`, pw.ResumeToken, func(st e2etest.Status) bool { return st.Status != "processing" })
	took := time.Since(killed)
	t.Logf("A's call reported failed on B %v after A was killed (lease %v)", took.Round(time.Millisecond), lease)
	if st.Status != "failed" || took > 2*lease {
		t.Fatalf("getStatus on B after A died: %+v after %v; want failed within about the lease (%v)", st, took, lease)
	}
	cb.Resume(`"w"`, pw.ResumeToken)
	if resp, _ := cb.Response(`"w"`); resp.Error == nil || resp.Error.Code != spec.CodeInvalidParams || resp.Error.Reason != spec.ReasonOwnerLost {
		t.Fatalf("resume on B of A's call: %s, want -32602 owner_lost", resp.Raw)
	}
	if st, e := cb.GetStatus(`"sr"`, `"r"`, pr.ResumeToken); e != nil || st.Status != "processing" {
		t.Fatalf("getStatus on B of A's restartable call: %+v, %v; want processing (running again on B)", st, e)
	}
}

// An instance that finds its cluster lease gone (NATS unreachable for longer than
// the lease; here the lease is deleted) shuts down and exits with an error that
// says so, rather than run on while the others take over its requests.
func TestServeExitsOnLeaseLoss(t *testing.T) {
	ns, err := embedded.Start(&embedded.Options{Dir: t.TempDir(), Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Shutdown()
	var logs logbuf.Buffer
	done := make(chan error, 1)
	go func() {
		done <- run([]string{"serve", "--http", "127.0.0.1:0", "--nats-url", ns.ClientURL(), "--instance", "doomed", "--lease", "900ms"}, nil, io.Discard, &logs)
	}()
	nc, err := ns.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	var kv jetstream.KeyValue // the lease bucket, once serve has made it
	poll.Until(t, 20*time.Second, "the instance to hold its lease", func() bool {
		if kv == nil {
			kv, _ = js.KeyValue(t.Context(), "mcp-resume-leases")
		}
		if kv == nil {
			return false
		}
		_, err := kv.Get(t.Context(), "doomed")
		return err == nil && strings.Contains(logs.String(), "mcp-resume serving")
	})
	if err := kv.Delete(t.Context(), "doomed"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, errLeaseLost) {
			t.Fatalf("serve returned %v, want errLeaseLost", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve runs on after losing its lease")
	}
	if !strings.Contains(logs.String(), "lost the cluster lease") {
		t.Fatalf("no log line about the lost lease in:\n%s", logs.String())
	}
}

// twoInstances starts a NATS server and two serve processes on it, instances a
// and b of one cluster (lease 2 s).
func twoInstances(t *testing.T) (a, b startLine) {
	t.Helper()
	ns := natsInProcess(t)
	args := func(name string) string {
		return "serve --http 127.0.0.1:0 --nats-url " + ns.ClientURL() + " --instance " + name + " --lease 2s"
	}
	return spawnNet(t, args("a"), 1)[0], spawnNet(t, args("b"), 1)[0]
}

// Tasks across two server processes on one NATS: a task started on A with `call
// --task --detach` is read on B (`task get`, `task result`), and after A is killed
// (SIGKILL) B still serves its result.
func TestClusterTasks(t *testing.T) {
	a, b := twoInstances(t)
	var out, errw bytes.Buffer
	if err := run([]string{"call", "--url", a.URL, "--task", "--detach", "countdown", "seconds=0.3", "steps=2"}, nil, &out, &errw); err != nil {
		t.Fatalf("call --task --detach on A: %v\n%s", err, errw.String())
	}
	id := strings.TrimSpace(out.String())
	out.Reset()
	if err := run([]string{"task", "--url", b.URL, "result", id}, nil, &out, &errw); err != nil || out.String() != "countdown done: 2 of 2 steps\n" {
		t.Fatalf("task result on B of a task on A: %v %q\n%s", err, out.String(), errw.String())
	}
	a.Kill()
	out.Reset()
	if err := run([]string{"task", "--url", b.URL, "result", id}, nil, &out, &errw); err != nil || out.String() != "countdown done: 2 of 2 steps\n" {
		t.Fatalf("task result on B after A was killed: %v %q\n%s", err, out.String(), errw.String())
	}
}

// A NATS server that goes silent (a machine lost, a partition: the connection
// carries nothing more but is not closed) is noticed within a fraction of the
// lease: the instance reconnects and refreshes its lease again before it lapses,
// instead of finding it lapsed minutes later (nats.go's own pings, every two
// minutes) and shutting down. Here the only server's connections go through a
// proxy that stalls those open; a new connection goes through.
func TestServeReconnectsFromSilentNATS(t *testing.T) {
	ns := natsInProcess(t)
	px := faultproxy.NewStaller(t, ns.Addr())
	const lease = 4 * time.Second
	spawnNet(t, "serve --http 127.0.0.1:0 --nats-url nats://"+px.Addr()+" --instance quiet --lease "+lease.String(), 1)
	nc, err := ns.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(t.Context(), "mcp-resume-leases")
	if err != nil {
		t.Fatal(err)
	}
	rev := func() uint64 {
		e, err := kv.Get(t.Context(), "quiet")
		if err != nil {
			t.Fatalf("the lease: %v", err)
		}
		return e.Revision()
	}
	// Stalled just after a refresh: the lease lapses a lease after it.
	first := rev()
	poll.Until(t, lease, "a refresh of the lease", func() bool { return rev() > first })
	if n := px.Stall(); n != 1 {
		t.Fatalf("stalled %d connections, want the instance's one", n)
	}
	stalled, last := time.Now(), rev()
	// A refresh from now on comes over a new connection.
	poll.Until(t, lease, "the lease refreshed over a new connection", func() bool { return rev() > last })
	t.Logf("the lease refreshed again %v after the connection stalled (lease %v)", time.Since(stalled).Round(time.Millisecond), lease)
}

// tasks/stream on B of a task A runs: its events, read from the store they
// share, come as they would on A, live, to the end; over HTTP and WebSocket.
func TestClusterTaskStream(t *testing.T) {
	a, b := twoInstances(t)
	for name, dial := range map[string]func() transport.Conn{
		"HTTP": func() transport.Conn { return httptransport.Dial(b.URL, nil) },
		"WebSocket": func() transport.Conn {
			c, err := ws.Dial(t.Context(), b.WS, nil)
			if err != nil {
				t.Fatal(err)
			}
			return c
		},
	} {
		t.Run(name, func(t *testing.T) {
			var out, errw bytes.Buffer
			if err := run([]string{"call", "--url", a.URL, "--task", "--detach", "countdown", "seconds=1", "steps=4"}, nil, &out, &errw); err != nil {
				t.Fatalf("call --task --detach on A: %v\n%s", err, errw.String())
			}
			id := strings.TrimSpace(out.String())
			c := e2etest.NewClient(t, dial())
			c.Initialize(`{}`)
			c.Send(`{"jsonrpc":"2.0","id":"s","method":"tasks/stream","params":{"taskId":%q}}`, id)
			resp, before := c.Response(`"s"`)
			var got []string
			for _, ev := range e2etest.TaskEvents(before) {
				got = append(got, fmt.Sprintf("%d:%s", ev.Seq, ev.Type))
			}
			if resp.Error != nil || strings.Join(got, " ") != "0:progress 1:progress 2:progress 3:progress 4:status" {
				t.Fatalf("on B: %v; response %s", got, resp.Raw)
			}
		})
	}
}

// An HTTP session is the cluster's, not its instance's: initialized on A, its
// next requests are served by B, which takes it up from the cluster's share,
// for its principal only; ended on B, it is unknown everywhere it was not
// already taken up.
func TestClusterSharesSessions(t *testing.T) {
	ns := natsInProcess(t)
	keys := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(keys, []byte("alice:k-alice\nbob:k-bob\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := func(name string) string {
		return "serve --http 127.0.0.1:0 --api-keys " + keys + " --nats-url " + ns.ClientURL() + " --instance " + name
	}
	a := spawnNet(t, args("a"), 1)[0]
	b := spawnNet(t, args("b"), 1)[0]
	post := func(url, key, sid, body string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+key)
		if sid != "" {
			req.Header.Set(httptransport.HeaderSessionID, sid)
			req.Header.Set(httptransport.HeaderProtocolVersion, "2025-11-25")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		got, _ := io.ReadAll(resp.Body)
		return resp, string(got)
	}
	resp, _ := post(a.URL, "k-alice", "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	sid := resp.Header.Get(httptransport.HeaderSessionID)
	if sid == "" {
		t.Fatalf("initialize on A: %s, no session", resp.Status)
	}
	if resp, body := post(b.URL, "k-alice", sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("initialized on B: %s %s", resp.Status, body)
	}
	call := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"from B"}}}`
	if resp, body := post(b.URL, "k-alice", sid, call); resp.StatusCode != http.StatusOK || !strings.Contains(body, `"text":"from B"`) {
		t.Fatalf("a call on B in A's session: %s %s", resp.Status, body)
	}
	if resp, body := post(b.URL, "k-bob", sid, call); resp.StatusCode != http.StatusNotFound || !strings.Contains(body, string(spec.ReasonUnknownSession)) {
		t.Fatalf("alice's session as bob on B: %s %s; want 404 %s", resp.Status, body, spec.ReasonUnknownSession)
	}
	req, _ := http.NewRequest(http.MethodDelete, b.URL, nil)
	req.Header.Set("Authorization", "Bearer k-alice")
	req.Header.Set(httptransport.HeaderSessionID, sid)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("DELETE on B: %v %v", resp, err)
	}
	if resp, body := post(b.URL, "k-alice", sid, call); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("a call on B after DELETE: %s %s; want 404", resp.Status, body)
	}
}
