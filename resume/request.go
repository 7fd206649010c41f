package resume

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Request is one resumable request. Its methods are safe for concurrent use.
type Request struct {
	e    *Engine
	id   []byte
	hash TokenHash
	// principal started the request (StartOptions.Principal); "" without
	// authentication.
	principal string
	created   time.Time // as in its Record
	ctx       context.Context
	cancel    context.CancelCauseFunc
	// payload makes a restartable request's record (StartOptions.Payload); nil for
	// the others.
	payload []byte
	// epoch is the request's Record.Epoch: its run since its last recovery.
	epoch uint32
	// task: started as a task (StartOptions.Task; Record.Task).
	task bool
	// ttl, when not 0, is the request's fixed lifetime from created
	// (StartOptions.TTL; Record.TTL): its one deadline, whatever its state;
	// ttlArmed: that deadline is queued.
	ttl      time.Duration
	ttlArmed bool

	mu      sync.Mutex // guards the fields below
	state   State
	ackMode bool
	q       outbox
	att     *attachment // nil when detached
	// delivered: the final response was written to an attached client, so the
	// shorter DeliveredRetention applies.
	delivered bool
	inRetainQ bool // counted in the engine's retained results (guarded by r.mu)
	victim    bool // picked by a trim, to be freed (guarded by Engine.mu)
	evicted   bool // freed early to keep the engine within its bounds (ErrEvicted)
	// use counts the request's bytes for its principal's budget (nil without a
	// principal; set and cleared under Engine.mu); held mirrors q.bytes, for the
	// engine to read without r.mu.
	use  *usage
	held atomic.Int64
	// win holds the messages last delivered without ack mode, oldest first
	// (bounded by Options.ReplayWindowBytes; let go ReplayWindow after winAt, the
	// last delivery): a client that acknowledges for the first time when it
	// resumes gets again those that its lost connection held in buffers.
	win      []Message
	winBytes int
	winAt    time.Time
	// memory: the request's messages are kept here, not read back from the
	// Store (lost by it once: see loseLocked).
	memory bool
	// finishing: its final response waits for the Store (appendFinalLocked);
	// no other message is queued.
	finishing bool
	gone      atomic.Bool // freed: left the engine; written under r.mu, read anywhere
	// lastW is the write lock of the latest attachment, detached or not (see
	// attachment.wmu).
	lastW writeLock
	// final is how the request left the engine, once gone: cancelled, expired, or
	// completed or failed when the client acknowledged its response.
	final State
	// tgen is the generation of the request's deadline in the engine's timers:
	// bumped under r.mu each time the deadline is set or stopped, read anywhere.
	tgen atomic.Uint64
	// queued: a deadline of the current generation is in the engine's queues
	// (guarded by Engine.tmu; see timers.go).
	queued bool
	// watchers get each message queued, and a token when there is news
	// (Watch; guarded by mu).
	watchers map[*Watcher]struct{}
}

// newRequest returns the request rec describes, holding q, on a context of its
// own from base: every Request is made here, started (Start) or recovered.
func (e *Engine) newRequest(base context.Context, rec Record, q outbox) *Request {
	r := &Request{e: e, id: rec.ID, hash: rec.Hash, principal: rec.Principal, created: rec.Created,
		state: rec.State, q: q, ackMode: rec.AckMode, epoch: rec.Epoch, task: rec.Task, ttl: rec.TTL}
	if rec.State == StateProcessing {
		r.payload = rec.Payload
	}
	if len(r.q.entries) <= 1 { // point entries at r's own array, not the copy's
		r.q.entries = append(r.q.first[:0], r.q.entries...)
	}
	r.ctx, r.cancel = context.WithCancelCause(base)
	return r
}

// attachment is one period of a request being attached to a sink.
type attachment struct {
	sink     Sink
	cursor   uint64 // highest seq written to sink (or acknowledged before attaching)
	draining bool   // a goroutine is in drain for this attachment
	// win: messages of the replay window to write again, in order among the
	// queued ones (see Request.win).
	win []Message
	// wmu is held through each write to sink and what follows it (a delivered
	// message discarded); prevW is the previous attachment's, which this one's
	// first drain waits for (see drain). Separate allocations, so that a
	// request keeps no detached sink alive through them.
	wmu, prevW writeLock
}

// newAttachmentLocked makes sink the request's attachment, after the previous
// one's write in flight, if any (see drain). Called with r.mu held.
func (r *Request) newAttachmentLocked(sink Sink, cursor uint64, win []Message) *attachment {
	a := &attachment{sink: sink, cursor: cursor, win: win, wmu: make(writeLock, 1), prevW: r.lastW}
	r.att, r.lastW = a, a.wmu
	return a
}

// takeoverWait bounds how long a new attachment's first drain waits for the
// previous attachment's write in flight: a client that resumes must not wait
// behind a connection that stalled (its write may then be delivered twice).
const takeoverWait = 50 * time.Millisecond

// Task reports whether the request is a task (StartOptions.Task).
func (r *Request) Task() bool { return r.task }

// ID returns the request's JSON-RPC id, raw.
func (r *Request) ID() []byte { return r.id }

// Payload returns what the request was started with to make it restartable (see
// StartOptions.Payload); nil for a request that is not restartable.
func (r *Request) Payload() []byte { return r.payload }

// Context returns the request's own context: cancelled when the request ends (cause
// ErrEnded once its result is acknowledged or its retention ends), by Cancel (cause
// ErrCancelled), expiry (ErrExpired) or Engine.Close (ErrClosed), never by a
// connection.
func (r *Request) Context() context.Context { return r.ctx }

// Status is a snapshot of a request for requests/getStatus.
type Status struct {
	State State
	// HasPending: a resume now would deliver at least one message.
	HasPending bool
	// HasInput: a server-to-client request is unanswered.
	HasInput bool
	// Dropped counts messages dropped under the byte budget.
	Dropped uint64
	// QueuedBytes is the size of the queued messages.
	QueuedBytes int
}

// Status returns a snapshot of the request.
func (r *Request) Status() Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	return Status{
		State:       r.state,
		HasPending:  len(r.q.entries) > 0,
		HasInput:    r.q.count(KindRequest) > 0,
		Dropped:     r.q.dropped,
		QueuedBytes: r.q.bytes,
	}
}

// Created returns when the request started (Record.Created).
func (r *Request) Created() time.Time { return r.created }

// Gone reports whether the request has left the engine: cancelled, expired, or its
// result released (acknowledged or past retention).
func (r *Request) Gone() bool { return r.gone.Load() }

// Attached reports whether sink is the request's current sink.
func (r *Request) Attached(sink Sink) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.att != nil && r.att.sink == sink
}

// Append queues an outgoing message of kind k. encode receives the message's
// sequence number and returns the encoded message carrying it. When the request is
// attached, the message is written before Append returns, unless another
// goroutine is already writing this request's messages (then that one writes it).
func (r *Request) Append(k Kind, key string, encode func(seq uint64) []byte) (uint64, error) {
	return r.append(k, key, encode, StateProcessing)
}

// Complete queues the final response and moves the request to completed (or failed,
// when failed is true). The response stays queued until acknowledged or until the
// retention window ends.
func (r *Request) Complete(failed bool, encode func(seq uint64) []byte) (uint64, error) {
	final := StateCompleted
	if failed {
		final = StateFailed
	}
	return r.append(KindResponse, "", encode, final)
}

func (r *Request) append(k Kind, key string, encode func(seq uint64) []byte, next State) (uint64, error) {
	r.mu.Lock()
	if r.state.Ended() || r.finishing {
		st := r.state
		r.mu.Unlock()
		return 0, fmt.Errorf("appending to a %s request: %w", st, ErrEnded)
	}
	seq := r.q.next()
	m := Message{Seq: seq, Kind: k, Key: key, Data: encode(seq), Failed: next == StateFailed}
	// The Store call stays under r.mu so that messages reach it in sequence order.
	if r.e.store != nil {
		err := r.e.store.Append(r.e.ctx, r.hash, m)
		if err != nil && next.Ended() {
			err = r.appendFinalLocked(m, err)
		}
		if err != nil {
			lost := errors.Is(err, ErrStoreLost) && r.loseLocked()
			r.mu.Unlock()
			if lost {
				r.kick(Message{})
			}
			return 0, fmt.Errorf("queueing message %d: %w", seq, err)
		}
	}
	r.q.add(m, r.e.store == nil || r.memory)
	r.e.addBytes(r, len(m.Data))
	budget := r.e.opts.QueueBytes
	over := r.e.overFor(r)
	if over {
		budget = 0 // keep only what cannot go: the newest progress, responses, requests
	}
	if drop := r.q.enforce(budget); len(drop) > 0 {
		r.discardLocked(drop)
	}
	lost := false
	if next != r.state {
		if next.Ended() {
			// The final response is stored, and now so is the final state: a
			// durable store gives both to the next process (see recover.go).
			if err := r.e.put(r, next); errors.Is(err, ErrStoreLost) {
				lost = r.loseLocked()
			} else if err != nil {
				r.e.log.Warn().Err(err).Str("request", string(r.id)).Msg("storing the final state")
			}
		}
		if !lost {
			r.setStateLocked(next)
		}
	}
	r.tellWatchersLocked(m)
	r.mu.Unlock()
	if lost {
		r.kick(Message{})
		return seq, fmt.Errorf("storing the final state: %w", ErrStoreLost)
	}
	if k == KindResponse || over {
		r.e.trim(r.principal, false)
	}
	r.kick(m)
	return seq, nil
}

// appendFinalLocked tries again to store m, a final response whose Append
// failed with err, for as long as the store is unavailable (an outage longer
// than it waits): a result is not dropped, and the request does not stay
// processing with nobody to end it. Meanwhile r.mu is released (a getStatus, a
// resume, a cancel of the request are answered) and no other message is
// queued (finishing), so that the response stays the last. It gives up on an
// error that says the store will not take it (the request is unknown to it,
// lost, or another instance's), when the request leaves the engine (cancelled)
// and when the engine closes. It returns the last error, nil once stored, with
// r.mu held again.
func (r *Request) appendFinalLocked(m Message, err error) error {
	r.finishing = true
	defer func() { r.finishing = false }()
	t := time.NewTimer(0)
	defer t.Stop()
	for err != nil && !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrStoreLost) && !errors.Is(err, ErrClaimed) {
		r.e.log.Warn().Err(err).Str("request", string(r.id)).Msg("storing the final response; trying again")
		r.mu.Unlock()
		t.Reset(finalRetry)
		select {
		case <-t.C:
			err = r.e.store.Append(r.e.ctx, r.hash, m)
		case <-r.e.ctx.Done():
		}
		r.mu.Lock()
		switch {
		case r.gone.Load():
			return r.endedErrLocked()
		case err != nil && r.e.ctx.Err() != nil:
			return ErrClosed
		}
		if err == nil {
			return nil
		}
	}
	return err
}

// finalRetry is the pause between tries of storing a final response.
const finalRetry = time.Second

// recordLocked returns the request's Record with state.
func (r *Request) recordLocked(state State) Record {
	rec := Record{Hash: r.hash, ID: r.id, State: state, Created: r.created, Principal: r.principal, Owner: r.e.self, AckMode: r.ackMode, Epoch: r.epoch, Task: r.task, TTL: r.ttl}
	if state == StateProcessing {
		rec.Payload = r.payload // what a restartable request runs again with
	}
	return rec
}

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

// AttachMode is how an attach treats the replay window: as Attach, AttachAcked
// or AttachAll does (for Host.AttachWritten, which serves all three for another
// instance).
type AttachMode uint8

const (
	AttachModePlain AttachMode = iota // an ack > 0 counts as acked
	AttachModeAcked                   // the client acknowledged ack, 0 included
	AttachModeAll                     // the client has seen nothing, and does not acknowledge
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
	var win []Message
	if ack > 0 || mode != AttachModePlain {
		if time.Since(r.winAt) > r.e.opts.ReplayWindow {
			r.trimWinLocked(0)
		}
		win = slices.Clone(r.win) // ackLocked let go of those up to ack
	}
	if written > ack && !r.ackMode {
		// Delivered, as deliver would have counted them.
		if drop := r.q.upTo(written, func(k Kind) bool { return !k.retained() }); len(drop) > 0 {
			r.discardLocked(drop)
		}
	}
	r.newAttachmentLocked(sink, max(ack, written), win)
	r.e.attaches.Add(1)
	r.scheduleLocked()
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

// Touch resets the request's timers (requests/getStatus) and applies ack when > 0.
func (r *Request) Touch(ack uint64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.gone.Load() {
		return r.endedErrLocked()
	}
	switch err := r.ackLocked(ack); {
	case errors.Is(err, ErrAcknowledged):
		return nil // the status still says how it ended, with nothing pending
	case err != nil:
		return err
	}
	r.scheduleLocked()
	return nil
}

// Resolve drops the server-to-client request with sequence number seq: the client
// answered it.
func (r *Request) Resolve(seq uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.gone.Load() && r.q.has(seq) {
		r.discardLocked([]uint64{seq})
	}
}

// Cancel ends the request as cancelled: its context is cancelled, its messages are
// dropped (no response is sent) and it is freed. Cancelling an ended request that
// still holds its result frees it as well.
func (r *Request) Cancel() {
	r.mu.Lock()
	if r.gone.Load() {
		r.mu.Unlock()
		return
	}
	r.setStateLocked(StateCancelled)
	r.mu.Unlock()
}

// Release frees the request now if it has ended and its final response was
// written to a client, which has since said that it is done (it ended its
// session): DeliveredRetention keeps such a result for a resume after a lost
// connection, which a client that is done will not make. A request still
// running, whose result no client has received, or whose client acknowledges
// (ack mode: it says itself when it has the result) is left as it is: its
// client may come back for it with its token.
func (r *Request) Release() {
	r.mu.Lock()
	defer r.mu.Unlock()
	// A client in ack mode says when it has a result, by acknowledging it.
	if !r.gone.Load() && r.delivered && !r.finishing && !r.ackMode && r.state.Ended() {
		r.freeLocked(r.state)
	}
}

// ackLocked applies a client's acknowledgement that it holds every message up to
// ack. It refuses (ErrAckAhead, changing nothing) a number past the last one the
// request gave out: applied, it would also skip the messages still to come up
// to it, the final response among them. It returns ErrAcknowledged when ack
// covers the final response: the client has the result, and the request is
// freed.
func (r *Request) ackLocked(ack uint64) error {
	if ack == 0 {
		return nil
	}
	if ack > r.q.last {
		return fmt.Errorf("%w: %d, and the last message is %d", ErrAckAhead, ack, r.q.last)
	}
	switched := !r.ackMode
	r.ackMode = true
	if drop := r.q.upTo(ack, nil); len(drop) > 0 {
		r.discardLocked(drop)
	}
	i := 0
	for i < len(r.win) && r.win[i].Seq <= ack {
		i++
	}
	r.dropWinLocked(i)
	if r.state.Ended() && len(r.q.entries) == 0 {
		r.freeLocked(r.state) // the client has the final response
		return ErrAcknowledged
	}
	if switched {
		// The mode holds from now on, also for an engine that recovers the
		// request.
		if err := r.e.put(r, r.state); err != nil {
			r.e.log.Warn().Err(err).Str("request", string(r.id)).Msg("storing the ack mode")
		}
	}
	return nil
}

// setStateLocked is the one place a request changes state.
func (r *Request) setStateLocked(s State) {
	prev := r.state
	r.state = s
	if prev == StateProcessing {
		r.e.leftProcessing(r, s == StateCompleted || s == StateFailed)
	}
	switch s {
	case StateCancelled, StateExpired:
		r.freeLocked(s)
	default:
		r.scheduleLocked()
	}
}

// scheduleLocked sets the one deadline a request has, from its state and
// attachment: a detached processing request expires after MaxWait; an ended one is
// dropped after Retention (DeliveredRetention once its response was written); an
// attached processing request has none. A request with a ttl has that one
// deadline, whatever its state: polls and attachments do not move it.
func (r *Request) scheduleLocked() {
	var c clock
	switch {
	case r.gone.Load():
		return
	case r.ttl > 0:
		if r.ttlArmed {
			return // its one deadline does not move
		}
		r.ttlArmed = true
		c = clockTTL
	case r.state == StateProcessing && r.att != nil:
		r.stopTimerLocked()
		return
	case r.state == StateProcessing:
		c = clockMaxWait
	case r.delivered:
		c = clockDelivered
	default:
		c = clockRetention
	}
	r.e.arm(r, r.tgen.Add(1), c) // the deadline queued before, if any, is now stale
}

func (r *Request) stopTimerLocked() {
	r.ttlArmed = false
	r.tgen.Add(1)
	r.e.disarm(r)
}

// onTimer runs when the deadline of generation gen comes due.
func (r *Request) onTimer(gen uint64) {
	r.mu.Lock()
	switch {
	case r.gone.Load() || r.tgen.Load() != gen: // freed, re-armed or stopped meanwhile
		r.mu.Unlock()
	case r.ttl > 0 && r.state == StateProcessing: // its lifetime is over
		r.setStateLocked(StateExpired)
		r.mu.Unlock()
	case r.ttl > 0:
		r.freeLocked(StateExpired)
		r.mu.Unlock()
	case r.state == StateProcessing && r.att != nil:
		r.mu.Unlock() // attached meanwhile
	case r.state == StateProcessing:
		r.setStateLocked(StateExpired)
		r.mu.Unlock()
	case r.att != nil && r.att.draining:
		// Retention ended while the response is being written to an attached
		// client: let the write finish (or fail) rather than lose it mid-way.
		r.scheduleLocked()
		r.mu.Unlock()
	default: // retention ended
		r.freeLocked(StateExpired)
		r.mu.Unlock()
	}
}

// freeLocked drops everything the request holds and leaves its tombstone.
func (r *Request) freeLocked(final State) {
	if r.gone.Load() {
		return
	}
	r.gone.Store(true)
	r.final = final
	r.att = nil
	r.stopTimerLocked()
	switch final { // the context ends with the request, whatever ended it
	case StateCancelled:
		r.cancel(ErrCancelled)
	case StateExpired:
		r.cancel(ErrExpired)
	default:
		r.cancel(ErrEnded)
	}
	r.e.addBytes(r, -r.q.bytes)
	r.q = outbox{dropped: r.q.dropped}
	r.dropWinLocked(len(r.win))
	r.e.forget(r, final)
	r.tellWatchersLocked(Message{})
}

// Watcher follows the messages a request queues, for a reader of them that is
// not its client's attachment (a task's event stream): Watch.
type Watcher struct {
	r  *Request
	ch chan struct{} // a token when there is news (capacity 1)
	// Guarded by r.mu: the messages queued since the last Take, up to
	// maxWatched; lagged when more came (read them from Events instead).
	got    []Message
	lagged bool
}

// maxWatched bounds the messages a Watcher holds for its reader.
const maxWatched = 4096

// Watch returns a Watcher of the request's messages from now on. Stop it.
func (r *Request) Watch() *Watcher {
	w := &Watcher{r: r, ch: make(chan struct{}, 1)}
	r.mu.Lock()
	if r.watchers == nil {
		r.watchers = map[*Watcher]struct{}{}
	}
	r.watchers[w] = struct{}{}
	r.mu.Unlock()
	return w
}

// C gets a token each time a message is queued or the request leaves the
// engine.
func (w *Watcher) C() <-chan struct{} { return w.ch }

// Take returns the messages queued since the last Take, oldest first, and
// whether some were not kept for it (more than it holds came meanwhile): then
// the reader reads them with Events.
func (w *Watcher) Take() (msgs []Message, lagged bool) {
	w.r.mu.Lock()
	defer w.r.mu.Unlock()
	msgs, lagged = w.got, w.lagged
	w.got, w.lagged = nil, false
	return msgs, lagged
}

// Stop ends the Watcher.
func (w *Watcher) Stop() {
	w.r.mu.Lock()
	delete(w.r.watchers, w)
	w.r.mu.Unlock()
}

// tellWatchersLocked hands m (none when its Seq is 0) to each Watcher.
func (r *Request) tellWatchersLocked(m Message) {
	for w := range r.watchers {
		if m.Seq > 0 {
			if len(w.got) < maxWatched {
				w.got = append(w.got, m)
			} else {
				w.lagged = true
			}
		}
		select {
		case w.ch <- struct{}{}:
		default:
		}
	}
}

// Events returns the messages the request holds with a sequence number above
// after, oldest first, as they are read (from the store, a batch at a time:
// a reader sends the first while the rest are read), without delivering or
// changing anything (a task's event stream: many readers, none of them its
// client's attachment), and whether the request had ended when asked
// (completed or failed: its response is among them). A request that left the
// engine answers its error (ErrCancelled, ErrExpired, ...).
func (r *Request) Events(after uint64) (msgs iter.Seq2[Message, error], ended bool, err error) {
	r.mu.Lock()
	if r.gone.Load() {
		defer r.mu.Unlock()
		return nil, true, r.endedErrLocked()
	}
	ended = r.state.Ended()
	r.mu.Unlock()
	return r.replay(after), ended, nil
}

// loseLocked ends the request once its Store has reported that it lost what it
// held of it (a call failed wrapping ErrStoreLost: its stream or bucket was
// gone, and made anew). Its queued messages are gone with the store's copy; its
// handler's context ends (cause ErrStoreLost, so that no handler's response
// follows); Options.Ended's response for ErrStoreLost becomes its final
// response, failed, kept in memory from now on (memory), and stored anew for
// other instances and a later process when the store takes it. A client that
// resumes gets that response, not a gap in its messages. It reports whether it
// queued the response: false for a request gone, or lost before. The store
// writes are made under r.mu, as every write of the request is: a store that
// does not answer holds the request's other calls for its OutageWait each.
func (r *Request) loseLocked() bool {
	if r.gone.Load() || r.memory || r.finishing {
		return false // a final response waiting for the store learns it from its Append
	}
	r.memory = true
	r.cancel(ErrStoreLost)
	r.e.addBytes(r, -r.q.bytes)
	r.q = outbox{last: r.q.last, dropped: r.q.dropped}
	r.dropWinLocked(len(r.win))
	seq := r.q.next()
	m := Message{Seq: seq, Kind: KindResponse, Failed: true, Data: r.e.opts.Ended(r.id, seq, ErrStoreLost)}
	r.q.add(m, true)
	r.e.addBytes(r, len(m.Data))
	r.delivered = false
	r.e.log.Warn().Str("request", string(r.id)).Msg("the store lost the request: it ends failed, with that reason")
	// Stored anew, once the store has forgotten what it lost, as a request that
	// ends: its record (never to run again), its response, its final state.
	err := r.e.store.Delete(r.e.ctx, r.hash)
	if err == nil {
		rec := r.recordLocked(StateProcessing)
		rec.Payload = nil
		err = r.e.store.Put(r.e.ctx, rec)
	}
	if err == nil {
		err = r.e.store.Append(r.e.ctx, r.hash, m)
	}
	if err == nil {
		err = r.e.put(r, StateFailed)
	}
	if err != nil {
		r.e.log.Warn().Err(err).Str("request", string(r.id)).Msg("storing a lost request's response; kept in memory only")
	}
	r.setStateLocked(StateFailed)
	return true
}

// endedErrLocked is the error of a call on a request that has left the engine:
// ErrEnded, and what ended it (ErrCancelled, ErrExpired or ErrAcknowledged), as
// its tombstone tells a lookup.
func (r *Request) endedErrLocked() error {
	if r.evicted {
		return endedError{ErrEvicted}
	}
	return endedError{r.final.endedErr()}
}

type endedError struct{ cause error }

func (e endedError) Error() string   { return ErrEnded.Error() + ": " + e.cause.Error() }
func (e endedError) Unwrap() []error { return []error{ErrEnded, e.cause} }

func (r *Request) discardLocked(seqs []uint64) {
	before := r.q.bytes
	r.q.remove(seqs)
	r.e.addBytes(r, r.q.bytes-before)
	if r.e.store == nil {
		return
	}
	if err := r.e.store.Discard(r.e.ctx, r.hash, seqs...); err != nil {
		r.e.log.Warn().Err(err).Str("request", string(r.id)).Msg("discarding delivered messages")
	}
}

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
		if !acks {
			p.waitIdle(takeoverWait)
		}
	}
	for {
		r.mu.Lock()
		if r.att != a || (!r.q.hasAfter(a.cursor) && len(a.win) == 0) {
			a.draining = false
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

// keepLocked puts m, just delivered without ack mode, in the replay window, and
// lets the oldest go past Options.ReplayWindowBytes.
func (r *Request) keepLocked(m Message) {
	if r.e.opts.ReplayWindowBytes <= 0 {
		return
	}
	r.win = append(r.win, m)
	r.winBytes += len(m.Data)
	r.e.addBytes(r, len(m.Data))
	r.winAt = time.Now()
	r.trimWinLocked(r.e.opts.ReplayWindowBytes)
}

// trimWinLocked lets go of the replay window's oldest messages until it holds at
// most limit bytes.
func (r *Request) trimWinLocked(limit int) {
	i, b := 0, r.winBytes
	for i < len(r.win) && b > limit {
		b -= len(r.win[i].Data)
		i++
	}
	r.dropWinLocked(i)
}

// dropWinLocked lets go of the replay window's n oldest messages.
func (r *Request) dropWinLocked(n int) {
	if n == 0 {
		return
	}
	d := 0
	for _, m := range r.win[:n] {
		d += len(m.Data)
	}
	r.winBytes -= d
	r.e.addBytes(r, -d)
	if n == len(r.win) {
		r.win = nil
	} else {
		// From the head, as the queue's: no copy of the rest per message.
		clear(r.win[:n])
		r.win = r.win[n:]
	}
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
			if !yield(Message{Seq: e.seq, Kind: e.kind, Key: e.key, Data: e.data}, nil) {
				return
			}
		}
	}
}

// deliver writes one message to a and records it. It reports whether the drain
// goes on: false when the write failed or a is no longer the request's attachment.
func (r *Request) deliver(a *attachment, m Message) bool {
	a.wmu <- struct{}{}
	defer func() { <-a.wmu }()
	if err := a.sink.Write(r.e.ctx, m); err != nil {
		r.e.log.Debug().Err(err).Str("request", string(r.id)).Msg("write failed; detaching")
		r.detachAfterFailure(a)
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	// Delivered, even if the attachment changed meanwhile: without acks an
	// intermediate message written successfully is not sent again.
	if !r.ackMode && !m.Kind.retained() && r.q.has(m.Seq) {
		r.discardLocked([]uint64{m.Seq})
		if !r.gone.Load() {
			r.keepLocked(m)
		}
	}
	if m.Kind == KindResponse {
		if !r.delivered && !r.gone.Load() {
			r.delivered = true
			r.scheduleLocked() // the shorter window from now on
		}
		// Nothing comes after the final response: the request, kept for
		// DeliveredRetention, holds no sink (nor its connection's state). (A
		// response stored and replayed while its Complete still waits for the
		// store leaves the request as it is: processing, attached, draining.)
		if r.att == a && r.state.Ended() {
			r.att = nil
			return false
		}
	}
	if r.att != a {
		return false // taken over or ended; the new attachment has its own drain
	}
	a.cursor = m.Seq
	return true
}

func (r *Request) detachAfterFailure(a *attachment) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a.draining = false
	if r.att == a {
		r.detachLocked()
	}
}

// detachLocked leaves the request without a sink. A processing request starts its
// maxWait clock; an ended one keeps its retention clock as it runs.
func (r *Request) detachLocked() {
	r.att = nil
	if r.state == StateProcessing {
		r.scheduleLocked()
	}
}

// Peek returns the messages the request holds that a client must still get,
// server-to-client requests and the final response (KindRequest, KindResponse),
// without attaching anything or changing any state: a read of a task's state
// (tasks/get) while a client may be attached to it elsewhere.
func (r *Request) Peek() ([]Message, error) {
	if r.gone.Load() {
		r.mu.Lock()
		defer r.mu.Unlock()
		return nil, r.endedErrLocked()
	}
	var out []Message
	for m, err := range r.replay(0) {
		if err != nil {
			return nil, err
		}
		if m.Kind.retained() {
			out = append(out, m)
		}
	}
	return out, nil
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
