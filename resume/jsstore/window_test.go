package jsstore

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// future is a publish's outcome as the test decides it.
type future struct {
	ok  chan *jetstream.PubAck
	err chan error
}

func newFuture() *future {
	return &future{ok: make(chan *jetstream.PubAck, 1), err: make(chan error, 1)}
}

func (f *future) Ok() <-chan *jetstream.PubAck { return f.ok }
func (f *future) Err() <-chan error            { return f.err }
func (f *future) Msg() *nats.Msg               { return nil }

// fill takes every slot of w and sends a publish in each; it returns their
// futures and pendings.
func fill(t *testing.T, w *window) ([]*future, []*pending) {
	t.Helper()
	var fs []*future
	var ps []*pending
	for range maxInFlight {
		if probe, err := w.acquire(t.Context()); err != nil || probe {
			t.Fatalf("acquire: probe %v, %v; want a free slot", probe, err)
		}
		f, p := newFuture(), &pending{}
		a := &attempt{p: p, fut: f, done: make(chan struct{})}
		p.att = a
		w.push(a)
		fs, ps = append(fs, f), append(ps, p)
	}
	return fs, ps
}

// taken reports whether acquire gets a slot before the test's goroutines are
// all blocked, and whether it is a probe.
func taken(w *window) (ok, probe bool) {
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan bool, 1)
	go func() {
		p, err := w.acquire(ctx)
		if err == nil {
			got <- p
		}
		close(got)
	}()
	synctest.Wait()
	cancel()
	probe, ok = <-got
	return ok, probe
}

// The window's slots: an acknowledgement frees its own and every ghost's; a
// failed publish keeps its slot as a ghost, and once nothing is in flight one
// ghost's slot at a time lets a probe through; a probe that is not sent puts it
// back and wakes the next.
func TestWindowGhosts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWindow(time.Second, nil)
		fs, ps := fill(t, w)
		if ok, _ := taken(w); ok {
			t.Fatal("a slot with every one in flight")
		}
		for _, f := range fs {
			f.err <- nats.ErrDisconnected
		}
		synctest.Wait()
		for i, p := range ps {
			if !p.failed || p.sseq != 0 {
				t.Fatalf("publish %d: failed %v, sseq %d; want failed", i, p.failed, p.sseq)
			}
		}
		// Two publishes wait: one gets the probe; it is not sent, and the
		// other gets it then.
		probes := make(chan bool, 2)
		for range 2 {
			go func() {
				p, err := w.acquire(t.Context())
				if err != nil {
					t.Error(err)
				}
				probes <- p
			}()
		}
		synctest.Wait()
		if len(probes) != 1 || !<-probes {
			t.Fatal("with nothing in flight, one publish must get a ghost's slot")
		}
		w.release(true)
		synctest.Wait()
		if len(probes) != 1 || !<-probes {
			t.Fatal("a probe given back must go to the next publish waiting")
		}
		// The probe is sent and acknowledged: every slot is free again.
		f, p := newFuture(), &pending{}
		a := &attempt{p: p, fut: f, done: make(chan struct{})}
		p.att = a
		w.push(a)
		f.ok <- &jetstream.PubAck{Sequence: 7}
		synctest.Wait()
		if p.sseq != 7 {
			t.Fatalf("the probe: sseq %d, want 7", p.sseq)
		}
		fill(t, w)
		// Nothing acknowledged for the window's time: all given up, as ghosts.
		time.Sleep(time.Second)
		synctest.Wait()
		if ok, probe := taken(w); !ok || !probe {
			t.Fatalf("after the window gave up: a slot %v, probe %v; want a probe", ok, probe)
		}
		w.wait()
	})
}

// A connection closed for good gives up every publish in flight at once,
// without waiting for the window's time, and the resolving goroutine ends:
// nats.go fails its futures on a reconnect, never on a close.
func TestWindowConnClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		closed := make(chan nats.Status, 1)
		w := newWindow(time.Hour, closed)
		_, ps := fill(t, w)
		start := time.Now()
		closed <- nats.CLOSED
		synctest.Wait()
		if time.Since(start) != 0 {
			t.Fatalf("gave up after %v, want at once", time.Since(start))
		}
		for i, p := range ps {
			if !p.failed {
				t.Fatalf("publish %d: not given up", i)
			}
		}
		w.mu.Lock()
		running := w.running
		w.mu.Unlock()
		if running {
			t.Fatal("the resolving goroutine still runs")
		}
		// A publish after the close is given up at once too.
		if _, err := w.acquire(t.Context()); err != nil {
			t.Fatal(err)
		}
		f, p := newFuture(), &pending{}
		a := &attempt{p: p, fut: f, done: make(chan struct{})}
		p.att = a
		w.push(a)
		synctest.Wait()
		if !p.failed {
			t.Fatal("a publish after the close: not given up")
		}
		w.wait()
	})
}
