package jsstore

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// maxInFlight bounds the store's message publishes that the stream may still
// be working through: sent and not acknowledged yet, or given up (failed or
// lost) while the server may still store them.
//
// Why: the stream stores its messages one after another (each with an fsync
// under sync always), so a publish waits behind every message sent before it.
// Without a bound of its own the store sent as fast as requests appended (up to
// the client's PublishAsyncMaxPending, which a reconnect resets while the server
// still works through what it received), and anything that waits for an
// acknowledgement with a timeout (a settle, a request's final state) found
// seconds of queue ahead of it, timed out, sent again, and the queue grew. With
// the window, a writer faster than the stream waits in Append for a slot, and an
// acknowledgement never waits behind more than maxInFlight messages of ours.
const maxInFlight = 256

// window is the store's message publishes in flight, in the order they were
// sent, which is the order in which the stream acknowledges them. Each publish
// takes a slot before it is sent. One goroutine, running while anything is in
// flight, resolves them in order: it waits for the oldest one's
// acknowledgement for at most lost since the one before it was resolved (the
// stream makes progress, or it does not), and when that passes it gives up every
// publish in flight that has no acknowledgement yet (lost with a server of a
// NATS cluster): settle sends them again. A connection closed for good gives up
// every publish in flight at once: nats.go fails them on a reconnect, not on a
// close, and none can be acknowledged after (so a store whose connection its
// owner closed without closing the store leaves no goroutine behind).
//
// An acknowledgement frees its slot. A publish that failed or was given up
// keeps its slot as a ghost: the server may still hold it in its queue (a
// connection that drops fails every publish in flight at once, and the server
// goes on storing those it received). Ghosts are freed by the next
// acknowledgement, which the stream sends only after every message received
// before; while nothing else is in flight, one ghost's slot at a time lets a
// publish through to find out.
type window struct {
	lost time.Duration
	// closed receives once the connection the publishes go out on is closed
	// for good (nats.Conn.StatusChanged(nats.CLOSED)).
	connClosed chan nats.Status
	// onFail is told of the error of each publish that failed.
	onFail func(error)

	mu      sync.Mutex // guards the fields below
	q       []*attempt // sent, not resolved, in order
	used    int        // slots taken: in flight, being sent, and ghosts
	ghosts  int
	freed   chan struct{} // closed (and replaced) when a publish may take a slot
	waiters int           // publishes waiting for freed
	running bool          // the resolving goroutine runs
	closed  bool          // wait has been called: no goroutine starts any more
	gone    bool          // connClosed was received: nothing in flight is acknowledged
	wg      sync.WaitGroup
}

// errNoAck: a publish had no acknowledgement for the window's time.
var errNoAck = errors.New("jsstore: no acknowledgement in time")

// attempt is one publish of a pending message.
type attempt struct {
	p    *pending
	fut  jetstream.PubAckFuture
	done chan struct{} // closed once resolved: p.sseq set, or p failed
}

func newWindow(lost time.Duration, connClosed chan nats.Status) *window {
	return &window{lost: lost, connClosed: connClosed, freed: make(chan struct{})}
}

// acquire takes a slot, waiting while the window is full, until ctx ends. It
// reports whether the slot is a ghost's (see window), for release.
func (w *window) acquire(ctx context.Context) (probe bool, err error) {
	for {
		w.mu.Lock()
		switch {
		case w.used < maxInFlight:
			w.used++
			w.mu.Unlock()
			return false, nil
		case w.used == w.ghosts: // nothing in flight: a ghost's slot, to probe
			w.ghosts--
			w.mu.Unlock()
			return true, nil
		}
		freed := w.freed
		w.waiters++
		w.mu.Unlock()
		var err error
		select {
		case <-freed:
		case <-ctx.Done():
			err = ctx.Err()
		}
		w.mu.Lock()
		w.waiters--
		w.mu.Unlock()
		if err != nil {
			return false, err
		}
	}
}

// signalLocked wakes the publishes waiting for a slot.
func (w *window) signalLocked() {
	if w.waiters == 0 {
		return
	}
	close(w.freed)
	w.freed = make(chan struct{})
}

// release gives back the slot of a publish that was never sent: to the ghost
// it was taken from (probe), or free.
func (w *window) release(probe bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if probe {
		w.ghosts++ // nothing in flight still: the next may probe
	} else {
		w.used--
	}
	w.signalLocked()
}

// push adds a, sent with a slot taken, to the publishes in flight. After wait
// (the store closed), a is given up at once.
func (w *window) push(a *attempt) {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		w.end(a, nil, nil)
		return
	}
	defer w.mu.Unlock()
	w.q = append(w.q, a)
	if !w.running {
		w.running = true
		w.wg.Go(w.resolve)
	}
}

// resolve resolves the publishes in flight in order, until none is left.
func (w *window) resolve() {
	t := time.NewTimer(w.lost)
	defer t.Stop()
	for {
		w.mu.Lock()
		if len(w.q) == 0 {
			w.running = false
			w.q = nil
			w.mu.Unlock()
			return
		}
		a := w.q[0]
		w.q[0] = nil
		w.q = w.q[1:]
		gone := w.gone
		w.mu.Unlock()
		if gone {
			w.end(a, nil, nil)
			w.giveUp()
			continue
		}
		t.Reset(w.lost)
		select {
		case ack := <-a.fut.Ok():
			w.end(a, ack, nil)
		case err := <-a.fut.Err():
			w.end(a, nil, err)
		case <-t.C:
			w.end(a, nil, errNoAck)
			w.giveUp()
		case <-w.connClosed:
			w.mu.Lock()
			w.gone = true
			w.mu.Unlock()
			w.end(a, nil, nil)
			w.giveUp()
		}
	}
}

// giveUp resolves every publish in flight now: those acknowledged or failed
// meanwhile as such, the others as failed.
func (w *window) giveUp() {
	w.mu.Lock()
	q := w.q
	w.q = nil
	w.mu.Unlock()
	for _, a := range q {
		select {
		case ack := <-a.fut.Ok():
			w.end(a, ack, nil)
		default:
			w.end(a, nil, nil)
		}
	}
}

// end records a's outcome in its message (stored at ack's sequence; failed for
// a nil ack, unless another attempt stored it, with err when the publish
// failed), and frees its slot and every ghost's (acknowledged), or keeps its
// slot as a ghost (failed).
func (w *window) end(a *attempt, ack *jetstream.PubAck, err error) {
	if err != nil && w.onFail != nil {
		w.onFail(err)
	}
	p := a.p
	p.mu.Lock()
	switch {
	case p.sseq != 0:
	case ack != nil:
		p.sseq, p.failed = ack.Sequence, false
	case p.att == a:
		p.failed = true
	}
	p.mu.Unlock()
	close(a.done)
	w.mu.Lock()
	defer w.mu.Unlock()
	if ack != nil {
		w.used -= 1 + w.ghosts
		w.ghosts = 0
		w.signalLocked()
		return
	}
	w.ghosts++
	if w.used == w.ghosts {
		w.signalLocked() // a probe may go
	}
}

// wait waits for the resolving goroutine to end (once nothing is in flight),
// and starts none after.
func (w *window) wait() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	w.wg.Wait()
}
