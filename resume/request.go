package resume

import (
	"context"
	"errors"
	"fmt"
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
	created   int64 // unix nanoseconds, as in its Record; 0 for none
	// values is what the request's context carries (StartOptions.Values;
	// nil for none); ctx, the context, once Context made it: most requests'
	// is never asked for, and costs nothing then; ended, the first cause
	// the request ended with, once it did.
	values context.Context
	ctx    atomic.Pointer[requestContext]
	ended  atomic.Pointer[error]
	also   context.CancelCauseFunc // StartOptions.Cancel: called by stop
	// x is what only some requests are started with; nil for none of it.
	x *requestExtra
	// epoch is the request's Record.Epoch: its run since its last recovery.
	epoch uint32
	// task: started as a task (StartOptions.Task; Record.Task).
	task bool
	// ttlArmed: its lifetime's end (requestExtra.ttl) is queued.
	ttlArmed bool
	// state, ackMode: guarded by mu, with the fields below it (here to fill
	// the word).
	state   State
	ackMode bool
	// obs is told of attachments and the final response's delivery
	// (StartOptions.Observer); nil for none.
	obs atomic.Pointer[Observer]

	mu  sync.Mutex // guards the fields below, state and ackMode
	q   outbox
	att *attachment // nil when detached
	// away is when the request last lost its client, or was made without one
	// (the engine's clock): a client away longer than ProgressHistory gets
	// only the newest progress of each token.
	away int64
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
	// win holds the messages last delivered without ack mode (bounded by
	// Options.ReplayWindowBytes; let go ReplayWindow after the last
	// delivery): a client that acknowledges for the first time when it
	// resumes gets again those that its lost connection held in buffers. Nil
	// when empty.
	win *replayWindow
	// memory: the request's messages are kept here, not read back from the
	// Store (lost by it once: see loseLocked).
	memory bool
	// finishing: its final response waits for the Store (appendFinalLocked);
	// no other message is queued.
	finishing bool
	// final is how the request left the engine, once gone: cancelled, expired, or
	// completed or failed when the client acknowledged its response.
	final State
	// queued: a deadline of the current generation is in the engine's queues
	// (guarded by Engine.tmu; see timers.go).
	queued bool
	gone   atomic.Bool // freed: left the engine; written under r.mu, read anywhere
	// writing: the attachment the final response is being written to (deliver);
	// released: that attachment, when its client ended its session (Release)
	// during the write, which then frees the request once it succeeds.
	writing, released *attachment
	// lastW is the write lock of the latest attachment, detached or not (see
	// attachment.wmu), until a detached one writes nothing more (idleWLocked).
	lastW writeLock
	// tgen is the generation of the request's deadline in the engine's timers:
	// bumped under r.mu each time the deadline is set or stopped, read anywhere.
	tgen atomic.Uint64
	// watchers get each message queued, and a token when there is news
	// (Watch; guarded by mu).
	watchers map[*Watcher]struct{}
	// same is the next live request whose hash shares its first bytes
	// (liveSet; guarded by Engine.mu).
	same *Request
}

// newRequest returns the request rec describes, holding q, whose context
// (made when first asked for) carries values': every Request is made here,
// started (Start) or recovered.
func (e *Engine) newRequest(values context.Context, rec Record, q outbox) *Request {
	r := &Request{e: e, id: rec.ID, hash: rec.Hash, principal: rec.Principal,
		state: rec.State, q: q, ackMode: rec.AckMode, epoch: rec.Epoch, task: rec.Task}
	if !rec.Created.IsZero() {
		r.created = rec.Created.UnixNano()
	}
	x := requestExtra{trace: rec.Trace, ttl: rec.TTL, deadline: rec.Deadline}
	if rec.State == StateProcessing {
		x.payload = rec.Payload
	}
	if x.payload != nil || !x.trace.IsZero() || x.ttl != 0 || !x.deadline.IsZero() {
		r.x = &x
	}
	if len(r.q.entries) <= len(r.q.first) { // point entries at r's own array, not the copy's
		r.q.entries = append(r.q.first[:0], r.q.entries...)
	}
	r.values = values
	r.away = e.clock()
	return r
}

// Task reports whether the request is a task (StartOptions.Task).
func (r *Request) Task() bool { return r.task }

// ID returns the request's JSON-RPC id, raw.
func (r *Request) ID() []byte { return r.id }

// Trace returns the request's trace context (StartOptions.Trace), kept in its
// Record: a recovered request has it too.
func (r *Request) Trace() TraceContext { return r.extra().trace }

// requestExtra is what only some requests are started with: it is set as the
// request is made, and never changed.
type requestExtra struct {
	// payload makes a restartable request's record (StartOptions.Payload);
	// nil for the others.
	payload []byte
	// trace is the request's trace context (StartOptions.Trace;
	// Record.Trace).
	trace TraceContext
	// ttl, when not 0, is the request's fixed lifetime from created
	// (StartOptions.TTL; Record.TTL): its one deadline, whatever its state.
	ttl time.Duration
	// deadline: StartOptions.Deadline; Record.Deadline.
	deadline time.Time
}

// noExtra is the extra of a request started with none.
var noExtra requestExtra

// extra returns what the request was started with of requestExtra's.
func (r *Request) extra() *requestExtra {
	if r.x == nil {
		return &noExtra
	}
	return r.x
}

// Observe makes o the request's Observer from now on (StartOptions.Observer
// for a request this engine did not start: one recovered or claimed, run
// again).
func (r *Request) Observe(o Observer) {
	r.obs.Store(&o)
}

// observer returns the request's Observer; nil for none.
func (r *Request) observer() Observer {
	if o := r.obs.Load(); o != nil {
		return *o
	}
	return nil
}

// end ends the request's context with cause (the first cause counts), and
// tells its Observer.
func (r *Request) end(cause error) {
	r.stop(cause)
	if o := r.observer(); o != nil {
		o.Ended(r.Cause())
	}
}

// stop ends the request's context with cause (the first cause counts), and
// the caller's it was started with (StartOptions.Cancel).
func (r *Request) stop(cause error) {
	r.cancel(cause)
	if r.also != nil {
		r.also(r.Cause())
	}
}

// requestContext is a request's context, made when it is first asked for.
type requestContext struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
}

// cancel ends the request's context with cause (the first cause counts;
// context.Canceled for nil): its Cause from now on, and its context's
// cause, whenever that is made.
func (r *Request) cancel(cause error) {
	if cause == nil {
		cause = context.Canceled
	}
	r.ended.CompareAndSwap(nil, &cause)
	// Context stores the context before it reads ended: one of the two
	// sees the other's store.
	if c := r.ctx.Load(); c != nil {
		c.cancel(*r.ended.Load())
	}
}

// Cause returns why the request ended (its context's cause: see Context);
// nil while it has not.
func (r *Request) Cause() error {
	if e := r.ended.Load(); e != nil {
		return *e
	}
	return nil
}

// Payload returns what the request was started with to make it restartable (see
// StartOptions.Payload); nil for a request that is not restartable.
func (r *Request) Payload() []byte { return r.extra().payload }

// Context returns the request's own context: cancelled when the request ends (cause
// ErrEnded once its result is acknowledged or its retention ends), by Cancel (cause
// ErrCancelled), expiry (ErrExpired) or Engine.Close (ErrClosed), never by a
// connection.
func (r *Request) Context() context.Context {
	if c := r.ctx.Load(); c != nil {
		return c.ctx
	}
	base := context.Background()
	if r.values != nil {
		base = context.WithoutCancel(r.values)
	}
	c := new(requestContext)
	c.ctx, c.cancel = context.WithCancelCause(base)
	if !r.ctx.CompareAndSwap(nil, c) {
		c.cancel(nil)
		return r.ctx.Load().ctx
	}
	if e := r.ended.Load(); e != nil {
		c.cancel(*e)
	}
	return c.ctx
}

// Status is a snapshot of a request for requests/getStatus.
type Status struct {
	// State is where the request is in its lifecycle.
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

// Detached reports whether no client is attached to the request.
func (r *Request) Detached() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.att == nil
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

// Deadline returns when the request's handler must have ended
// (StartOptions.Deadline, kept across a restart); zero for none.
func (r *Request) Deadline() time.Time { return r.extra().deadline }

// End ends the request now, failed, with the final response encode makes (as
// Complete does), and ends its context with cause: its handler is told to
// stop, and what it appends later is refused. A request that has ended already
// is left as it is (the error says so). A tool's timeout ends its request so.
func (r *Request) End(cause error, encode func(seq uint64) []byte) (uint64, error) {
	seq, err := r.Complete(true, encode)
	if err == nil {
		r.stop(cause)
	}
	return seq, err
}

// Created returns when the request started (Record.Created).
func (r *Request) Created() time.Time {
	if r.created == 0 {
		return time.Time{}
	}
	return time.Unix(0, r.created)
}

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
	var now int64 // when a progress message came: the one it supersedes, at that
	if k == KindProgress {
		now = r.e.clock()
	}
	r.q.add(m, r.e.store == nil || r.memory, now)
	r.e.addBytes(r, len(m.Data))
	if cutoff, ok := r.historyCutoffLocked(k, now); ok {
		if drop := r.q.stale(cutoff); len(drop) > 0 {
			r.discardLocked(drop)
		}
	}
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
	x := r.extra()
	rec := Record{Hash: r.hash, ID: r.id, State: state, Created: r.Created(), Principal: r.principal, Owner: r.e.self, AckMode: r.ackMode, Epoch: r.epoch, Task: r.task, TTL: x.ttl, Trace: x.trace, Deadline: x.deadline}
	if state == StateProcessing {
		rec.Payload = x.payload // what a restartable request runs again with
	}
	return rec
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
//
// A response whose write to the client's stream is under way as the session
// ends (the client may have it already, and have ended its session after
// reading it) frees the request once that write succeeds.
func (r *Request) Release() {
	r.mu.Lock()
	defer r.mu.Unlock()
	// A client in ack mode says when it has a result, by acknowledging it.
	if r.gone.Load() || r.ackMode {
		return
	}
	if r.delivered && !r.finishing && r.state.Ended() {
		r.freeLocked(r.state)
		return
	}
	r.released = r.writing
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
	i, win := 0, r.win.messages()
	for i < len(win) && win[i].Seq <= ack {
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
		r.end(ErrCancelled)
	case StateExpired:
		r.end(ErrExpired)
	default:
		r.end(ErrEnded)
	}
	r.e.addBytes(r, -r.q.bytes)
	r.q = outbox{dropped: r.q.dropped}
	r.dropWinLocked(len(r.win.messages()))
	r.e.forget(r, final)
	r.tellWatchersLocked(Message{})
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
	r.end(ErrStoreLost)
	r.e.addBytes(r, -r.q.bytes)
	r.q = outbox{last: r.q.last, dropped: r.q.dropped}
	r.dropWinLocked(len(r.win.messages()))
	seq := r.q.next()
	m := Message{Seq: seq, Kind: KindResponse, Failed: true, Data: r.e.opts.Ended(r.id, seq, ErrStoreLost)}
	r.q.add(m, true, 0)
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

// historyCutoffLocked returns the time (the engine's clock) before which
// superseded progress goes as a message of kind k is queued at now, and
// whether any goes: past ProgressHistory; all of it while the process is tight
// on memory (Options.MemoryTight), or once the request has had no client for
// longer than the history.
func (r *Request) historyCutoffLocked(k Kind, now int64) (int64, bool) {
	if k != KindProgress {
		return 0, false
	}
	if r.e.Tight() {
		return now + 1, true
	}
	h := int64(r.e.opts.ProgressHistory)
	switch {
	case h <= 0:
		return 0, false
	case r.att == nil && now-r.away >= h:
		return now + 1, true // its client, away longer than the history, gets the newest alone
	}
	return now - h, true
}
