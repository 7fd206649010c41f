package resume_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-resume/mcp-resume/resume"
	"github.com/mcp-resume/mcp-resume/resume/memstore"
)

// observed records what an Observer is told, in order.
type observed struct {
	mu     sync.Mutex // guards events
	events []string
}

func (o *observed) add(ev string) { o.mu.Lock(); o.events = append(o.events, ev); o.mu.Unlock() }

func (o *observed) Attached(ack uint64) { o.add(fmt.Sprint("attached ", ack)) }
func (o *observed) Detached()           { o.add("detached") }
func (o *observed) Delivered()          { o.add("delivered") }
func (o *observed) Ended(cause error)   { o.add("ended " + cause.Error()) }

func (o *observed) got() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.events)
}

var tc = resume.TraceContext{Parent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", State: "k=v"}

// The Observer hears every attach after Start's, every detach (a Detach, a
// failed write) and the one delivery of the final response, and nothing
// after it; the trace
// context is the request's, in its Record and through a lookup.
func TestObserver(t *testing.T) {
	e, st := newEngine(t, nil)
	obs := &observed{}
	first := failingSink(2)
	r, tok := start(t, e, `1`, &resume.StartOptions{Sink: first, Trace: tc, Observer: obs})
	if r.Trace() != tc {
		t.Fatalf("Trace() = %+v, want %+v", r.Trace(), tc)
	}
	if st != nil {
		if rec, err := st.Get(t.Context(), resume.HashToken(tok)); err != nil || rec.Trace != tc {
			t.Fatalf("stored record %+v, %v; want its trace context", rec, err)
		}
	}
	if h, err := e.Lookup(tok, []byte(`1`)); err != nil || h.Trace() != tc {
		t.Fatalf("Lookup: %v, %v", h, err)
	}
	appendMsg(t, r, resume.KindProgress, "p")
	appendMsg(t, r, resume.KindProgress, "p")
	appendMsg(t, r, resume.KindProgress, "p") // the third write fails: detached
	second := newSink()
	attach(t, r, second, 0)
	r.Detach(second)
	r.Detach(second) // not attached: nothing to tell
	third := newSink()
	if err := r.AttachAcked(third, 2); err != nil {
		t.Fatal(err)
	}
	complete(t, r)
	// Delivered is the Observer's last word: a resume of the delivered
	// request tells it nothing (the request let go of it).
	attach(t, r, newSink(), 0)
	r.Release()
	want := []string{"detached", "attached 0", "detached", "attached 2", "delivered"}
	if got := obs.got(); !slices.Equal(got, want) {
		t.Fatalf("observed %q, want %q", got, want)
	}
}

// A request recovered after a restart keeps its trace context.
func TestRecoverKeepsTrace(t *testing.T) {
	st := memstore.New()
	e1 := mustNew(t, st, withEnded(nil))
	done, tokDone := start(t, e1, `1`, &resume.StartOptions{Trace: tc})
	complete(t, done)
	_, tokRerun := start(t, e1, `2`, &resume.StartOptions{Trace: tc, Payload: []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call"}`)})
	e1.Close()

	e2 := mustNew(t, st, withEnded(nil))
	defer e2.Close()
	for _, c := range []struct{ tok, id string }{{tokDone, `1`}, {tokRerun, `2`}} {
		h, err := e2.Lookup(c.tok, []byte(c.id))
		if err != nil || h.Trace() != tc {
			t.Errorf("request %s after the restart: %+v, %v; want its trace context", c.id, h, err)
		}
	}
	if rs := e2.Restartable(); len(rs) != 1 || rs[0].Trace() != tc {
		t.Errorf("restartable %v: want the one request, with its trace context", rs)
	}
}

// Ended is told once the request leaves the engine, with its context's
// cause: cancelled, or the engine closed.
func TestObserverEnded(t *testing.T) {
	e := mustNew(t, memstore.New(), nil)
	cancelled, closed := &observed{}, &observed{}
	r, _ := start(t, e, `1`, &resume.StartOptions{Observer: cancelled})
	start(t, e, `2`, &resume.StartOptions{Observer: closed})
	r.Cancel()
	e.Close()
	if got := cancelled.got(); !slices.Equal(got, []string{"ended " + resume.ErrCancelled.Error()}) {
		t.Errorf("the cancelled request's observer: %q", got)
	}
	if got := closed.got(); !slices.Equal(got, []string{"ended " + resume.ErrClosed.Error()}) {
		t.Errorf("the request of the closed engine's observer: %q", got)
	}
}

// A final response being written to its client as the engine closes is let
// finish: the request is delivered, not ended by the close (an audit then
// reads its outcome, not a shutdown).
func TestCloseLetsResponseFinish(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, _ := newEngine(t, nil)
		obs := &observed{}
		s := &gateSink{gate: make(chan struct{}), written: make(chan []byte, 1), entered: make(chan struct{}, 1)}
		r, _ := start(t, e, `1`, &resume.StartOptions{Sink: s, Observer: obs})
		go func() { _, _ = r.Complete(false, encoder("response", "")) }()
		<-s.entered // the response's write has begun
		closed := make(chan struct{})
		go func() { e.Close(); close(closed) }()
		time.Sleep(10 * time.Millisecond) // the write takes its time
		close(s.gate)
		<-closed
		if got := obs.got(); !slices.Equal(got, []string{"delivered"}) {
			t.Errorf("the observer heard %q; want the delivery alone", got)
		}
	})
}
