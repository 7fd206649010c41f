package jsstore_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/mcp-resume/mcp-resume/resume"
	"github.com/mcp-resume/mcp-resume/resume/jsstore"
	"github.com/mcp-resume/mcp-resume/testkit/jstest"
	"github.com/mcp-resume/mcp-resume/testkit/logbuf"
	"github.com/mcp-resume/mcp-resume/testkit/poll"
)

// TestLeaderLoss: on a JetStream cluster of three servers, with the stream and
// the bucket on three replicas, the server that leads both (and that the store
// is connected to) is shut down while requests append without pause, each with
// a write in the store at that moment. The store reconnects to another server,
// a new leader is elected, and the requests move again; every message whose
// Append succeeded is replayed, in order, and nothing else; each request
// completes and is resumed with all of it; nothing is left in the stream.
func TestLeaderLoss(t *testing.T) {
	c := jstest.StartCluster(t, 3)
	ctx := t.Context()
	admin, err := nats.Connect(c.URLs(0))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := jsstore.New(ctx, mustJS(t, admin), &jsstore.Options{Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	// Both streams led by server 0, which the store's connection is on.
	for _, name := range []string{"MCP_RESUME", "KV_mcp-resume"} {
		c.MoveStreamLeader(t, admin, name, 0)
	}
	admin.Close()
	nc, err := nats.Connect(c.URLs(0), nats.DontRandomize(), nats.MaxReconnects(-1), nats.ReconnectWait(5*time.Millisecond),
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if u := nc.ConnectedUrl(); u != c.URL(0) {
		t.Fatalf("the store's connection is on %s, not on server 0 (%s)", u, c.URL(0))
	}
	// The client's timeout (a try of each call) well above an election.
	js, err := jetstream.New(nc, jetstream.WithDefaultTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	st, err := openStore(t, js, &jsstore.Options{Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	var logs logbuf.Buffer
	log := zerolog.New(&logs)
	ws := &watched{Store: st, calls: make(map[call]int), busy: make(map[call]int)}
	// A budget nothing reaches, and no progress history: every message
	// appended is to be replayed, and the writers append as fast as the store
	// takes their messages (in packs, over 1 MiB within the test), as in
	// TestOutage.
	e := mustNew(t, ws, &resume.Options{Logger: &log, QueueBytes: 1 << 30, ProgressHistory: -1})

	writers := newWriters(t, e)
	stopWriters := runWriters(writers)
	t.Cleanup(func() {
		e.Close()
		stopWriters()
	})
	each := func(f func(w *writer) bool) func() bool { return all(writers, f) }

	waitFor(t, "5 messages of each request", each(func(w *writer) bool { return w.acked() >= 5 }))
	reached := make(map[*writer]int)
	for _, w := range writers {
		reached[w] = ws.count(call{"write", w.h})
	}
	waitFor(t, "a write of each request in the store", each(func(w *writer) bool { return ws.busySince(call{"write", w.h}, reached[w]) }))
	began := time.Now()
	c.Shutdown(0)
	leader := c.WaitStreamLeader(t, "MCP_RESUME")
	c.WaitStreamLeader(t, "KV_mcp-resume")
	waitFor(t, "the client to reconnect", func() bool { return nc.Status() == nats.CONNECTED })
	acked := make(map[*writer]int)
	for _, w := range writers {
		acked[w] = w.acked()
	}
	defer func() {
		if t.Failed() {
			for _, w := range writers {
				t.Logf("request %s: %d appended (%d after the election), %d failed, attached %v, %+v", w.id, w.acked(), acked[w], w.failed(), w.out != nil, w.r.Status())
			}
		}
	}()
	waitFor(t, "5 more messages of each request", each(func(w *writer) bool { return w.acked() >= acked[w]+5 }))
	t.Logf("server 0 shut down; %s leads; the requests moved again %v later", c.Name(leader), time.Since(began).Round(time.Millisecond))
	stopWriters()

	for _, w := range writers {
		if err := st.Sweep(ctx, w.h); err != nil {
			t.Fatalf("request %s: Sweep: %v", w.id, err)
		}
		w.mu.Lock()
		ok, errs := w.ok, w.errs
		w.mu.Unlock()
		if len(errs) > 0 {
			t.Errorf("request %s: %d Appends failed: %v", w.id, len(errs), errs[0])
		}
		if w.out != nil {
			if got := w.out.got(); !sameMessages(got, ok) {
				t.Errorf("request %s: the client got %d messages, want the %d appended:\n%s", w.id, len(got), len(ok), diff(got, ok))
			}
			continue
		}
		if got := replay(t, st, w.h); !sameMessages(got, ok) {
			t.Errorf("request %s: replayed %d messages, want the %d appended:\n%s", w.id, len(got), len(ok), diff(got, ok))
		}
	}
	for _, w := range writers {
		final, err := w.r.Complete(false, encodeAs(w.id, "result"))
		if err != nil {
			t.Fatal(err)
		}
		want := append(w.ok, resume.Message{Seq: final, Kind: resume.KindResponse, Data: encodeAs(w.id, "result")(final)})
		out := w.out
		if out == nil {
			out = &sink{}
			if err := w.r.Attach(out, 0); err != nil {
				t.Fatal(err)
			}
		}
		poll.Until(t, 10*time.Second, "the response to reach the client", func() bool { return len(out.got()) >= len(want) })
		if got := out.got(); !sameMessages(got, want) {
			t.Errorf("request %s: resumed with %d messages, want %d:\n%s", w.id, len(got), len(want), diff(got, want))
		}
		if err := w.r.Touch(final); err != nil || !w.r.Gone() {
			t.Fatalf("request %s: ack: %v, gone %v", w.id, err, w.r.Gone())
		}
	}
	if msgs, keys := usage(t, js, jsstore.Options{}); msgs != 0 || keys != 0 {
		t.Errorf("after every request ended: %d stream messages, %d bucket messages left", msgs, keys)
	}
}

func mustJS(t *testing.T, nc *nats.Conn) jetstream.JetStream {
	t.Helper()
	// A stream of three replicas is made once its raft group forms: on a
	// loaded machine (CI under -race) past the client's 5 s default.
	js, err := jetstream.New(nc, jetstream.WithDefaultTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return js
}
