package jsstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"iter"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/mcp-resume/mcp-resume/resume"
	"github.com/mcp-resume/mcp-resume/resume/jsstore"
	"github.com/mcp-resume/mcp-resume/resume/jsstore/embedded"
	"github.com/mcp-resume/mcp-resume/testkit/faultproxy"
	"github.com/mcp-resume/mcp-resume/testkit/logbuf"
	"github.com/mcp-resume/mcp-resume/testkit/poll"
)

// outage is one way for NATS to go away while requests run.
type outage struct {
	name string
	// reconnectBuf is the client's nats.ReconnectBufSize: 0 for its default
	// (8 MiB: what is published while reconnecting is sent after), -1 for none (a
	// publish while reconnecting fails at once).
	reconnectBuf int
	// cut: the network to NATS goes down (a proxy closes every connection and
	// refuses new ones) while the server runs on; otherwise the server stops and
	// starts again on the same directory and port.
	cut bool
	// again: how many more cuts follow the first outage, a second apart; the
	// requests move again after each.
	again int
	// outageWait is the store's Options.OutageWait, 0 for its default. When set,
	// the outage lasts until an Append of every request has failed.
	outageWait time.Duration
}

// TestOutage: NATS restarts, or is unreachable for a while (once, or ten times a
// second apart), as requests keep appending messages; meanwhile a client resumes one (a Replay) and another is
// cancelled (a Delete). The requests keep running. With the default OutageWait
// each store call during the outage waits and succeeds after it; past a short one
// it fails and the engine carries on. Either way every message whose Append
// succeeded is replayed, in order, and nothing else (by this process; a new
// process may also find a message whose Append failed, never one that was not
// appended, nor one twice); a request completed after the outage gives all of it
// to a client that resumes; and once the requests end nothing is left in NATS.
func TestOutage(t *testing.T) {
	for _, o := range []outage{
		{name: "restart"},
		{name: "restart-unbuffered", reconnectBuf: -1},
		{name: "cut", cut: true},
		{name: "ten-cuts", cut: true, again: 9},
		{name: "longer-than-OutageWait", outageWait: 300 * time.Millisecond},
	} {
		t.Run(o.name, func(t *testing.T) { testOutage(t, o) })
	}
}

func testOutage(t *testing.T, o outage) {
	ctx := t.Context()
	srv := listen(t, t.TempDir())
	url := "nats://" + srv.addr
	var px *faultproxy.Proxy
	if o.cut {
		px = faultproxy.New(t, srv.addr, faultproxy.NoCut, faultproxy.NoCut)
		url = "nats://" + px.Addr()
	}
	nc, js := dialNATS(t, url, o.reconnectBuf)
	sopts := &jsstore.Options{OutageWait: o.outageWait}
	st, err := openStore(t, js, sopts)
	if err != nil {
		t.Fatal(err)
	}
	var logs logbuf.Buffer
	log := zerolog.New(&logs)
	ws := &watched{Store: st, calls: make(map[call]int), busy: make(map[call]int)}
	// A budget nothing reaches, and no progress history: every message
	// appended is to be replayed (the writers' progress of one token, over
	// the test's minute), and the writers append as fast as the store takes
	// their messages (in packs, over 1 MiB within the test).
	e := mustNew(t, ws, &resume.Options{Logger: &log, QueueBytes: 1 << 30, ProgressHistory: -1})

	writers := newWriters(t, e)
	victim, tok, err := e.Start([]byte(`"cancelled"`), &resume.StartOptions{AckMode: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := victim.Append(resume.KindProgress, "p", encodeAs(`"cancelled"`, "progress")); err != nil {
		t.Fatal(err)
	}
	vh := resume.HashToken(tok)
	var side sync.WaitGroup // the Replay and the Cancel
	stopWriters := runWriters(writers)
	t.Cleanup(func() { // after ctx is cancelled
		e.Close() // ends the store calls that wait
		stopWriters()
		side.Wait()
	})
	each := func(f func(w *writer) bool) func() bool { return all(writers, f) }

	waitFor(t, "5 messages of each request", each(func(w *writer) bool { return w.acked() >= 5 }))
	reached := make(map[*writer]int)
	for _, w := range writers {
		reached[w] = ws.count(call{"write", w.h})
	}
	began := time.Now()
	if o.cut {
		px.Down()
	} else {
		srv.stop()
	}
	waitFor(t, "the client to lose NATS", func() bool { return nc.Status() != nats.CONNECTED })
	// A write in progress now runs during the outage, whenever it began. (The
	// attached request's Append writes its message to the client and then
	// discards it: it may wait in Discard.)
	waitFor(t, "a write of each request in the store during the outage", each(func(w *writer) bool { return ws.busySince(call{"write", w.h}, reached[w]) }))
	// Meanwhile a client resumes request 0 (its messages are read from the
	// store), and request "cancelled" is cancelled (deleted from the store).
	w0 := writers[0]
	ackedBefore := w0.acked()
	var during []resume.Message
	var duringErr error
	side.Go(func() { during, duringErr = replayErr(ctx, ws, w0.h) })
	side.Go(victim.Cancel)
	waitFor(t, "the Replay and the Delete in the store", func() bool {
		return ws.busySince(call{"replay", w0.h}, 0) && ws.busySince(call{"delete", vh}, 0)
	})
	if o.outageWait > 0 {
		waitFor(t, "an Append of each request to fail", each(func(w *writer) bool { return w.failed() > 0 }))
		side.Wait() // the Replay and the Delete fail too
	}
	if o.cut {
		px.Up()
	} else {
		srv.start()
	}
	reconnected := func() bool {
		if nc.Status() != nats.CONNECTED {
			return false
		}
		_, err := js.AccountInfo(ctx)
		return err == nil
	}
	waitFor(t, "the client to reconnect", reconnected)
	outage := time.Since(began)
	acked := make(map[*writer]int)
	for _, w := range writers {
		acked[w] = w.acked()
	}
	defer func() {
		if t.Failed() {
			for _, w := range writers {
				t.Logf("request %s: %d appended (%d at the reconnect), %d failed, attached %v, %+v", w.id, w.acked(), acked[w], w.failed(), w.out != nil, w.r.Status())
			}
		}
	}()
	waitFor(t, "5 more messages of each request", each(func(w *writer) bool { return w.acked() >= acked[w]+5 }))
	for i := range o.again {
		time.Sleep(time.Until(began.Add(time.Duration(i+1) * time.Second))) // the pace of the cuts, not a wait for anything
		px.Down()
		waitFor(t, fmt.Sprintf("the client to lose NATS (cut %d)", i+2), func() bool { return nc.Status() != nats.CONNECTED })
		px.Up()
		waitFor(t, fmt.Sprintf("the client to reconnect (cut %d)", i+2), reconnected)
		back := time.Now()
		for _, w := range writers {
			acked[w] = w.acked()
		}
		waitFor(t, fmt.Sprintf("5 more messages of each request (cut %d)", i+2), each(func(w *writer) bool { return w.acked() >= acked[w]+5 }))
		t.Logf("cut %d: the requests moved again %v after the reconnect", i+2, time.Since(back).Round(time.Millisecond))
	}
	stopWriters()
	side.Wait()

	// The Replay during the outage gave what was appended at the time, or (past
	// the OutageWait) an error; the cancelled request is gone, from the store
	// too unless its Delete failed.
	w0.mu.Lock()
	ok0 := w0.ok
	w0.mu.Unlock()
	complete := duringErr == nil && len(during) >= ackedBefore
	if duringErr != nil && o.outageWait > 0 {
		complete = true // the prefix before the error will do
	}
	if !complete || !sameMessages(during, ok0[:min(len(during), len(ok0))]) {
		t.Errorf("request 0: a Replay during the outage: %v, %d messages, want at least the %d appended before:\n%s", duringErr, len(during), ackedBefore, diff(during, ok0))
	}
	if !victim.Gone() {
		t.Errorf("the request cancelled during the outage is not gone")
	}
	_, err = st.Get(ctx, vh)
	switch {
	case o.outageWait == 0 && !errors.Is(err, resume.ErrNotFound):
		t.Errorf("the request cancelled during the outage: Get: %v, want %v", err, resume.ErrNotFound)
	case o.outageWait > 0 && err != nil: // its Delete failed: the next ones purge it (checked at the end)
		t.Errorf("the request cancelled during the outage, whose Delete failed: Get: %v, want its record", err)
	}

	// What a new process would see once this one's appends are stored (Append
	// returns before; the Put of a final state, Delete and Sweep wait for them).
	for _, w := range writers {
		if err := st.Sweep(ctx, w.h); err != nil {
			t.Errorf("request %s: Sweep: %v", w.id, err)
		}
	}
	fresh, err := openStore(t, js, sopts)
	if err != nil {
		t.Fatal(err)
	}
	var total, failures, orphans int
	var someErr error
	for _, w := range writers {
		if err := w.r.Context().Err(); err != nil || w.r.Status().State != resume.StateProcessing {
			t.Fatalf("request %s: context %v, state %s: it should run on", w.id, err, w.r.Status().State)
		}
		w.mu.Lock()
		ok, tried, errs := w.ok, w.tried, w.errs
		w.mu.Unlock()
		total, failures = total+len(tried), failures+len(errs)
		if len(errs) > 0 {
			someErr = errs[0]
		}
		if o.outageWait == 0 && len(errs) > 0 {
			t.Errorf("request %s: %d of %d Appends failed in an outage of %s: %v", w.id, len(errs), len(tried), outage, errs[0])
		}
		if w.out != nil { // delivered as appended, and discarded
			if got := w.out.got(); !sameMessages(got, ok) {
				t.Errorf("request %s: the client got %d messages, want the %d appended:\n%s", w.id, len(got), len(ok), diff(got, ok))
			}
			continue
		}
		if got := replay(t, st, w.h); !sameMessages(got, ok) {
			t.Errorf("request %s: replayed %d messages, want the %d appended:\n%s", w.id, len(got), len(ok), diff(got, ok))
		}
		// A new process indexes the request from the stream: it finds every
		// message appended, and may find one whose Append failed; each once.
		got := replay(t, fresh, w.h)
		var prev uint64
		for _, m := range got {
			if m.Seq <= prev || tried[m.Seq] != string(m.Data) {
				t.Fatalf("request %s: a new process replays message %d %q after %d; tried: %q", w.id, m.Seq, m.Data, prev, tried[m.Seq])
			}
			prev = m.Seq
		}
		if !sameMessages(withoutFailed(got, ok), ok) {
			t.Errorf("request %s: a new process replays %d messages, want the %d appended:\n%s", w.id, len(got), len(ok), diff(got, ok))
		}
		orphans += len(got) - len(ok)
	}
	t.Logf("outage of %s: %d Appends, %d failed (%v), of which a new process finds %d; a Replay during it: %v; %d warnings logged by the engine",
		outage.Round(time.Millisecond), total, failures, someErr, orphans, duringErr, strings.Count(logs.String(), `"level":"warn"`))

	// Completed after the outage, each request is resumable with all of it.
	for _, w := range writers {
		final, err := w.r.Complete(false, encodeAs(w.id, "result"))
		if err != nil {
			t.Fatal(err)
		}
		want := append(w.ok, resume.Message{Seq: final, Kind: resume.KindResponse, Data: encodeAs(w.id, "result")(final)})
		out := w.out
		if out == nil {
			// A resume whose read of the store fails (a timeout on a loaded
			// machine: jsTimeout) ends the attachment with what it wrote; the
			// client resumes again, as here, on a sink of its own.
			for try := 1; ; try++ {
				failedReads := strings.Count(logs.String(), "replaying queued messages")
				out = &sink{}
				if err := w.r.Attach(out, 0); err != nil {
					t.Fatal(err)
				}
				readFailed := strings.Count(logs.String(), "replaying queued messages") > failedReads
				if sameMessages(out.got(), want) || !readFailed || try == 5 {
					break
				}
				t.Logf("request %s: resume %d got %d messages of %d; resuming again", w.id, try, len(out.got()), len(want))
				w.r.Detach(out)
			}
		} else {
			// Complete writes the response itself unless a drain of the
			// request's attachment is under way (one that began after the
			// outage may still be replaying): then that drain writes it.
			poll.Until(t, 10*time.Second, "the response to reach the attached client", func() bool { return len(out.got()) >= len(want) })
		}
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

// TestRecordsOutage: Records waits for NATS to come back, as the writes do, and
// lists every record; past the OutageWait it fails rather than hang.
func TestRecordsOutage(t *testing.T) {
	ctx := t.Context()
	srv := listen(t, t.TempDir())
	nc, js := dialNATS(t, "nats://"+srv.addr, 0)
	st, err := openStore(t, js, nil)
	if err != nil {
		t.Fatal(err)
	}
	short, err := openStore(t, js, &jsstore.Options{OutageWait: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	want := make(map[resume.TokenHash]bool)
	for i := range 20 {
		h := resume.HashToken(fmt.Sprint("token ", i))
		if err := st.Put(ctx, resume.Record{Hash: h, ID: []byte(fmt.Sprint(i)), State: resume.StateProcessing, Created: time.Now()}); err != nil {
			t.Fatal(err)
		}
		want[h] = true
	}
	list := func(st *jsstore.Store) (map[resume.TokenHash]bool, error) {
		got := make(map[resume.TokenHash]bool)
		for rec, err := range st.Records(ctx) {
			if err != nil {
				return got, err
			}
			got[rec.Hash] = true
		}
		return got, nil
	}

	srv.stop()
	waitFor(t, "the client to lose NATS", func() bool { return nc.Status() != nats.CONNECTED })
	var listed map[resume.TokenHash]bool
	var listErr error
	var wg sync.WaitGroup
	wg.Go(func() { listed, listErr = list(st) })
	began := time.Now()
	if got, err := list(short); err == nil {
		t.Errorf("Records with NATS gone for longer than the OutageWait: %d records and no error", len(got))
	} else {
		t.Logf("Records with NATS gone for longer than the OutageWait: %v after %s", err, time.Since(began).Round(time.Millisecond))
	}
	srv.start()
	wg.Wait()
	if listErr != nil || len(listed) != len(want) {
		t.Fatalf("Records through the restart: %d records, %v; want %d", len(listed), listErr, len(want))
	}
	for h := range want {
		if !listed[h] {
			t.Fatalf("Records through the restart: %x missing", h[:6])
		}
	}
}

// jsTimeout is the outage tests' JetStream timeout: a publish lost in a cut is
// tried again after it, and every read and API call waits at most that long. It
// is short so that a lost publish is retried within a cut's second, and long
// enough for a read on a machine loaded with the race detector and busy loops.
const jsTimeout = time.Second

// openStore is jsstore.New on a connection of dialNATS, whose requests wait
// jsTimeout at most: its stream and bucket are made under the bound the binary
// gives them (30 s), which a loaded machine can need (the bucket's creation took
// longer than jsTimeout in a -count=20 sweep beside busy loops).
func openStore(t *testing.T, js jetstream.JetStream, opts *jsstore.Options) (*jsstore.Store, error) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	return jsstore.New(ctx, js, opts)
}

// dialNATS connects to url with the reconnect options of a client that rides out
// an outage: reconnect forever, soon (reconnectBuf as in outage).
func dialNATS(t *testing.T, url string, reconnectBuf int) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	copts := []nats.Option{
		nats.MaxReconnects(-1), nats.ReconnectWait(5 * time.Millisecond), nats.ReconnectJitter(0, 0),
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}), // not the default's print to stderr
	}
	if reconnectBuf != 0 {
		copts = append(copts, nats.ReconnectBufSize(reconnectBuf))
	}
	nc, err := nats.Connect(url, copts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	// A publish in flight when the connection drops is never answered (the
	// client keeps waiting for the reply after reconnecting); it is tried again
	// once this timeout passes (5 seconds by default). A timeout with NATS up
	// costs a try more, nothing else (jsTimeout).
	js, err := jetstream.New(nc, jetstream.WithDefaultTimeout(jsTimeout))
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// newWriters starts the requests of an outage test on e: three detached in ack
// mode (the store keeps every message until acknowledged), one attached to a
// client without acks (each message is discarded once written).
func newWriters(t *testing.T, e *resume.Engine) []*writer {
	t.Helper()
	var writers []*writer
	for i := range 4 {
		w := &writer{id: fmt.Sprint(i), tried: make(map[uint64]string)}
		so := &resume.StartOptions{AckMode: true}
		if i == 3 {
			w.out = &sink{}
			so = &resume.StartOptions{Sink: w.out}
		}
		r, tok, err := e.Start([]byte(w.id), so)
		if err != nil {
			t.Fatal(err)
		}
		w.r, w.h = r, resume.HashToken(tok)
		writers = append(writers, w)
	}
	return writers
}

// runWriters makes each writer append until the returned stop, which waits for
// them (and may be called more than once).
func runWriters(writers []*writer) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for _, w := range writers {
		wg.Go(func() { w.run(done) })
	}
	var once sync.Once
	return func() { once.Do(func() { close(done); wg.Wait() }) }
}

// all returns a condition that holds when f holds for every writer.
func all(writers []*writer, f func(w *writer) bool) func() bool {
	return func() bool {
		for _, w := range writers {
			if !f(w) {
				return false
			}
		}
		return true
	}
}

// writer appends progress messages to its request until stopped.
type writer struct {
	id  string
	r   *resume.Request
	h   resume.TokenHash
	out *sink // the attached client; nil: the request is detached, in ack mode

	mu    sync.Mutex        // guards the fields below
	ok    []resume.Message  // appended: Append returned nil
	tried map[uint64]string // every message given to Append, by seq
	errs  []error           // of the Appends that failed
}

func (w *writer) run(stop <-chan struct{}) {
	for n := 1; ; n++ {
		select {
		case <-stop:
			return
		default:
		}
		var m resume.Message
		_, err := w.r.Append(resume.KindProgress, "p", func(seq uint64) []byte {
			m = resume.Message{Seq: seq, Kind: resume.KindProgress, Key: "p", Data: fmt.Appendf(nil, `{"request":%s,"n":%d}`, w.id, n)}
			return m.Data
		})
		w.mu.Lock()
		w.tried[m.Seq] = string(m.Data)
		if err == nil {
			w.ok = append(w.ok, m)
		} else {
			w.errs = append(w.errs, err)
		}
		w.mu.Unlock()
	}
}

func (w *writer) acked() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.ok)
}

func (w *writer) failed() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.errs)
}

// watched is the store, counting the calls that reach it and those in progress:
// writes (Append, Discard), deletes, replays.
type watched struct {
	*jsstore.Store
	mu    sync.Mutex // guards calls and busy
	calls map[call]int
	busy  map[call]int
}

// call is a kind of store call for one request.
type call struct {
	op string // "write", "delete", "replay"
	h  resume.TokenHash
}

func (s *watched) Append(ctx context.Context, h resume.TokenHash, m resume.Message) error {
	defer s.enter(call{"write", h})()
	return s.Store.Append(ctx, h, m)
}

func (s *watched) Discard(ctx context.Context, h resume.TokenHash, seqs ...uint64) error {
	defer s.enter(call{"write", h})()
	return s.Store.Discard(ctx, h, seqs...)
}

func (s *watched) Delete(ctx context.Context, h resume.TokenHash) error {
	defer s.enter(call{"delete", h})()
	return s.Store.Delete(ctx, h)
}

func (s *watched) Replay(ctx context.Context, h resume.TokenHash, after uint64) iter.Seq2[resume.Message, error] {
	return func(yield func(resume.Message, error) bool) {
		defer s.enter(call{"replay", h})()
		s.Store.Replay(ctx, h, after)(yield)
	}
}

// enter counts a call, and returns the function that ends it.
func (s *watched) enter(c call) (leave func()) {
	s.mu.Lock()
	s.calls[c]++
	s.busy[c]++
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		s.busy[c]--
		s.mu.Unlock()
	}
}

// busySince reports whether a call c is in progress, or one has begun since n
// had.
func (s *watched) busySince(c call, n int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.busy[c] > 0 || s.calls[c] > n
}

func (s *watched) count(c call) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[c]
}

// replay returns every message a store replays for request h.
//
// A read that times out is made again, as a client's resume would be: the
// outage tests give the store's JetStream calls a short timeout (jsTimeout),
// which a read on a loaded machine can take; what the tests check is what the
// store holds, not how fast.
func replay(t *testing.T, st resume.Store, h resume.TokenHash) []resume.Message {
	t.Helper()
	for try := 1; ; try++ {
		out, err := replayErr(t.Context(), st, h)
		switch {
		case err == nil:
			return out
		case !errors.Is(err, context.DeadlineExceeded) || try == 20 || t.Context().Err() != nil:
			t.Fatalf("replaying %x (try %d): %v", h[:6], try, err)
		}
	}
}

// replayErr returns the messages a store replays for request h, up to an error.
func replayErr(ctx context.Context, st resume.Store, h resume.TokenHash) ([]resume.Message, error) {
	var out []resume.Message
	for m, err := range st.Replay(ctx, h, 0) {
		if err != nil {
			return out, err
		}
		out = append(out, m)
	}
	return out, nil
}

func sameMessages(got, want []resume.Message) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Seq != w.Seq || g.Kind != w.Kind || g.Key != w.Key || !bytes.Equal(g.Data, w.Data) {
			return false
		}
	}
	return true
}

// withoutFailed returns the messages of got that are in ok (by seq).
func withoutFailed(got, ok []resume.Message) []resume.Message {
	in := make(map[uint64]bool, len(ok))
	for _, m := range ok {
		in[m.Seq] = true
	}
	var out []resume.Message
	for _, m := range got {
		if in[m.Seq] {
			out = append(out, m)
		}
	}
	return out
}

func diff(got, want []resume.Message) string {
	var b strings.Builder
	for i := range max(len(got), len(want)) {
		var g, w string
		if i < len(got) {
			g = fmt.Sprintf("%d %s", got[i].Seq, got[i].Data)
		}
		if i < len(want) {
			w = fmt.Sprintf("%d %s", want[i].Seq, want[i].Data)
		}
		mark := " "
		if g != w {
			mark = "!"
		}
		fmt.Fprintf(&b, "%s got %-40s want %s\n", mark, g, w)
	}
	return b.String()
}

// waitFor polls cond until it holds, for at most 20 seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, 20*time.Second, what, cond)
}

// listening is an embedded NATS server on loopback, with sync always, that
// stops and starts again on the same directory and port.
type listening struct {
	t    testing.TB
	dir  string
	addr string
	srv  *embedded.Server // nil while stopped
}

func listen(t testing.TB, dir string) *listening {
	l := &listening{t: t, dir: dir, addr: "127.0.0.1:0"}
	l.start()
	l.addr = l.srv.Addr()
	t.Cleanup(l.stop)
	return l
}

func (l *listening) start() {
	srv, err := embedded.Start(&embedded.Options{Dir: l.dir, Listen: l.addr, SyncAlways: true})
	if err != nil {
		l.t.Fatal(err)
	}
	l.srv = srv
}

func (l *listening) stop() {
	if l.srv != nil {
		l.srv.Shutdown()
		l.srv = nil
	}
}

// TestCompleteOutlivesOutage: a request completes while NATS is gone for longer
// than the store waits. Its final response is tried again until NATS is back,
// then stored: the client that resumes gets it, and so does a new process.
func TestCompleteOutlivesOutage(t *testing.T) {
	ctx := t.Context()
	srv := listen(t, t.TempDir())
	nc, js := dialNATS(t, "nats://"+srv.addr, 0)
	st, err := openStore(t, js, &jsstore.Options{OutageWait: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ws := &watched{Store: st, calls: make(map[call]int), busy: make(map[call]int)}
	e := mustNew(t, ws, nil)
	defer e.Close()
	r, tok, err := e.Start([]byte(`"late"`), &resume.StartOptions{AckMode: true})
	if err != nil {
		t.Fatal(err)
	}
	h := resume.HashToken(tok)
	if _, err := r.Append(resume.KindProgress, "p", encodeAs(`"late"`, "progress")); err != nil {
		t.Fatal(err)
	}
	srv.stop()
	waitFor(t, "the client to lose NATS", func() bool { return nc.Status() != nats.CONNECTED })
	before := ws.count(call{"write", h})
	done := make(chan error, 1)
	var final uint64
	go func() {
		var err error
		final, err = r.Complete(false, encodeAs(`"late"`, "result"))
		done <- err
	}()
	waitFor(t, "the final response to be tried twice", func() bool { return ws.count(call{"write", h}) >= before+2 })
	if s := r.Status().State; s != resume.StateProcessing {
		t.Fatalf("state %s before the response is stored, want processing", s)
	}
	srv.start()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Complete: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Complete did not return within 20 s of NATS coming back")
	}
	out := &sink{}
	if err := r.Attach(out, 0); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, "the response", func() bool { return len(out.got()) == 2 })
	if got := out.got(); got[1].Seq != final || got[1].Kind != resume.KindResponse {
		t.Fatalf("resumed with %d messages, the last %d; want the response %d", len(got), got[1].Seq, final)
	}
	if err := st.Sweep(ctx, h); err != nil {
		t.Fatal(err)
	}
	fresh, err := openStore(t, js, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := replay(t, fresh, h); len(got) != 2 || got[1].Seq != final {
		t.Fatalf("a new process replays %d messages; want the progress and the response", len(got))
	}
}
