package jsstore_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcp-resume/mcp-resume/resume"
	"github.com/mcp-resume/mcp-resume/resume/jsstore"
)

// sink collects what is written to it.
type sink struct {
	mu   sync.Mutex // guards msgs
	msgs []resume.Message
}

func (s *sink) Write(_ context.Context, m resume.Message) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	m.Data = append([]byte(nil), m.Data...)
	s.msgs = append(s.msgs, m)
	return nil
}

func (s *sink) got() []resume.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]resume.Message(nil), s.msgs...)
}

func encodeAs(id, what string) func(seq uint64) []byte {
	return func(seq uint64) []byte {
		return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"result":{"what":%q,"_meta":{"io.mcp-resume/seq":%d}}}`, id, what, seq)
	}
}

type started struct {
	id, tok string
	r       *resume.Request
}

// TestRestart: an engine on a file-backed JetStream store, with completed and
// running requests, stops with its server; a new server, store and engine on the
// same directory give every completed result back on resume, and answer for every
// running request with a failed status and the server_restarted error.
func TestRestart(t *testing.T) {
	const n = 50
	dir := t.TempDir()
	ctx := context.Background()
	js, stop := startServer(t, dir, false)
	st, err := jsstore.New(ctx, js, nil)
	if err != nil {
		t.Fatal(err)
	}
	e1 := mustNew(t, st, nil)
	var done, running []started
	for i := range n {
		id := fmt.Sprint(i)
		r, tok, err := e1.Start([]byte(id), nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Append(resume.KindProgress, "p", encodeAs(id, "progress")); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Complete(false, encodeAs(id, "result")); err != nil {
			t.Fatal(err)
		}
		done = append(done, started{id, tok, r})

		id = fmt.Sprintf(`"run-%d"`, i)
		r, tok, err = e1.Start([]byte(id), nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Append(resume.KindRequest, "", encodeAs(id, "elicit")); err != nil {
			t.Fatal(err)
		}
		running = append(running, started{id, tok, r})
	}
	e1.Close()
	stop() // the server stops with the process's engine: nothing is deleted

	js, _ = startServer(t, dir, false)
	st, err = jsstore.New(ctx, js, nil)
	if err != nil {
		t.Fatal(err)
	}
	e2 := mustNew(t, st, nil)
	defer e2.Close()
	if got := e2.Live(); got != 2*n {
		t.Fatalf("recovered %d requests, want %d", got, 2*n)
	}
	for _, c := range done {
		r := recoveredCompleted(t, e2, c)
		var out sink
		if err := r.Attach(&out, 0); err != nil {
			t.Fatal(err)
		}
		got := out.got()
		if len(got) != 2 || got[0].Seq != 1 || got[1].Seq != 2 || got[1].Kind != resume.KindResponse ||
			string(got[1].Data) != string(encodeAs(c.id, "result")(2)) {
			t.Fatalf("%s: replayed %+v", c.id, got)
		}
		if err := r.Touch(2); err != nil || !r.Gone() {
			t.Fatalf("%s: ack: %v, gone %v", c.id, err, r.Gone())
		}
	}
	for _, c := range running {
		r, err := e2.Lookup(c.tok, []byte(c.id))
		if err != nil {
			t.Fatalf("Lookup(%s): %v", c.id, err)
		}
		if s := r.Status(); s.State != resume.StateFailed || !s.HasPending || s.HasInput {
			t.Fatalf("%s: status %+v, want failed with the response pending and no input", c.id, s)
		}
		var out sink
		if err := r.Attach(&out, 0); err != nil {
			t.Fatal(err)
		}
		got := out.got()
		// The response is the first message of the request's next epoch.
		if len(got) != 1 || got[0].Seq != 1<<32+1 || got[0].Kind != resume.KindResponse {
			t.Fatalf("%s: replayed %+v", c.id, got)
		}
		var resp struct {
			ID    json.RawMessage `json:"id"`
			Error struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(got[0].Data, &resp); err != nil {
			t.Fatal(err)
		}
		if string(resp.ID) != c.id || resp.Error.Code != -32603 || resp.Error.Message != resume.ErrRestarted.Error() || !got[0].Failed {
			t.Fatalf("%s: response %s", c.id, got[0].Data)
		}
		if err := r.Touch(got[0].Seq); err != nil || !r.Gone() {
			t.Fatalf("%s: ack: %v, gone %v", c.id, err, r.Gone())
		}
	}
	msgs, keys := usage(t, js, jsstore.Options{})
	if msgs != 0 || keys != 0 {
		t.Fatalf("after every result was acknowledged: %d stream messages, %d bucket messages left", msgs, keys)
	}
}

// usage returns how many messages the store's stream and its bucket's stream hold.
func usage(t testing.TB, js jetstream.JetStream, o jsstore.Options) (msgs, keys uint64) {
	t.Helper()
	msgs, keys, err := usageErr(js, o)
	if err != nil {
		t.Fatal(err)
	}
	return msgs, keys
}

func usageErr(js jetstream.JetStream, o jsstore.Options) (msgs, keys uint64, err error) {
	// Longer than the outage tests' JetStream timeout, which a loaded machine
	// can take to answer.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if o.Stream == "" {
		o.Stream = "MCP_RESUME"
	}
	if o.Bucket == "" {
		o.Bucket = "mcp-resume"
	}
	var n [2]uint64
	for i, name := range []string{o.Stream, "KV_" + o.Bucket} {
		s, err := js.Stream(ctx, name)
		if err != nil {
			return 0, 0, err
		}
		info, err := s.Info(ctx)
		if err != nil {
			return 0, 0, err
		}
		n[i] = info.State.Msgs
	}
	return n[0], n[1], nil
}

// TestScale: many requests started, given a progress message and a result, and
// acknowledged, leave nothing behind in the stream or the bucket. MR_SCALE sets
// the count (default 2,000; the numbers in the README are from 10,000 and
// 100,000). The NATS server runs in a child process (natsProc), so that the
// memory reported is ours and the server's apart; with MR_SCALE_NATS=in-process
// it runs in this process, as with `serve --data-dir`.
func TestScale(t *testing.T) {
	n := envInt("MR_SCALE", 2000)
	if testing.Short() {
		n = min(n, 500)
	}
	ctx := context.Background()
	var js jetstream.JetStream
	var proc *natsProcess
	if os.Getenv("MR_SCALE_NATS") == "in-process" {
		js, _ = startServer(t, "", false)
	} else {
		proc = startNATSProcess(t)
		nc, err := nats.Connect(proc.URL)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		if js, err = jetstream.New(nc); err != nil {
			t.Fatal(err)
		}
	}
	st, err := jsstore.New(ctx, js, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Results stay until acknowledged (no retention window ends during a long run).
	e := mustNew(t, st, &resume.Options{MaxLive: n, MaxRetained: n, Retention: time.Hour, DeliveredRetention: time.Hour})
	defer e.Close()
	ours0 := readMem()

	// The stream and the bucket are sampled as the requests run, for their peak.
	done := make(chan struct{})
	var sampler sync.WaitGroup
	var peakMsgs, peakKeys uint64
	sampler.Go(func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			msgs, keys, err := usageErr(js, jsstore.Options{})
			if err != nil {
				t.Error(err)
				return
			}
			peakMsgs, peakKeys = max(peakMsgs, msgs), max(peakKeys, keys)
		}
	})

	begin := time.Now()
	const workers = 16
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			var rs []*resume.Request
			var last []uint64
			for i := w; i < n; i += workers {
				id := fmt.Sprint(i)
				var out sink
				r, _, err := e.Start([]byte(id), &resume.StartOptions{Sink: &out})
				if err != nil {
					t.Error(err)
					return
				}
				if _, err := r.Append(resume.KindProgress, "p", encodeAs(id, "progress")); err != nil {
					t.Error(err)
					return
				}
				seq, err := r.Complete(false, encodeAs(id, "result"))
				if err != nil {
					t.Error(err)
					return
				}
				rs, last = append(rs, r), append(last, seq)
			}
			for i, r := range rs { // the clients acknowledge their results
				if err := r.Touch(last[i]); err != nil || !r.Gone() {
					t.Errorf("ack: %v, gone %v", err, r.Gone())
					return
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(begin)
	close(done)
	sampler.Wait()
	msgs, keys := usage(t, js, jsstore.Options{})
	t.Logf("%d requests in %s (%.0f/s); stream and bucket: at most %d and %d messages (sampled every 50ms), %d and %d at the end",
		n, took.Round(time.Millisecond), float64(n)/took.Seconds(), peakMsgs, peakKeys, msgs, keys)
	where := "in this process, which counts here"
	if proc != nil {
		where = "in a child process"
		m, err := proc.mem()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("the NATS server, at the end: %s", m)
	}
	t.Logf("this process (NATS %s): %s before, %s at the end", where, ours0, readMem())
	if msgs != 0 || keys != 0 {
		t.Fatalf("%d stream messages and %d bucket messages left after %d requests ended", msgs, keys, n)
	}
	if e.Live() != 0 {
		t.Fatalf("%d requests still live", e.Live())
	}
}

// completed starts n requests on e, ids 0 to n-1, and completes each with a
// result (encodeAs "result", sequence number 1).
func completed(t *testing.T, e *resume.Engine, n int) []started {
	t.Helper()
	var out []started
	for i := range n {
		id := fmt.Sprint(i)
		r, tok, err := e.Start([]byte(id), nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Complete(false, encodeAs(id, "result")); err != nil {
			t.Fatal(err)
		}
		out = append(out, started{id, tok, r})
	}
	return out
}

// recoveredCompleted looks c up on e, and checks it is completed with its result
// pending.
func recoveredCompleted(t *testing.T, e *resume.Engine, c started) resume.Handle {
	t.Helper()
	r, err := e.Lookup(c.tok, []byte(c.id))
	if err != nil {
		t.Fatalf("Lookup(%s): %v", c.id, err)
	}
	if s := r.Status(); s.State != resume.StateCompleted || !s.HasPending {
		t.Fatalf("%s: status %+v", c.id, s)
	}
	return r
}

// TestRecoverSkipsUnreadable: records the store cannot decode (damaged, or from a
// newer format) do not end a recovery: every readable request after them comes
// back, the unreadable ones are counted and stay in the bucket untouched.
func TestRecoverSkipsUnreadable(t *testing.T) {
	ctx := context.Background()
	js, _ := startServer(t, "", false)
	st, err := jsstore.New(ctx, js, nil)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, "mcp-resume")
	if err != nil {
		t.Fatal(err)
	}
	// Written first, so that a listing meets them before the good records.
	bad := map[string][]byte{
		strings.Repeat("ab", 32): {0xff, 1},                        // no such format
		strings.Repeat("cd", 32): {9, 1, 2, 3},                     // a format from the future
		strings.Repeat("ef", 32): {1, byte(resume.StateCompleted)}, // cut short
	}
	for k, v := range bad {
		if _, err := kv.Put(ctx, k, v); err != nil {
			t.Fatal(err)
		}
	}
	e1 := mustNew(t, st, nil)
	if got := e1.Stats().Unreadable; got != uint64(len(bad)) {
		t.Fatalf("first engine: Unreadable = %d, want %d", got, len(bad))
	}
	done := completed(t, e1, 3)
	e1.Close()

	var listed, unreadable int
	for _, err := range st.Records(ctx) {
		switch {
		case errors.Is(err, resume.ErrUnreadable):
			unreadable++
		case err != nil:
			t.Fatalf("Records: %v", err)
		default:
			listed++
		}
	}
	if listed != len(done) || unreadable != len(bad) {
		t.Fatalf("Records: %d records and %d unreadable, want %d and %d", listed, unreadable, len(done), len(bad))
	}

	e2 := mustNew(t, st, nil)
	defer e2.Close()
	if got := e2.Live(); got != len(done) {
		t.Fatalf("recovered %d requests, want %d", got, len(done))
	}
	if got := e2.Stats().Unreadable; got != uint64(len(bad)) {
		t.Fatalf("Unreadable = %d, want %d", got, len(bad))
	}
	for _, c := range done {
		recoveredCompleted(t, e2, c)
	}
	for k, v := range bad {
		e, err := kv.Get(ctx, k)
		if err != nil || !bytes.Equal(e.Value(), v) {
			t.Fatalf("unreadable record %s after recovery: %v, %x", k[:8], err, e.Value())
		}
	}
}

// TestRecoverLeavesUnreplayable: a request whose messages cannot be read back
// (here a message no version wrote; as well NATS away for longer than the store
// waits) is not recovered, and not deleted either: once the messages read again,
// the next process recovers it whole.
func TestRecoverLeavesUnreplayable(t *testing.T) {
	ctx := context.Background()
	js, _ := startServer(t, "", false)
	st, err := jsstore.New(ctx, js, nil)
	if err != nil {
		t.Fatal(err)
	}
	e1 := mustNew(t, st, nil)
	reqs := completed(t, e1, 2)
	e1.Close()
	h := resume.HashToken(reqs[0].tok)
	ack, err := js.Publish(ctx, "mr.msg."+hex.EncodeToString(h[:]), []byte("not a message"))
	if err != nil {
		t.Fatal(err)
	}

	// A new process: the damaged request is left, the other recovered.
	st2, err := jsstore.New(ctx, js, nil)
	if err != nil {
		t.Fatal(err)
	}
	e2 := mustNew(t, st2, nil)
	if got := e2.Live(); got != 1 {
		t.Fatalf("recovered %d requests, want 1", got)
	}
	if _, err := e2.Lookup(reqs[1].tok, []byte(reqs[1].id)); err != nil {
		t.Fatalf("the readable request: %v", err)
	}
	if _, err := st2.Get(ctx, h); err != nil {
		t.Fatalf("the request whose messages could not be read is no longer stored: %v", err)
	}
	e2.Close()

	// The bad message gone, the next process recovers it with its result.
	s, err := js.Stream(ctx, "MCP_RESUME")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteMsg(ctx, ack.Sequence); err != nil {
		t.Fatal(err)
	}
	st3, err := jsstore.New(ctx, js, nil)
	if err != nil {
		t.Fatal(err)
	}
	e3 := mustNew(t, st3, nil)
	defer e3.Close()
	r, err := e3.Lookup(reqs[0].tok, []byte(reqs[0].id))
	if err != nil {
		t.Fatalf("after the bad message went: %v", err)
	}
	var out sink
	if err := r.Attach(&out, 0); err != nil {
		t.Fatal(err)
	}
	if got := out.got(); len(got) != 1 || string(got[0].Data) != string(encodeAs(reqs[0].id, "result")(1)) {
		t.Fatalf("replayed %+v, want the result", got)
	}
}
