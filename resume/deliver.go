package resume

import (
	"errors"
	"iter"
	"math"
	"slices"
	"time"
)

// Delivery: the drain that writes an attachment's queued messages in order,
// from the Store or the outbox (replay and live delivery alike), and the replay
// window of messages delivered without ack mode.

// kick starts writing to the current attachment unless a goroutine already is.
// last, when its Seq is not 0, is the message the caller just appended.
func (r *Request) kick(last Message) {
	r.mu.Lock()
	a := r.att
	if a == nil || a.draining {
		r.mu.Unlock()
		return
	}
	a.draining = true
	r.mu.Unlock()
	r.drain(a, last)
}

// drain writes a's queued messages in order until none is left or a is no longer
// the request's attachment. Replay and live delivery both go through here: the
// messages come from the Store, except that a just-appended message that is the
// attachment's very next one is written as it is (the common case of a live
// client: it is what the Store would return).
func (r *Request) drain(a *attachment, next Message) {
	// Without acks, a message the previous attachment was writing when this
	// one took over (or came after a detach) is delivered, and so discarded, or
	// not: wait for the outcome before replaying, or it could be written to
	// both. (With acks the client drops what it gets twice.)
	if p := a.prevW; p != nil {
		a.prevW = nil
		r.mu.Lock()
		acks := r.ackMode
		r.mu.Unlock()
		switch {
		case a.follow:
			p.waitIdle(followWait)
		case !acks:
			p.waitIdle(takeoverWait)
		}
	}
	r.mu.Lock()
	if a.wantWin {
		// The window as it is now: a message the previous attachment wrote
		// meanwhile is in it (ackLocked let go of those up to the ack).
		a.win, a.wantWin = slices.Clone(r.win.messages()), false
	}
	r.mu.Unlock()
	for {
		r.mu.Lock()
		if r.att != a || (!r.q.hasAfter(a.cursor) && len(a.win) == 0) {
			a.draining = false
			if r.att != a {
				r.idleWLocked(a)
			}
			r.mu.Unlock()
			return
		}
		after, win := a.cursor, len(a.win) > 0
		r.mu.Unlock()

		if next.Seq != 0 && next.Seq == after+1 && !win {
			if !r.deliver(a, next) {
				return
			}
			next = Message{}
			continue
		}
		next = Message{}
		lost := false
		for m, err := range r.replay(after) {
			if errors.Is(err, ErrStoreLost) {
				r.mu.Lock()
				lost = r.loseLocked() || r.memory
				finishing := !lost && r.finishing
				if finishing {
					a.draining = false // the final response's Append ends it, and kicks
				}
				r.mu.Unlock()
				if lost {
					break // deliver the response that says so, from memory
				}
				if finishing {
					return
				}
			}
			if err != nil {
				if !errors.Is(err, ErrNotFound) {
					r.e.log.Warn().Err(err).Str("request", string(r.id)).Msg("replaying queued messages")
				}
				r.detachAfterFailure(a)
				return
			}
			if !r.deliverWin(a, m.Seq) || !r.deliver(a, m) {
				return
			}
		}
		if lost {
			continue
		}
		if !r.deliverWin(a, math.MaxUint64) {
			return
		}
	}
}

// deliverWin writes a's messages of the replay window numbered below before. It
// reports whether the drain goes on, as deliver does.
func (r *Request) deliverWin(a *attachment, before uint64) bool {
	for {
		r.mu.Lock()
		if r.att != a || len(a.win) == 0 || a.win[0].Seq >= before {
			r.mu.Unlock()
			return true
		}
		m := a.win[0]
		a.win = a.win[1:]
		r.mu.Unlock()
		if !r.deliver(a, m) {
			return false
		}
	}
}

// deliver writes one message to a and records it. It reports whether the drain
// goes on: false when the write failed or a is no longer the request's attachment.
func (r *Request) deliver(a *attachment, m Message) bool {
	a.wmu <- struct{}{}
	defer func() { <-a.wmu }()
	if m.Kind == KindResponse {
		// The client may read the response, and end its session, before the
		// lines below run (its stream has ended with the write): see Release.
		r.mu.Lock()
		r.writing = a
		r.mu.Unlock()
	}
	if err := a.sink.Write(r.e.ctx, m); err != nil {
		r.mu.Lock()
		if r.writing == a {
			r.writing = nil
		}
		if r.released == a {
			r.released = nil // nor kept: a request holds no sink after its delivery
		}
		r.mu.Unlock()
		r.e.log.Debug().Err(err).Str("request", string(r.id)).Msg("write failed; detaching")
		r.detachAfterFailure(a)
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.writing == a {
		r.writing = nil
	}
	// Delivered, even if the attachment changed meanwhile: without acks (or
	// to a follower) an intermediate message written successfully is not
	// sent again.
	if (!r.ackMode || a.follow) && !m.Kind.retained() && r.q.has(m.Seq) {
		r.discardLocked([]uint64{m.Seq})
		if !r.gone.Load() && !r.ackMode {
			r.keepLocked(m)
		}
	}
	if m.Kind == KindResponse {
		if !r.delivered && !r.gone.Load() {
			r.delivered = true
			r.scheduleLocked() // the shorter window from now on
			if w, ok := r.e.store.(DeliveryWatcher); ok && !r.memory {
				w.Delivered(r.hash)
			}
			if o := r.observer(); o != nil {
				o.Delivered()
				r.obs.Store(nil) // its last word: a request kept for DeliveredRetention holds no Observer (nor its span)
			}
		}
		if a == r.released && !r.ackMode && !r.finishing && r.state.Ended() {
			r.freeLocked(r.state) // its client ended its session as this write went (Release)
			return false
		}
		// Nothing comes after the final response: the request, kept for
		// DeliveredRetention, holds no sink (nor its connection's state). (A
		// response stored and replayed while its Complete still waits for the
		// store leaves the request as it is: processing, attached, draining.)
		if r.att == a && r.state.Ended() {
			r.att = nil
			r.idleWLocked(a)
			return false
		}
	}
	a.cursor = max(a.cursor, m.Seq) // written (DetachWritten reads it after a detach)
	if r.att != a {
		r.idleWLocked(a) // its drain ends here: taken over, detached or ended
		return false     // the new attachment has its own drain
	}
	return true
}

// replay returns the queued messages after sequence number after: from the Store,
// or without one from the outbox, which then holds them.
func (r *Request) replay(after uint64) iter.Seq2[Message, error] {
	r.mu.Lock()
	memory := r.memory
	r.mu.Unlock()
	if r.e.store != nil && !memory {
		return r.e.store.Replay(r.e.ctx, r.hash, after)
	}
	r.mu.Lock()
	i, _ := r.q.find(after + 1)
	snap := slices.Clone(r.q.entries[i:])
	r.mu.Unlock()
	return func(yield func(Message, error) bool) {
		for _, e := range snap {
			if !yield(Message{Seq: e.seq, Kind: e.kind, Data: e.data}, nil) {
				return
			}
		}
	}
}

// keepLocked puts m, just delivered without ack mode, in the replay window, and
// lets the oldest go past Options.ReplayWindowBytes.
func (r *Request) keepLocked(m Message) {
	if r.e.opts.ReplayWindowBytes <= 0 {
		return
	}
	if r.win == nil {
		r.win = &replayWindow{}
	}
	w := r.win
	w.msgs = append(w.msgs, m)
	w.bytes += len(m.Data)
	r.e.addBytes(r, len(m.Data))
	w.at = time.Now()
	r.trimWinLocked(r.e.opts.ReplayWindowBytes)
}

// replayWindow is a request's replay window (Request.win): the messages last
// delivered without ack mode, oldest first, their bytes, and when the last
// was delivered.
type replayWindow struct {
	msgs  []Message
	bytes int
	at    time.Time
}

// messages returns the window's messages; none for no window.
func (w *replayWindow) messages() []Message {
	if w == nil {
		return nil
	}
	return w.msgs
}

// trimWinLocked lets go of the replay window's oldest messages until it holds at
// most limit bytes.
func (r *Request) trimWinLocked(limit int) {
	if r.win == nil {
		return
	}
	i, b := 0, r.win.bytes
	for i < len(r.win.msgs) && b > limit {
		b -= len(r.win.msgs[i].Data)
		i++
	}
	r.dropWinLocked(i)
}

// dropWinLocked lets go of the replay window's n oldest messages.
func (r *Request) dropWinLocked(n int) {
	if n == 0 {
		return
	}
	w, d := r.win, 0
	for _, m := range w.msgs[:n] {
		d += len(m.Data)
	}
	w.bytes -= d
	r.e.addBytes(r, -d)
	if n == len(w.msgs) {
		r.win = nil
	} else {
		// From the head, as the queue's: no copy of the rest per message.
		clear(w.msgs[:n])
		w.msgs = w.msgs[n:]
	}
}
