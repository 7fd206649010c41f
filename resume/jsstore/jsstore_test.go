package jsstore_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/mcp-resume/mcp-resume/resume"
	"github.com/mcp-resume/mcp-resume/resume/jsstore"
	"github.com/mcp-resume/mcp-resume/resume/jsstore/embedded"
	"github.com/mcp-resume/mcp-resume/resume/storetest"
	"github.com/mcp-resume/mcp-resume/testkit/poll"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(natsProcEnv); dir != "" {
		os.Exit(natsProc(dir)) // a NATS server in a process of its own (natsproc_test.go)
	}
	// This binary's children (it, started again) exit without the race
	// runtime's second of sleep at exit (atexit_sleep_ms, 1000 by default).
	_ = os.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	goleak.VerifyTestMain(m)
}

// startServer starts an embedded NATS server on dir (a fresh one when dir is "")
// and returns a JetStream client on it; both stop when the test ends, or earlier
// through the returned function.
func startServer(t testing.TB, dir string, syncAlways bool) (jetstream.JetStream, func()) {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	srv, err := embedded.Start(&embedded.Options{Dir: dir, SyncAlways: syncAlways})
	if err != nil {
		t.Fatal(err)
	}
	nc, err := srv.Connect()
	if err != nil {
		srv.Shutdown()
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	var stopped atomic.Bool
	stop := func() {
		if stopped.CompareAndSwap(false, true) {
			nc.Close()
			srv.Shutdown()
		}
	}
	t.Cleanup(stop)
	return js, stop
}

var storeN atomic.Int64

// TestContract runs the Store contract against a real server, file storage, each
// subtest on a stream and bucket of its own.
// mustNew returns an engine over st, resume.New(t.Context(), st, opts),
// failing t on an error. The caller closes the engine.
func mustNew(t testing.TB, st resume.Store, opts *resume.Options) *resume.Engine {
	t.Helper()
	e, err := resume.New(t.Context(), st, opts)
	if err != nil {
		t.Fatalf("resume.New: %v", err)
	}
	return e
}

func TestContract(t *testing.T) {
	js, _ := startServer(t, "", false)
	storetest.Run(t, func(t *testing.T) resume.Store {
		n := storeN.Add(1)
		return newClosed(t, js, &jsstore.Options{
			Stream: fmt.Sprint("T", n), Subject: fmt.Sprint("t", n), Bucket: fmt.Sprint("t", n),
		})
	})
}

// newClosed returns a store that is closed when the test ends, before its
// server stops: nothing of it is left in flight (the window's resolver would
// otherwise wait out the client's timeout for publishes a stopped server never
// acknowledges, and outlive the tests).
func newClosed(t *testing.T, js jetstream.JetStream, o *jsstore.Options) *jsstore.Store {
	s, err := jsstore.New(context.Background(), js, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// TestContractFresh runs the contract through a second Store on the same stream
// and bucket as the one that wrote: every read goes to the server, none to what
// the writing process remembers.
func TestContractFresh(t *testing.T) {
	js, _ := startServer(t, "", false)
	storetest.Run(t, func(t *testing.T) resume.Store {
		n := storeN.Add(1)
		if strings.HasSuffix(t.Name(), "/Concurrent") {
			t.Skip("a fresh store per read makes this one slow; TestContract runs it")
		}
		o := &jsstore.Options{Stream: fmt.Sprint("F", n), Subject: fmt.Sprint("f", n), Bucket: fmt.Sprint("f", n)}
		return &coldReads{Store: newClosed(t, js, o), js: js, o: o}
	})
}

// coldReads writes through one Store and reads through a new one each time.
type coldReads struct {
	*jsstore.Store
	js jetstream.JetStream
	o  *jsstore.Options
}

func (c *coldReads) fresh() *jsstore.Store {
	s, err := jsstore.New(context.Background(), c.js, c.o)
	if err != nil {
		panic(err)
	}
	return s
}

func (c *coldReads) Get(ctx context.Context, h resume.TokenHash) (*resume.Record, error) {
	return c.fresh().Get(ctx, h)
}

// Replay reads through a fresh store once the writer's stream holds what its
// index does (its appends acknowledged, its discards deleted: Sweep).
func (c *coldReads) Replay(ctx context.Context, h resume.TokenHash, after uint64) iter.Seq2[resume.Message, error] {
	if err := c.Sweep(ctx, h); err != nil && !errors.Is(err, resume.ErrNotFound) {
		return func(yield func(resume.Message, error) bool) { yield(resume.Message{}, err) }
	}
	return c.fresh().Replay(ctx, h, after)
}

// TestPutFenced: two processes on one bucket. Once B has claimed a request of A
// (A's lease lapsed while A was cut off), A's store, which last wrote the record
// as its owner, can no longer write it: its Put fails with ErrClaimed and B's
// record stays. The revision A expected is stale, and the record read again is
// B's.
func TestPutFenced(t *testing.T) {
	ctx := context.Background()
	js, _ := startServer(t, "", false)
	o := &jsstore.Options{Stream: "FENCE", Subject: "fence", Bucket: "fence"}
	a, err := jsstore.New(ctx, js, o)
	if err != nil {
		t.Fatal(err)
	}
	b, err := jsstore.New(ctx, js, o)
	if err != nil {
		t.Fatal(err)
	}
	h := resume.HashToken("tok")
	rec := resume.Record{Hash: h, ID: []byte(`1`), State: resume.StateProcessing, Created: time.Unix(1, 0), Owner: "A"}
	if err := a.Put(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if err := a.Append(ctx, h, resume.Message{Seq: 1, Kind: resume.KindProgress, Data: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Claim(ctx, h, "A", "B"); err != nil {
		t.Fatal(err)
	}
	done := rec
	done.State = resume.StateCompleted
	if err := a.Put(ctx, done); !errors.Is(err, resume.ErrClaimed) {
		t.Fatalf("A's Put after B's claim: %v, want ErrClaimed", err)
	}
	for _, s := range []*jsstore.Store{a, b} {
		if got, err := s.Get(ctx, h); err != nil || got.Owner != "B" || got.State != resume.StateProcessing {
			t.Fatalf("record after A's Put: %+v, %v; want B's, processing", got, err)
		}
	}
	done.Owner = "B"
	if err := b.Put(ctx, done); err != nil {
		t.Fatalf("B's Put: %v", err)
	}
	if got, err := a.Get(ctx, h); err != nil || got.Owner != "B" || got.State != resume.StateCompleted {
		t.Fatalf("record after B's Put: %+v, %v", got, err)
	}
	// B lets it go; A's late write does not bring it back.
	if err := b.Delete(ctx, h); err != nil {
		t.Fatal(err)
	}
	done.Owner = "A"
	if err := a.Put(ctx, done); !errors.Is(err, resume.ErrClaimed) {
		t.Fatalf("A's Put after B deleted the record: %v, want ErrClaimed", err)
	}
	if got, err := b.Get(ctx, h); !errors.Is(err, resume.ErrNotFound) {
		t.Fatalf("record after A's late Put: %+v, %v; want none", got, err)
	}
}

// ReplayFresh on a Store that did not write the request sees what its writer
// appended since that Store last read it, where Replay answers from what it
// remembered (a task's events streamed on an instance that does not run it).
func TestReplayFresh(t *testing.T) {
	ctx := context.Background()
	js, _ := startServer(t, "", false)
	o := &jsstore.Options{Stream: "FRESH", Subject: "fresh", Bucket: "fresh"}
	a, b := newClosed(t, js, o), newClosed(t, js, o)
	h := resume.HashToken("tok")
	if err := a.Put(ctx, resume.Record{Hash: h, ID: []byte(`1`), State: resume.StateProcessing, Created: time.Unix(1, 0), Owner: "A"}); err != nil {
		t.Fatal(err)
	}
	seqs := func(seq iter.Seq2[resume.Message, error]) []uint64 {
		var out []uint64
		for m, err := range seq {
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, m.Seq)
		}
		return out
	}
	for n := uint64(1); n <= 3; n++ {
		if err := a.Append(ctx, h, resume.Message{Seq: n, Kind: resume.KindNotification, Data: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
		// Appends are written behind (Options.FlushDelay): there soon.
		poll.Until(t, 10*time.Second, fmt.Sprintf("message %d read by the other store", n), func() bool {
			got := seqs(b.ReplayFresh(ctx, h, 0))
			return len(got) == int(n) && got[n-1] == n
		})
		if got := seqs(b.ReplayFresh(ctx, h, n-1)); len(got) != 1 || got[0] != n {
			t.Fatalf("after message %d, from %d: ReplayFresh %v", n, n-1, got)
		}
	}
}

// recordWrites returns how many writes the records' bucket has had so far,
// asked each time it is called.
func recordWrites(t *testing.T, js jetstream.JetStream) func() uint64 {
	kvs, err := js.Stream(t.Context(), "KV_mcp-resume")
	if err != nil {
		t.Fatal(err)
	}
	return func() uint64 {
		t.Helper()
		info, err := kvs.Info(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return info.State.LastSeq
	}
}
