package resume

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-resume/mcp-resume/internal/backoff"
)

// This file is the seam between the engine and its Cluster: the Cluster the
// engine asks about other instances' requests, the Host through which the
// Cluster works on the engine, and the engine's side of both (the lookup of a
// request in the shared Store, the claim of a lost instance's request).

// Cluster makes the engine one instance of several that share its Store
// (Options.Cluster; package cluster implements it over NATS). Everything about
// the other instances is the Cluster's: the engine starts, runs and recovers its
// own requests, and asks the Cluster for the others'.
//
//   - The engine that starts a request owns it (Record.Owner is Self): only the
//     owner runs its handler, writes its messages and state, and keeps it in
//     memory.
//   - A lookup of a request the engine does not hold reads its record from the
//     Store; found, with the right id and principal, the Cluster resolves it:
//     a proxy Handle when a live instance owns it, or the request itself once
//     claimed here from a lost owner (Host.Claim).
//   - When an owner is lost, its requests are claimed and recovered by the
//     claimer as after a restart, except that one that was processing ends with
//     Options.Ended's response for ErrOwnerLost, or runs again if restartable.
//
// The Cluster works on its engine through the Host that Bind hands it, not
// through the Engine's exported methods. New calls Self and then Bind before
// it returns, Close calls Leave; Resolve is called by concurrent lookups in
// between, so a Cluster is safe for concurrent use.
type Cluster interface {
	// Self names this instance: non-empty, and unique among the live instances.
	Self() string
	// Bind hands the Cluster its engine, as a Host, with the records of other
	// owners that the engine found in the Store. New calls it once, after
	// recovering the engine's own requests and before returning, with New's
	// context, which bounds the work Bind does before it returns (the claims
	// of requests of instances that are gone); requests claimed from lost
	// instances within Bind go to Restartable for New's caller to run again.
	Bind(ctx context.Context, h Host, others []Record)
	// Resolve returns what serves rec, a request owned by another instance (or
	// by this one under a claim in progress), here.
	Resolve(rec Record) (Handle, error)
	// Leave stops the Cluster's work for the engine; Close calls it first.
	// Calls from other instances that come later are refused (Host.Enter).
	Leave()
}

// Host is the engine as its Cluster sees it: what the Cluster needs of the
// engine beyond its exported API, to serve other instances' calls for the
// engine's requests and to claim the requests of lost instances. The engine
// hands its Cluster one in Cluster.Bind; nothing else has one. It is safe for
// concurrent use, as the Engine is.
type Host interface {
	// Store returns the engine's Store, which the instances share.
	Store() Store
	// Context returns the engine's context, ended by Close: for Store calls and
	// calls to other instances made on the engine's behalf.
	Context() context.Context
	// Logger returns the engine's logger.
	Logger() *zerolog.Logger
	// Enter counts the calling goroutine (a call from another instance, a lease
	// watch) among those Close waits for, unless the engine is closing: then
	// it returns false and the caller does nothing. A true return is paired
	// with Exit.
	Enter() bool
	// Exit ends what Enter began.
	Exit()
	// Held returns the request with hash h that the engine holds, waiting for
	// a claim in progress that may be recovering it; ErrUnknown, or its
	// tombstone's error, when it holds none. A caller holding h has read it
	// from the Store, so the token was checked there.
	Held(h TokenHash) (*Request, error)
	// Records lists the Store's records, skipping those it cannot read; then
	// says, for the log, what happens when the listing fails part way.
	Records(then string) iter.Seq[Record]
	// Claim takes rec over from its lost owner (Store.Claim) and recovers it
	// here as after a restart, with Options.Ended's response for ErrOwnerLost
	// for a request that was processing, or a new run when restartable (the
	// caller then calls RestartableReady, once for all it claimed). It returns
	// the live request and whether it is to run again, or ErrClaimed when
	// another instance claimed it first, or ErrUnknown. ctx bounds the claim's
	// Store calls.
	Claim(ctx context.Context, rec Record) (*Request, bool, error)
	// Trim applies the engine's bounds on kept results after claims added
	// some.
	Trim()
	// RestartableReady tells Options.OnRestartable that Restartable has
	// requests to run again (claimed from a lost instance after New returned).
	RestartableReady()
	// AttachWritten is r.Attach, AttachAcked or AttachAll (mode) for a sink on
	// another instance, which was written every message up to written (>= ack)
	// but acknowledged only ack: without ack mode the messages written count
	// as delivered. What is queued after written is written by deliver, which
	// the caller runs (on a goroutine of its own when the answer to a call
	// must not wait for a replay).
	AttachWritten(r *Request, sink Sink, ack, written uint64, mode AttachMode) (deliver func(), err error)
}

// host is the Host of an engine (see Host for each method).
type host struct{ e *Engine }

var _ Host = host{}

func (h host) Store() Store                         { return h.e.store }
func (h host) Context() context.Context             { return h.e.ctx }
func (h host) Logger() *zerolog.Logger              { return h.e.log }
func (h host) Enter() bool                          { return h.e.enter() }
func (h host) Exit()                                { h.e.bg.Done() }
func (h host) Held(th TokenHash) (*Request, error)  { return h.e.held(th) }
func (h host) Records(then string) iter.Seq[Record] { return h.e.storedRecords(h.e.ctx, then) }
func (h host) Trim()                                { h.e.trim("", true) }

func (h host) Claim(ctx context.Context, rec Record) (*Request, bool, error) {
	return h.e.claim(ctx, rec)
}

func (h host) RestartableReady() {
	if h.e.opts.OnRestartable != nil {
		h.e.goBackground(h.e.opts.OnRestartable)
	}
}

func (h host) AttachWritten(r *Request, sink Sink, ack, written uint64, mode AttachMode) (deliver func(), err error) {
	if err := r.attach(sink, ack, written, mode); err != nil {
		return nil, err
	}
	return func() { r.kick(Message{}) }, nil
}

// held is Host.Held.
func (e *Engine) held(h TokenHash) (*Request, error) {
	if r, err := e.byHash(h); !errors.Is(err, ErrUnknown) {
		return r, err
	}
	e.claimMu.Lock()
	defer e.claimMu.Unlock()
	return e.byHash(h)
}

// byHash finds a request this engine holds.
func (e *Engine) byHash(h TokenHash) (*Request, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if r := e.live.get(h); r != nil {
		return r, nil
	}
	if t, ok := e.tombs[h]; ok {
		return nil, t.err()
	}
	return nil, ErrUnknown
}

// lookupShared finds a request this engine does not hold in the shared Store. A
// Store that gives no answer fails the lookup with its error: the request is not
// known to be absent, and a client told not_found would give it up.
func (e *Engine) lookupShared(h TokenHash, id []byte, principal string) (Handle, error) {
	rec, err := e.getShared(h)
	switch {
	case errors.Is(err, ErrNotFound):
		return nil, ErrUnknown
	case errors.Is(err, ErrUnreadable):
		e.log.Warn().Err(err).Msg("looking a request up in the shared store")
		return nil, ErrUnknown
	case err != nil:
		e.log.Warn().Err(err).Msg("looking a request up in the shared store")
		return nil, fmt.Errorf("looking the request up in the shared store: %w", err)
	}
	if !bytes.Equal(rec.ID, id) || rec.Principal != principal {
		return nil, ErrUnknown
	}
	if rec.Tombstone() { // an ended request's tombstone, kept by its owner (forget)
		return nil, rec.endedErr()
	}
	return e.cluster.Resolve(*rec)
}

// A lookup's read of the shared Store: each try is bounded by sharedTry, and
// the tries by sharedWait (see getShared).
const (
	sharedTry  = time.Second
	sharedWait = 5 * time.Second
)

// getShared reads h's record for a lookup. A Store on a NATS cluster can fail to
// answer for a moment while the record is there: a server of the cluster goes,
// and a read in flight through it with it, or the replicas stop serving reads
// while the bucket's leadership moves. So each try is bounded by sharedTry, and a
// failure other than ErrNotFound or ErrUnreadable is tried again until sharedWait
// has passed.
func (e *Engine) getShared(h TokenHash) (*Record, error) {
	l := backoff.Start(10*time.Millisecond, 250*time.Millisecond, sharedWait, sharedTry)
	for {
		ctx, cancel := l.Try(e.ctx)
		rec, err := e.store.Get(ctx, h)
		cancel()
		if err == nil || errors.Is(err, ErrNotFound) || errors.Is(err, ErrUnreadable) || !l.Pause(e.ctx) {
			return rec, err
		}
	}
}

// Tombstone reports whether rec is an ended request's tombstone, not a request:
// its owner keeps one in a shared Store while it remembers the request ended.
func (rec *Record) Tombstone() bool {
	return rec.State == StateCancelled || rec.State == StateExpired
}

// endedErr is what a lookup of the tombstone rec answers, as the owner's own
// tombstone would (State.endedErr): a stored tombstone says cancelled or expired
// only, and marks an acknowledged request with Acknowledged.
func (rec *Record) endedErr() error {
	if rec.Acknowledged {
		return ErrAcknowledged
	}
	return rec.State.endedErr()
}

// claim is Host.Claim.
func (e *Engine) claim(ctx context.Context, rec Record) (*Request, bool, error) {
	e.claimMu.Lock()
	defer e.claimMu.Unlock()
	got, err := e.store.(Claimer).Claim(ctx, rec.Hash, rec.Owner, e.self)
	switch {
	case errors.Is(err, ErrClaimed):
		return nil, false, err
	case err != nil:
		if !errors.Is(err, ErrNotFound) {
			e.log.Warn().Err(err).Str("request", string(rec.ID)).Msg("claiming a request of a lost instance")
		}
		return nil, false, ErrUnknown
	}
	how := e.recoverOne(ctx, *got, ErrOwnerLost)
	e.log.Info().Str("request", string(rec.ID)).Str("owner", rec.Owner).Bool("rerun", how == recoveredRerun).
		Msg("claimed a request of a lost instance")
	e.mu.Lock()
	r := e.live.get(rec.Hash)
	e.mu.Unlock()
	if r == nil {
		return nil, false, ErrUnknown
	}
	return r, how == recoveredRerun, nil
}
