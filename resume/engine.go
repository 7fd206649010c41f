package resume

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// Errors the engine returns. Callers map them to wire errors with errors.Is.
var (
	// ErrUnknown: no request with this token and id (a wrong token gives the same).
	ErrUnknown = errors.New("resume: no such request")
	// ErrExpired: the request expired, or its result's retention ended.
	ErrExpired = errors.New("resume: request expired")
	// ErrCancelled: the request was cancelled.
	ErrCancelled = errors.New("resume: request cancelled")
	// ErrLimit: Options.MaxLive requests (or Options.MaxLivePerPrincipal of the
	// principal's) are running; the new one is not resumable.
	ErrLimit = errors.New("resume: too many running resumable requests")
	// ErrEnded: the request has ended; the call had no effect.
	ErrEnded = errors.New("resume: request has ended")
	// ErrAcknowledged: the client acknowledged the request's final response, so it
	// holds the result, and the request is freed (Attach with such an ack, and
	// lookups of the request afterwards, while its tombstone lives).
	ErrAcknowledged = errors.New("resume: the final response was acknowledged")
	// ErrAckAhead: an acknowledgement names a message the request has not given
	// out; it was not applied.
	ErrAckAhead = errors.New("resume: acknowledgement past the last message")
	// ErrEvicted: the request's result was released before its retention ended,
	// to keep the engine within MaxRetained or its byte budgets (MaxBytes,
	// MaxBytesPerPrincipal), the oldest kept result first. It is an ErrExpired.
	ErrEvicted = fmt.Errorf("%w: its result was released early, the server's bound on kept results being reached", ErrExpired)
	// ErrFull: the byte budget (MaxBytes, or MaxBytesPerPrincipal of the
	// principal's) is used up by queued messages even with every kept result
	// released; the new request is not resumable.
	ErrFull = errors.New("resume: the byte budget for queued messages is used up")
	// ErrExists: a request with StartOptions.Token is live, or ended with its
	// tombstone still kept.
	ErrExists = errors.New("resume: a request with this token exists")
	// ErrClosed: the engine is closed.
	ErrClosed = errors.New("resume: engine closed")
	// ErrRestarted ends, with Options.Ended's response, a request that the
	// store holds as processing when the engine starts: it was running when an
	// earlier process stopped (see recover.go).
	ErrRestarted = errors.New("the server restarted while the request was running")
	// ErrOwnerLost ends, with Options.Ended's response, a request that was
	// processing when its owner, another instance, was lost (see Cluster).
	ErrOwnerLost = errors.New("the instance running the request was lost")
	// ErrStoreLost ends, with Options.Ended's response, a request whose store
	// lost what it held of it: a Store call for it fails wrapping ErrStoreLost
	// (see Request.loseLocked).
	ErrStoreLost = errors.New("the store lost the request's messages")
	// ErrUnreachable: the instance that owns the request, another of a
	// cluster, holds its lease but did not answer (it may have just died:
	// the request is claimed once its lease runs out). Retryable.
	ErrUnreachable = errors.New("the instance running the request did not answer")
)

// Options configure an Engine. The zero value of each field means its default.
type Options struct {
	// MaxWait is how long a detached, processing request lives without a client
	// (reset by Touch and Attach). Default 10 minutes.
	MaxWait time.Duration
	// MinWait is the time a client should wait after a disconnect before it resumes;
	// advertised only. Default 0.
	MinWait time.Duration
	// Retention is how long a final response that no client has received is kept
	// after completion (reset by Touch and Attach). Default MaxWait.
	Retention time.Duration
	// DeliveredRetention is how long a final response is kept once it has been
	// written to an attached client, unacknowledged: long enough for a client whose
	// connection died with the response in its buffers to resume. Default one
	// minute, and never longer than Retention.
	DeliveredRetention time.Duration
	// TombstoneTTL is how long an ended request is remembered to answer "expired" or
	// "cancelled" instead of "not found". Default 1 hour.
	TombstoneTTL time.Duration
	// MaxTombstones bounds the tombstones kept; the oldest go first. Default 100,000.
	MaxTombstones int
	// MaxLive caps the running (processing) resumable requests; Start returns
	// ErrLimit past it. Default 10,000.
	MaxLive int
	// MaxLivePerPrincipal caps the running resumable requests of each principal
	// (StartOptions.Principal; requests without a principal are bounded by MaxLive
	// only); Start returns ErrLimit past it. Default 500; negative: no cap.
	MaxLivePerPrincipal int
	// MaxRetained caps the ended requests whose results are kept; past it the
	// oldest is released early (it answers expired). Default 100,000.
	MaxRetained int
	// QueueBytes is each request's byte budget for queued messages. Default 1 MiB.
	QueueBytes int
	// MaxBytes bounds the bytes of every request's queued messages together,
	// kept results included. Past it, the oldest kept results are released first
	// (they answer ErrEvicted); a running request that queues more has its
	// droppable messages dropped as its QueueBytes would drop them (older progress
	// of a token, then notifications, oldest first; never a response or a
	// server-to-client request); and Start returns ErrFull while the budget is
	// still used up. Default 1 GiB; negative: no bound.
	MaxBytes int64
	// MaxBytesPerPrincipal is MaxBytes for the requests of each principal
	// (StartOptions.Principal; requests without one are bounded by MaxBytes only):
	// past it, that principal's oldest kept results go, and its new requests get
	// ErrFull. Default MaxBytes/4; negative: no bound.
	MaxBytesPerPrincipal int64
	// ReplayWindowBytes and ReplayWindow bound what a request keeps of the
	// messages it delivered to a client that does not acknowledge (no ack
	// extension): the newest ReplayWindowBytes of them, for ReplayWindow after
	// the last. A client that acknowledges for the first time when it resumes
	// (Attach with an ack), or that retried its call (AttachAll), gets again
	// those after its ack, so what its lost connection held in buffers is not
	// lost. Defaults 32 KiB and one minute; a negative ReplayWindowBytes keeps
	// none.
	ReplayWindowBytes int
	ReplayWindow      time.Duration
	// Ended encodes the final response of a request that ended without its
	// handler's: cause is ErrRestarted, ErrOwnerLost or ErrStoreLost, seq the
	// response's sequence number. The protocol's layer supplies it (package mcp: the MCP
	// error with its reason); the default is a JSON-RPC 2.0 internal error
	// (-32603) with cause's text.
	Ended func(id []byte, seq uint64, cause error) []byte
	// Cluster, when set, makes the engine one instance of several sharing its
	// Store (see Cluster). Nil: the engine owns every request in its Store.
	Cluster Cluster
	// OnRestartable is called, on a goroutine of its own, when requests to run
	// again are ready in Restartable after New has returned (claimed from a lost
	// instance). Recovery in New does not call it: the caller asks Restartable.
	OnRestartable func()
	// Logger receives the engine's logs. Nil means none.
	Logger *zerolog.Logger
}

func (o *Options) withDefaults() Options {
	var v Options
	if o != nil {
		v = *o
	}
	def := func(d *time.Duration, val time.Duration) {
		if *d <= 0 {
			*d = val
		}
	}
	def(&v.MaxWait, 10*time.Minute)
	def(&v.Retention, v.MaxWait)
	def(&v.DeliveredRetention, time.Minute)
	v.DeliveredRetention = min(v.DeliveredRetention, v.Retention)
	def(&v.TombstoneTTL, time.Hour)
	if v.MaxTombstones <= 0 {
		v.MaxTombstones = 100_000
	}
	if v.MaxLive <= 0 {
		v.MaxLive = 10_000
	}
	if v.MaxLivePerPrincipal == 0 {
		v.MaxLivePerPrincipal = DefaultMaxLivePerPrincipal
	}
	if v.MaxRetained <= 0 {
		v.MaxRetained = 100_000
	}
	if v.QueueBytes <= 0 {
		v.QueueBytes = 1 << 20
	}
	if v.ReplayWindowBytes == 0 {
		v.ReplayWindowBytes = 32 << 10
	}
	def(&v.ReplayWindow, time.Minute)
	if v.MaxBytes == 0 {
		v.MaxBytes = 1 << 30
	}
	if v.MaxBytesPerPrincipal == 0 && v.MaxBytes > 0 {
		v.MaxBytesPerPrincipal = v.MaxBytes / 4
	}
	if v.Ended == nil {
		v.Ended = endedResponse
	}
	if v.Logger == nil {
		nop := zerolog.Nop()
		v.Logger = &nop
	}
	return v
}

// Engine is the registry of resumable requests. It is safe for concurrent use.
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
	live    map[TokenHash]*Request
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

type tombstone struct {
	id        []byte
	principal string
	state     State
	evicted   bool // released early (ErrEvicted)
	// stored: its record stays in the store while it lasts (a cluster's, and
	// a task's), and is deleted when it ages out.
	stored bool
	// until: it answers lookups until then (TombstoneTTL after the request
	// ended; a task's, at least to the end of its ttl, whose client polls it).
	until time.Time
}

// err is what a lookup of the ended request answers.
func (t tombstone) err() error {
	if t.evicted {
		return ErrEvicted
	}
	return t.state.endedErr()
}

// usage counts the bytes of queued messages and the kept results: of every
// request, or of one principal's.
type usage struct {
	bytes atomic.Int64
	refs  int // the requests counted in it (guarded by Engine.mu); a principal's goes at 0
	// retainQ holds the ended requests that keep their result, in the order
	// they ended, and may hold gone ones; retained counts those not gone
	// (guarded by Engine.mu).
	retainQ  []*Request
	retained int
}

// retain counts r, ended, among u's kept results. Called with Engine.mu held.
func (u *usage) retain(r *Request) {
	u.retained++
	u.retainQ = push(u.retainQ, r)
	if len(u.retainQ) > 2*u.retained+64 { // drop the gone ones, amortized
		u.retainQ = slices.DeleteFunc(u.retainQ, func(q *Request) bool { return q.gone.Load() })
	}
}

// release picks u's oldest kept results not picked yet, while more says there
// is more to release, and reports each to took. Called with Engine.mu held.
func (u *usage) release(more func() bool, took func(*Request)) {
	i := 0
	for ; i < len(u.retainQ) && more(); i++ {
		if v := u.retainQ[i]; !v.gone.Load() && !v.victim {
			v.victim = true
			took(v)
		}
	}
	// What was passed is picked or gone.
	clear(u.retainQ[:i]) // the array keeps no freed request alive
	u.retainQ = u.retainQ[i:]
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
		live:        make(map[TokenHash]*Request),
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

// DefaultMaxLivePerPrincipal is Options.MaxLivePerPrincipal's default.
const DefaultMaxLivePerPrincipal = 500

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
}

// Start registers a new resumable request with JSON-RPC id id. It returns the
// request and its token, which the caller sends to the client once and forgets.
func (e *Engine) Start(id []byte, so *StartOptions) (*Request, string, error) {
	if so == nil {
		so = &StartOptions{}
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
	base := context.Background()
	if so.Values != nil {
		base = context.WithoutCancel(so.Values)
	}
	rec := Record{Hash: h, ID: bytes.Clone(id), State: StateProcessing, Created: time.Now(), Principal: so.Principal, AckMode: so.AckMode, Payload: so.Payload, Task: so.Task, TTL: so.TTL}
	r := e.newRequest(base, rec, outbox{})

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
	e.live[h] = r
	e.addRunningLocked(so.Principal, 1)
	r.use = e.useLocked(so.Principal)
	e.mu.Unlock()

	if err := e.put(r, StateProcessing); err != nil { // r is not shared yet
		e.mu.Lock()
		delete(e.live, h)
		e.addRunningLocked(so.Principal, -1)
		e.releaseUseLocked(r)
		e.mu.Unlock()
		r.cancel(err)
		return nil, "", err
	}
	r.mu.Lock()
	if so.Sink != nil {
		r.newAttachmentLocked(so.Sink, 0, nil)
	}
	// Detached until its first Attach, the maxWait clock runs; a TTL runs from
	// now. An attached request without one has no deadline: nothing to do.
	if so.Sink == nil || r.ttl > 0 {
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
	r, held := e.live[h]
	if held && r.hash.equal(h) && bytes.Equal(r.id, id) && r.principal == principal {
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

// Live returns the number of live requests.
func (e *Engine) Live() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.live)
}

// Close cancels every live request's context and refuses new ones. Messages already
// in the Store stay there (a durable store keeps them for the next process).
func (e *Engine) Close() {
	e.mu.Lock()
	e.closed = true
	reqs := make([]*Request, 0, len(e.live))
	for _, r := range e.live {
		reqs = append(reqs, r)
	}
	e.mu.Unlock()
	if e.cluster != nil {
		e.cluster.Leave()
	}
	e.stopTimers()
	for _, r := range reqs {
		r.cancel(ErrClosed)
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

// fullLocked says whether a new running request of principal would pass MaxLive
// or MaxLivePerPrincipal. Called with e.mu held.
func (e *Engine) fullLocked(principal string) bool {
	if e.running >= e.opts.MaxLive {
		return true
	}
	return principal != "" && e.opts.MaxLivePerPrincipal > 0 && e.runningBy[principal] >= e.opts.MaxLivePerPrincipal
}

// addRunningLocked adds d to the running counts. Called with e.mu held.
func (e *Engine) addRunningLocked(principal string, d int) {
	e.running += d
	if principal == "" {
		return
	}
	if n := e.runningBy[principal] + d; n > 0 {
		e.runningBy[principal] = n
	} else {
		delete(e.runningBy, principal)
	}
}

// leftProcessing records that r stopped processing: it ended with a result to
// keep (kept) or is being freed. Called with r.mu held.
func (e *Engine) leftProcessing(r *Request, kept bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.addRunningLocked(r.principal, -1)
	if !kept {
		return
	}
	e.retainLocked(r)
}

// retainLocked counts r, ended, among the requests whose results are kept
// (MaxRetained). Called with e.mu held.
func (e *Engine) retainLocked(r *Request) {
	r.inRetainQ = true
	e.all.retain(r)
	if r.use != nil {
		r.use.retain(r)
	}
}

// TombstoneKey records that the call keyed token (StartOptions.Token), with id
// and principal, ended before it became a request of the engine: cancelled with
// the connection it ran on. Until the tombstone goes, a lookup of the key
// answers ErrCancelled, so that the call sent again is not run a second time.
// A key the engine knows is left as it is.
func (e *Engine) TombstoneKey(token string, id []byte, principal string) {
	h := HashToken(token)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed || e.knownLocked(h) {
		return
	}
	e.tombs[h] = tombstone{id: bytes.Clone(id), principal: principal, state: StateCancelled, until: time.Now().Add(e.opts.TombstoneTTL)}
	e.tombQ = append(e.tombQ, h)
}

// knownLocked says whether a request with hash h is live or has a tombstone.
// Called with e.mu held.
func (e *Engine) knownLocked(h TokenHash) bool {
	_, live := e.live[h]
	_, tomb := e.tombs[h]
	return live || tomb
}

// over says whether the byte budget of principal's requests, or of all, is
// used up.
func (e *Engine) over(principal string) bool {
	if e.opts.MaxBytes > 0 && e.all.bytes.Load() >= e.opts.MaxBytes {
		return true
	}
	if principal == "" || e.opts.MaxBytesPerPrincipal <= 0 {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.overLocked(principal)
}

// overFor is over for r's principal, without the engine's lock (r's usage is
// at hand): the check every Append makes. Called with r.mu held.
func (e *Engine) overFor(r *Request) bool {
	if e.opts.MaxBytes > 0 && e.all.bytes.Load() >= e.opts.MaxBytes {
		return true
	}
	return r.use != nil && e.opts.MaxBytesPerPrincipal > 0 && r.use.bytes.Load() >= e.opts.MaxBytesPerPrincipal
}

// overLocked is over, called with e.mu held.
func (e *Engine) overLocked(principal string) bool {
	if e.opts.MaxBytes > 0 && e.all.bytes.Load() >= e.opts.MaxBytes {
		return true
	}
	u := e.byPrincipal[principal]
	return u != nil && e.opts.MaxBytesPerPrincipal > 0 && u.bytes.Load() >= e.opts.MaxBytesPerPrincipal
}

// useLocked returns the usage a new live request of principal counts its bytes
// in (nil for ""), counting the request in it. Called with e.mu held.
func (e *Engine) useLocked(principal string) *usage {
	if principal == "" {
		return nil
	}
	u := e.byPrincipal[principal]
	if u == nil {
		u = &usage{}
		e.byPrincipal[principal] = u
	}
	u.refs++
	return u
}

// releaseUseLocked uncounts r from its principal's usage, which goes with its
// last request. Called with e.mu held.
func (e *Engine) releaseUseLocked(r *Request) {
	if u := r.use; u != nil {
		if u.refs--; u.refs <= 0 {
			delete(e.byPrincipal, r.principal)
		}
		r.use = nil
	}
}

// addBytes counts d more bytes of queued messages of r.
func (e *Engine) addBytes(r *Request, d int) {
	r.held.Add(int64(d))
	e.all.bytes.Add(int64(d))
	if r.use != nil {
		r.use.bytes.Add(int64(d))
	}
}

// trim releases the oldest kept results of principal (every principal's when
// everyone) while its byte budget is passed, then the oldest of all while more
// than MaxRetained are kept or the byte budget of all requests is passed. Each
// costs what it releases, not a scan of what is kept. It takes no request's
// lock while holding e.mu.
func (e *Engine) trim(principal string, everyone bool) {
	e.mu.Lock()
	var victims []*Request
	over := e.all.bytes.Load() - e.opts.MaxBytes // > 0: bytes to release
	if e.opts.MaxBytes <= 0 {
		over = 0
	}
	if per := e.opts.MaxBytesPerPrincipal; per > 0 {
		budget := func(u *usage) {
			d := u.bytes.Load() - per
			u.release(func() bool { return d > 0 }, func(v *Request) {
				victims = append(victims, v)
				d -= v.held.Load()
				over -= v.held.Load()
			})
		}
		if everyone {
			for _, u := range e.byPrincipal {
				budget(u)
			}
		} else if u := e.byPrincipal[principal]; principal != "" && u != nil {
			budget(u)
		}
	}
	e.all.release(func() bool { return e.all.retained-len(victims) > e.opts.MaxRetained || over > 0 }, func(v *Request) {
		victims = append(victims, v)
		over -= v.held.Load()
	})
	e.mu.Unlock()
	for _, v := range victims {
		v.mu.Lock()
		if !v.gone.Load() {
			v.evicted = true
			e.evicted.Add(1)
		}
		v.freeLocked(StateExpired)
		v.mu.Unlock()
	}
}

// forget removes an ended request and leaves its tombstone. Called with r.mu held.
func (e *Engine) forget(r *Request, final State) {
	now := time.Now()
	e.mu.Lock()
	if e.live[r.hash] == r {
		delete(e.live, r.hash)
	}
	if r.inRetainQ {
		e.all.retained--
		if r.use != nil {
			r.use.retained--
		}
	}
	e.releaseUseLocked(r)
	// Age out old tombstones first (inserted in the order they ended: a task's,
	// which may last to the end of its ttl, holds back those behind it, which
	// still answer lookups only until their own time), then bound the count.
	var aged []TokenHash // those stored: their records go too
	for len(e.tombQ) > 0 {
		h := e.tombQ[0]
		t, ok := e.tombs[h]
		if ok && now.Before(t.until) && len(e.tombQ) < e.opts.MaxTombstones {
			break
		}
		if ok {
			delete(e.tombs, h)
			if t.stored {
				aged = append(aged, h)
			}
		}
		e.tombQ[0] = TokenHash{}
		e.tombQ = e.tombQ[1:]
	}
	// A cluster's other instances read the tombstone from the store; a task's
	// outlives a restart there (its client polls it by id for its ttl).
	stored := e.store != nil && (e.cluster != nil || r.task)
	until := now.Add(e.opts.TombstoneTTL)
	if end := r.created.Add(r.ttl); r.task && r.ttl > 0 && end.After(until) {
		until = end
	}
	e.tombs[r.hash] = tombstone{id: r.id, principal: r.principal, state: final, evicted: r.evicted, stored: stored, until: until}
	if final == StateExpired {
		e.expired.Add(1)
	}
	e.tombQ = append(e.tombQ, r.hash)
	e.mu.Unlock()
	if e.store == nil {
		return // and no Cluster
	}
	if err := e.store.Delete(e.ctx, r.hash); err != nil {
		e.log.Warn().Err(err).Str("request", string(r.id)).Msg("deleting an ended request from the store")
	}
	// Those that aged out meanwhile go behind this request's lock, not under
	// it: after a quiet TombstoneTTL they may be thousands, one store round
	// trip each.
	if len(aged) > 0 {
		e.goBackground(func() {
			for _, h := range aged {
				if err := e.store.Delete(e.ctx, h); err != nil {
					e.log.Warn().Err(err).Msg("deleting an old tombstone from the store")
				}
			}
		})
	}
	if !stored {
		return
	}
	// The tombstone is stored: a record with no messages whose state is
	// cancelled or expired, which the other instances of a cluster read (see
	// remote.go) and a later process recovers for a task. It goes when this
	// engine's tombstone does.
	ts := StateExpired
	if final == StateCancelled {
		ts = StateCancelled
	}
	tomb := r.recordLocked(ts)
	tomb.AckMode, tomb.Epoch = false, 0 // nothing to say for a tombstone
	// Ended with its result (completed, failed) yet freed: only the client's ack
	// of the response does that.
	tomb.Acknowledged = final == StateCompleted || final == StateFailed
	if err := e.store.Put(e.ctx, tomb); err != nil {
		e.log.Warn().Err(err).Str("request", string(r.id)).Msg("storing the tombstone of an ended request")
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
