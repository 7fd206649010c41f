package resume

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// Engine is the registry of resumable requests. It is safe for concurrent use;
// Close cancels every live request's context and waits for the engine's
// goroutines, and a Start after it fails with ErrClosed.
type Engine struct {
	opts    Options
	store   Store
	cluster Cluster  // nil for a single instance
	self    string   // cluster.Self(), the Owner of the requests this engine starts
	others  []Record // other owners' records found by recoverStored, for Bind
	log     *zerolog.Logger
	ctx     context.Context // ends at Close; used for Store calls
	stop    context.CancelFunc

	mu      sync.Mutex // guards the fields below
	live    liveSet
	running int // live requests still processing (bounded by MaxLive)
	// runningBy counts running by principal (MaxLivePerPrincipal); principals
	// with none are not in it, nor is "".
	runningBy map[string]int
	// all counts the bytes of every live request's queued messages (MaxBytes)
	// and its kept results (MaxRetained); byPrincipal each principal's
	// (MaxBytesPerPrincipal), "" not among them.
	all         usage
	byPrincipal map[string]*usage
	tombs       map[TokenHash]tombstone
	tombQ       []TokenHash // insertion order, for expiry and the count bound
	tombTimer   *time.Timer // fires when the oldest tombstone's time is over (ageTombs)
	tombAt      time.Time   // when tombTimer is armed for; zero when it is not
	// restartable: recovered requests to run again (see Restartable).
	restartable []*Request
	closed      bool
	// claimMu is held through each claim, from Store.Claim until the request is
	// live here, so that a lookup finding a request claimed by this engine waits
	// for it (Held).
	claimMu sync.Mutex
	// bg: goroutines the engine starts (the OnRestartable call) and those its
	// Cluster runs in it (Enter), which Close waits for. Added to under mu,
	// unless closed.
	bg sync.WaitGroup

	durations [numClocks]time.Duration // of each clock: MaxWait, Retention, DeliveredRetention (clockTTL's is each request's)
	tmu       sync.Mutex               // guards tm; taken with a request's mu held, never the reverse
	tm        timers

	// Counters since New, for Stats.
	attaches      atomic.Uint64 // successful Request.Attach calls (resumes, reconnects)
	expired       atomic.Uint64 // requests that ended expired (maxWait, retention, MaxRetained)
	evicted       atomic.Uint64 // results released early (MaxRetained, MaxBytes)
	tokenFailures atomic.Uint64 // lookups answered ErrUnknown
	unreadable    atomic.Uint64 // stored records Store.Records could not decode
}

// New returns an engine over store. Requests the store already holds (a durable
// store, after a restart) are recovered first: see recover.go. ctx bounds the
// recovery (its Store calls, and the Cluster's Bind); when it ends before the
// recovery is done, New closes the engine and returns ctx's error. The engine
// lives until Close, whatever becomes of ctx.
//
// A nil store means none: the engine keeps every queued message in its own
// memory (with its outbox's index) and nothing outlives it. That is what a
// Store in memory would do, without keeping a second copy of each request's
// record and index. A Cluster needs a store the instances share: New returns
// an error for one that is not a Lister and a Claimer.
func New(ctx context.Context, store Store, opts *Options) (*Engine, error) {
	o := opts.withDefaults()
	if o.Cluster != nil {
		_, list := store.(Lister)
		_, claim := store.(Claimer)
		if !list || !claim {
			return nil, errors.New("resume: Options.Cluster needs a Store that the instances share, a Lister and a Claimer")
		}
	}
	ectx, stop := context.WithCancel(context.Background())
	e := &Engine{
		opts: o, store: store, log: o.Logger, ctx: ectx, stop: stop,
		runningBy:   make(map[string]int),
		byPrincipal: make(map[string]*usage),
		tombs:       make(map[TokenHash]tombstone),
		durations:   [numClocks]time.Duration{o.MaxWait, o.Retention, o.DeliveredRetention, 0},
		tm:          timers{epoch: time.Now()},
	}
	if o.Cluster != nil {
		e.cluster, e.self = o.Cluster, o.Cluster.Self()
	}
	e.recoverStored(ctx)
	if e.cluster != nil {
		others := e.others
		e.others = nil
		e.cluster.Bind(ctx, host{e}, others)
	}
	if err := ctx.Err(); err != nil {
		e.Close()
		return nil, fmt.Errorf("resume: recovering the stored requests: %w", err)
	}
	return e, nil
}

// clock is the engine's monotonic clock, in nanoseconds since it started:
// what ages superseded progress (ProgressHistory), which a step of the wall
// clock must not.
func (e *Engine) clock() int64 { return int64(time.Since(e.tm.epoch)) }

// Options returns the engine's options with defaults filled in.
func (e *Engine) Options() Options { return e.opts }

// Store returns the engine's Store; nil without one.
func (e *Engine) Store() Store { return e.store }

// Context returns the engine's context, ended by Close: for Store calls made
// on the engine's behalf.
func (e *Engine) Context() context.Context { return e.ctx }

// StartOptions configure one request.
type StartOptions struct {
	// AckMode keeps every message until acknowledged (the client announced the ack
	// extension).
	AckMode bool
	// Sink, when set, attaches the request from the start (no maxWait clock runs).
	Sink Sink
	// Values supplies the values of the request's context (for example the MCP
	// session); its cancellation and deadline are ignored. Nil means none.
	Values context.Context
	// Payload, when set, makes the request restartable: it is stored with the
	// request, and an engine that recovers the request while it was processing
	// hands it back (Engine.Restartable) to be run again instead of failing it.
	Payload []byte
	// Principal is who started the request (an authenticated client's name; "" when
	// the server has no authentication). Only LookupAs with the same principal finds
	// the request. It is stored in the request's Record, so a request recovered
	// after a restart keeps it.
	Principal string
	// Task marks the request as a task (the Tasks extension, or the 2025-11-25
	// form): counted apart in Stats, stored in its Record, and its tombstone is
	// stored too (a cancelled task stays cancelled across a restart).
	Task bool
	// TTL, when not 0, is the request's lifetime from its start, in place of
	// MaxWait and the retentions: it is kept that long whatever happens to it
	// (polled or not, attached or not), and then expires, cancelled if it still
	// runs. A task's ttl. Stored in its Record: a recovered request keeps it.
	TTL time.Duration
	// Token, when set, is the request's token instead of a new random one: a key
	// the client chose and sent with its call, so that it can find the request
	// without having received its policy. The caller vouches that it is
	// unguessable. Start returns ErrExists when a request with it is known.
	Token string
	// Trace is the trace context of the span that stands for the request:
	// stored in its Record (Handle.Trace on any instance, Request.Trace after
	// a restart). Zero for none.
	Trace TraceContext
	// Observer, when set, is told of the request's attachments and of its
	// final response's delivery while this engine runs it.
	Observer Observer
	// Cancel, when set, is called with the cause as the request's context
	// ends (its end, or End): it ends a context of the caller's with the
	// request's, at no cost to the request's context (context.AfterFunc on
	// it makes a registration there per request).
	Cancel context.CancelCauseFunc
	// Deadline, when not zero, is when the request's handler must have ended
	// (its tool's timeout): stored in its Record, so that a request run again
	// after a restart, or by another instance of a cluster, keeps it
	// (Request.Deadline). The engine keeps it; its caller enforces it (End).
	Deadline time.Time
}

// Start registers a new resumable request with JSON-RPC id id. It returns the
// request and its token, which the caller sends to the client once and forgets.
func (e *Engine) Start(id []byte, so *StartOptions) (*Request, string, error) {
	if so == nil {
		so = &StartOptions{}
	}
	if short := e.opts.MemoryShort; short != nil && short() {
		return nil, "", ErrMemory
	}
	if e.over(so.Principal) {
		e.trim(so.Principal, false) // the oldest kept results make room, if they can
	}
	tok, h := so.Token, TokenHash{}
	if tok == "" {
		tok, h = newToken()
	} else {
		h = HashToken(tok)
	}
	rec := Record{Hash: h, ID: bytes.Clone(id), State: StateProcessing, Created: time.Now(), Principal: so.Principal, AckMode: so.AckMode, Payload: so.Payload, Task: so.Task, TTL: so.TTL, Trace: so.Trace, Deadline: so.Deadline}
	r := e.newRequest(so.Values, rec, outbox{})
	r.also = so.Cancel
	if o := so.Observer; o != nil {
		r.obs.Store(&o)
	}

	e.mu.Lock()
	switch {
	case e.closed:
		e.mu.Unlock()
		r.cancel(ErrClosed)
		return nil, "", ErrClosed
	case e.fullLocked(so.Principal):
		e.mu.Unlock()
		r.cancel(ErrLimit)
		return nil, "", ErrLimit
	case e.overLocked(so.Principal):
		e.mu.Unlock()
		r.cancel(ErrFull)
		return nil, "", ErrFull
	case so.Token != "" && e.knownLocked(h):
		e.mu.Unlock()
		r.cancel(ErrExists)
		return nil, "", ErrExists
	}
	e.live.add(r)
	e.addRunningLocked(so.Principal, 1)
	r.use = e.useLocked(so.Principal)
	e.mu.Unlock()

	if err := e.put(r, StateProcessing); err != nil { // r is not shared yet
		e.mu.Lock()
		e.live.remove(r)
		e.addRunningLocked(so.Principal, -1)
		e.releaseUseLocked(r)
		e.mu.Unlock()
		r.cancel(err)
		return nil, "", err
	}
	r.mu.Lock()
	if so.Sink != nil {
		r.newAttachmentLocked(so.Sink, 0, false)
	}
	// Detached until its first Attach, the maxWait clock runs; a TTL runs from
	// now. An attached request without one has no deadline: nothing to do.
	if so.Sink == nil || r.extra().ttl > 0 {
		r.scheduleLocked()
	}
	r.mu.Unlock()
	return r, tok, nil
}

// Restartable returns, once, the requests recovered from the store that were
// processing when an earlier process stopped and are restartable (started with a
// Payload): each is processing again, detached (its maxWait clock runs), with its
// queued messages, for the caller to run again with Request.Payload. Until the
// caller completes them they are like any running request.
func (e *Engine) Restartable() []*Request {
	e.mu.Lock()
	defer e.mu.Unlock()
	rs := e.restartable
	e.restartable = nil
	return rs
}

// Lookup finds the request for token whose id is id, started without a principal
// (see LookupAs).
func (e *Engine) Lookup(token string, id []byte) (Handle, error) {
	return e.LookupAs(token, id, "")
}

// LookupAs finds the request for token whose id is id, started by principal
// (StartOptions.Principal). A wrong token, a wrong id, another principal's request
// and an unknown request all give ErrUnknown, along the same path; an ended
// request that the caller holds the right token for, as its principal, gives
// ErrExpired or ErrCancelled while its tombstone lives.
// With a Cluster, a request this engine does not hold is looked up in the Store,
// and the Cluster resolves it: a proxy when another instance owns it, the
// request claimed here when its owner is lost.
func (e *Engine) LookupAs(token string, id []byte, principal string) (Handle, error) {
	r, err := e.LookupKey(token, id, principal)
	if errors.Is(err, ErrUnknown) {
		e.tokenFailures.Add(1)
	}
	return r, err
}

// LookupKey is LookupAs for a token the client chose itself (StartOptions.Token):
// not finding one is how a keyed call starts, not a failed token check, and is
// not counted as one.
func (e *Engine) LookupKey(token string, id []byte, principal string) (Handle, error) {
	h := HashToken(token)
	e.mu.Lock()
	r := e.live.get(h)
	held := r != nil
	if held && bytes.Equal(r.id, id) && r.principal == principal {
		e.mu.Unlock()
		return r, nil
	}
	t, tomb := e.tombs[h]
	e.mu.Unlock()
	if tomb && bytes.Equal(t.id, id) && t.principal == principal && time.Now().Before(t.until) {
		return nil, t.err()
	}
	if e.cluster != nil && !held && !tomb {
		if r, err := e.lookupShared(h, id, principal); !errors.Is(err, ErrUnknown) {
			return r, err
		}
	}
	return nil, ErrUnknown
}

// Tight reports whether the process is tight of memory (Options.MemoryTight):
// false without that option.
func (e *Engine) Tight() bool {
	tight := e.opts.MemoryTight
	return tight != nil && tight()
}

// Live returns the number of live requests.
func (e *Engine) Live() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.live.len()
}

// Close cancels every live request's context and refuses new ones. Messages already
// in the Store stay there (a durable store keeps them for the next process).
func (e *Engine) Close() {
	e.mu.Lock()
	e.closed = true
	if e.tombTimer != nil {
		e.tombTimer.Stop()
	}
	reqs := e.live.all()
	e.mu.Unlock()
	if e.cluster != nil {
		e.cluster.Leave()
	}
	e.stopTimers()
	// A final response on its way to a client as the engine closes may finish
	// (for takeoverWait at most, all of them together): its delivery, not the
	// close, ends such a request, and what observes it hears so. A request
	// whose lock is held meanwhile is not waited for: it may be an Append
	// waiting for an unreachable store, which the close ends (e.stop).
	deadline := time.Now().Add(takeoverWait)
	for _, r := range reqs {
		if !r.mu.TryLock() {
			continue
		}
		var w writeLock
		if r.writing != nil {
			w = r.writing.wmu
		}
		r.mu.Unlock()
		if w != nil {
			w.waitIdle(time.Until(deadline))
		}
	}
	for _, r := range reqs {
		r.end(ErrClosed)
	}
	e.stop()
	e.bg.Wait()
}

// enter counts the calling goroutine (one the Cluster runs: a call, a
// departure, a watch; or a background task), among those Close waits for, unless the engine is closed: then it
// returns false and the caller does nothing. A true return is paired with
// e.bg.Done().
func (e *Engine) enter() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return false
	}
	e.bg.Add(1)
	return true
}

// goBackground runs f on a goroutine that Close waits for, unless the engine is
// closed.
func (e *Engine) goBackground(f func()) {
	if e.enter() {
		go func() {
			defer e.bg.Done()
			f()
		}()
	}
}

// put stores r's Record with state, when the engine has a Store (without one,
// the Record is not even made: Start and Complete pay nothing for it). Called
// with r.mu held, or before r is shared.
func (e *Engine) put(r *Request, state State) error {
	if e.store == nil {
		return nil
	}
	return e.store.Put(e.ctx, r.recordLocked(state))
}

// Abandon ends, with Options.Ended's response for ErrStopped, every live request
// still processing, but those that can run again elsewhere when keep is true
// (restartable: started with a Payload, which a durable or shared store keeps).
// The response is stored like any other final response, so a client resuming
// later, here or on another instance of a cluster, gets it; the handlers keep
// running until Close ends their contexts, and what they append is refused.
// It is the last step of a drain (a shutdown that waited for its requests): it
// returns how many requests it ended and how many it left to run again.
func (e *Engine) Abandon(keep bool) (ended, left int) {
	e.mu.Lock()
	reqs := e.live.all()
	e.mu.Unlock()
	for _, r := range reqs {
		r.mu.Lock()
		processing := r.state == StateProcessing
		r.mu.Unlock()
		switch {
		case !processing:
		case keep && r.extra().payload != nil:
			left++
		default:
			if _, err := r.Complete(true, func(seq uint64) []byte { return e.opts.Ended(r.id, seq, ErrStopped) }); err == nil {
				ended++
			}
		}
	}
	return ended, left
}
