package resume

import "time"

// Attachment: a request's one sink at a time (Attach and its variants, Detach),
// and the write lock a new attachment waits on.

// attachment is one period of a request being attached to a sink.
type attachment struct {
	sink     Sink
	cursor   uint64 // highest seq written to sink (or acknowledged before attaching)
	draining bool   // a goroutine is in drain for this attachment
	// win: messages of the replay window to write again, in order among the
	// queued ones (see Request.win), taken when the first drain starts
	// (wantWin): after the previous attachment's write in flight, whose
	// message goes from the outbox to the window when it completes.
	win     []Message
	wantWin bool
	// follow: a follower's attachment (AttachFollow): what is written to
	// it is delivered, in ack mode too, and it takes over only after the
	// previous attachment's write in flight has ended.
	follow bool
	// wmu is held through each write to sink and what follows it (a delivered
	// message discarded); prevW is the previous attachment's, which this one's
	// first drain waits for (see drain). Separate allocations, so that a
	// request keeps no detached sink alive through them.
	wmu, prevW writeLock
}

// newAttachmentLocked makes sink the request's attachment, after the previous
// one's write in flight, if any (see drain). Called with r.mu held.
func (r *Request) newAttachmentLocked(sink Sink, cursor uint64, wantWin bool) *attachment {
	a := &attachment{sink: sink, cursor: cursor, wantWin: wantWin, wmu: make(writeLock, 1), prevW: r.lastW}
	r.att, r.lastW = a, a.wmu
	return a
}

// takeoverWait bounds how long a new attachment's first drain waits for the
// previous attachment's write in flight: a client that resumes must not wait
// behind a connection that stalled (its write may then be delivered twice).
const takeoverWait = 50 * time.Millisecond

// followWait bounds how long a follower's first drain waits for the previous
// attachment's write in flight (AttachFollow): long enough for a write through
// another instance (its call timeout), so that a message goes to one follower
// only.
const followWait = 10 * time.Second

// Attach makes sink the request's sink (taking it over from any other), drops
// messages up to ack (when ack > 0, which also switches to ack mode), resets the
// timers, and writes every queued message after ack. It returns ErrEnded for a
// request that has left the engine (wrapping what ended it: ErrCancelled,
// ErrExpired or ErrAcknowledged), ErrAcknowledged when ack covers the final
// response, and ErrAckAhead for an ack past the last message.
func (r *Request) Attach(sink Sink, ack uint64) error {
	if err := r.attach(sink, ack, ack, AttachModePlain); err != nil {
		return err
	}
	r.kick(Message{})
	return nil
}

// AttachAcked is Attach for a client that sent an acknowledgement, 0 included
// (it has received nothing): the messages of the replay window after ack are
// written again, and the request is in ack mode from now on.
func (r *Request) AttachAcked(sink Sink, ack uint64) error {
	if err := r.attach(sink, ack, ack, AttachModeAcked); err != nil {
		return err
	}
	r.kick(Message{})
	return nil
}

// AttachAll is Attach for a client that has seen nothing of the request (it
// retried its call, whose first connection died before the resume policy came):
// every message the request still holds is written, those of the replay window
// included.
func (r *Request) AttachAll(sink Sink) error {
	if err := r.attach(sink, 0, 0, AttachModeAll); err != nil {
		return err
	}
	r.kick(Message{})
	return nil
}

// AttachFollow attaches a follower: a client that follows the request on
// behalf of another that holds no connection to it (the await tool of a
// deferred call), after ack, which it acknowledges (0: nothing). What is
// written to it counts as delivered as it is written, whatever the request's
// ack mode: a follower that takes what it is given forwards it, and a follower
// that ends takes nothing more, so the next one gets what is left. A follower
// takes over from the previous attachment only once that one's write in
// flight has ended (up to followWait), so that no message goes to two
// followers. The replay window is not written again: it holds what was
// delivered.
func (r *Request) AttachFollow(sink Sink, ack uint64) error {
	if err := r.attach(sink, ack, ack, AttachModeFollow); err != nil {
		return err
	}
	r.kick(Message{})
	return nil
}

// AttachMode is how an attach treats the replay window: as Attach, AttachAcked,
// AttachAll or AttachFollow does (for Host.AttachWritten, which serves them all
// for another instance).
type AttachMode uint8

const (
	AttachModePlain  AttachMode = iota // an ack > 0 counts as acked
	AttachModeAcked                    // the client acknowledged ack, 0 included
	AttachModeAll                      // the client has seen nothing, and does not acknowledge
	AttachModeFollow                   // a follower: written is delivered (AttachFollow)
)

// attach is Attach without the writing: the client acknowledged every message up
// to ack, and sink was written every message up to written (>= ack). An
// acknowledgement, or AttachModeAll, writes again the messages of the replay window
// after it.
func (r *Request) attach(sink Sink, ack, written uint64, mode AttachMode) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.gone.Load() {
		return r.endedErrLocked()
	}
	if err := r.ackLocked(ack); err != nil {
		return err // refused, or the client has it all: nothing to attach
	}
	if mode == AttachModeAcked && !r.ackMode { // an ack of 0, which ackLocked leaves
		r.ackMode = true
		if err := r.e.put(r, r.state); err != nil {
			r.e.log.Warn().Err(err).Str("request", string(r.id)).Msg("storing the ack mode")
		}
	}
	wantWin := (ack > 0 || mode != AttachModePlain) && mode != AttachModeFollow
	if wantWin && r.win != nil && time.Since(r.win.at) > r.e.opts.ReplayWindow {
		r.trimWinLocked(0)
	}
	if written > ack && (!r.ackMode || mode == AttachModeFollow) {
		// Delivered, as deliver would have counted them.
		if drop := r.q.upTo(written, func(k Kind) bool { return !k.retained() }); len(drop) > 0 {
			r.discardLocked(drop)
		}
	}
	a := r.newAttachmentLocked(sink, max(ack, written), wantWin)
	a.follow = mode == AttachModeFollow
	r.e.attaches.Add(1)
	r.scheduleLocked()
	if o := r.observer(); o != nil {
		o.Attached(ack)
	}
	return nil
}

// Detach detaches the request from sink, if sink is its current sink, and starts
// the maxWait clock of a processing request.
func (r *Request) Detach(sink Sink) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.att != nil && r.att.sink == sink {
		r.detachLocked()
	}
}

// DetachWritten is Detach, and returns the sequence number of the last message
// written to sink (or acknowledged before it was attached), a write in flight
// included once it has ended (waited for up to takeoverWait): 0 when sink was
// not the request's sink.
func (r *Request) DetachWritten(sink Sink) uint64 {
	r.mu.Lock()
	a := r.att
	if a == nil || a.sink != sink {
		r.mu.Unlock()
		return 0
	}
	r.detachLocked()
	r.mu.Unlock()
	a.wmu.waitIdle(takeoverWait)
	r.mu.Lock()
	defer r.mu.Unlock()
	return a.cursor
}

func (r *Request) detachAfterFailure(a *attachment) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a.draining = false
	if r.att == a {
		r.detachLocked()
	}
	r.idleWLocked(a) // its write has failed: none is in flight
}

// detachLocked leaves the request without a sink. A processing request starts its
// maxWait clock; an ended one keeps its retention clock as it runs.
func (r *Request) detachLocked() {
	if a := r.att; !a.draining {
		r.idleWLocked(a) // no write of a is in flight, nor will one be
	}
	r.att = nil
	r.away = r.e.clock()
	if r.state == StateProcessing {
		r.scheduleLocked()
	}
	if o := r.observer(); o != nil {
		o.Detached()
	}
}

// idleWLocked lets go of lastW when it is a's and a, no longer the request's
// attachment (or about to be no longer), writes nothing more: a detached
// request then holds no lock of a sink it had. A new attachment's first drain
// has then nothing to wait for.
func (r *Request) idleWLocked(a *attachment) {
	if r.lastW == a.wmu {
		r.lastW = nil
	}
}

// writeLock is an attachment's write lock (attachment.wmu): a token in it while
// a write holds it. A channel, so that a wait for it can end at a deadline.
type writeLock chan struct{}

// waitIdle waits until no write holds l, for at most d.
func (l writeLock) waitIdle(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case l <- struct{}{}:
		<-l
	case <-t.C:
	}
}
