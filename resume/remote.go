package resume

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// This file is the cluster side of the engine (see peers.go): lookups in the
// shared Store, proxies of requests other instances own, the owner's answers to
// their calls, and claims of a lost instance's requests.

// remote is the state of a proxy Request: one client's handle, on this
// instance, on a request another instance owns.
type remote struct {
	mu     sync.Mutex // guards the fields below
	owner  string
	status Status // from the owner's last answer to a touch
	// The attachment through the owner, when the proxy is attached: sink gets what
	// the owner delivers to inbox; cursor is the last seq written to sink.
	sink       Sink
	inbox      string
	closeInbox func()
	cursor     uint64
	unwatch    func() // the watch of the owner's lease, while attached
	// next, once the owner was lost, is what stands for the request now: the
	// request claimed here, or a proxy of the instance that claimed it.
	next *Request
}

// lookupShared finds a request this engine does not hold in the shared Store. A
// Store that gives no answer fails the lookup with its error: the request is not
// known to be absent, and a client told not_found would give it up.
func (e *Engine) lookupShared(h TokenHash, id []byte, principal string) (*Request, error) {
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
	if rec.tombstone() { // an ended request's tombstone, kept by its owner (forget)
		return nil, rec.endedErr()
	}
	return e.resolve(*rec, false)
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
	end := time.Now().Add(sharedWait)
	for pause := 10 * time.Millisecond; ; pause = min(2*pause, 250*time.Millisecond) {
		ctx, cancel := context.WithTimeout(e.ctx, sharedTry)
		rec, err := e.store.Get(ctx, h)
		cancel()
		if err == nil || errors.Is(err, ErrNotFound) || errors.Is(err, ErrUnreadable) || time.Until(end) < pause {
			return rec, err
		}
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-e.ctx.Done():
			t.Stop()
			return nil, err
		}
	}
}

// tombstone reports whether rec is an ended request's tombstone, not a request.
func (rec *Record) tombstone() bool { return rec.State == StateCancelled || rec.State == StateExpired }

// endedErr is what a lookup of the tombstone rec answers, as the owner's own
// tombstone would (State.endedErr): a stored tombstone says cancelled or expired
// only, and marks an acknowledged request with Acknowledged.
func (rec *Record) endedErr() error {
	if rec.Acknowledged {
		return ErrAcknowledged
	}
	return rec.State.endedErr()
}

// resolve returns what serves rec here: the request itself when this engine owns
// it, a proxy when a live instance does, or the request claimed from a lost
// owner. Claims race between instances; the loser follows the winner.
func (e *Engine) resolve(rec Record, ownerLost bool) (*Request, error) {
	for i := range 3 {
		switch {
		case rec.Owner == e.self:
			// Claimed here, maybe by a claim still recovering it: wait for it.
			e.claimMu.Lock()
			e.mu.Lock()
			r := e.live[rec.Hash]
			e.mu.Unlock()
			e.claimMu.Unlock()
			if r == nil { // ended meanwhile
				return nil, ErrUnknown
			}
			return r, nil
		case (i > 0 || !ownerLost) && e.peers.Alive(e.ctx, rec.Owner):
			return e.proxy(rec), nil
		}
		r, rerun, err := e.claim(rec)
		if rerun {
			e.restartableReady()
		}
		if !errors.Is(err, ErrClaimed) {
			return r, err
		}
		got, err := e.store.Get(e.ctx, rec.Hash)
		if err != nil {
			return nil, ErrUnknown
		}
		rec = *got
	}
	return nil, ErrUnknown
}

// proxy returns a Request that stands, on this instance, for rec, owned by a live
// instance.
func (e *Engine) proxy(rec Record) *Request {
	return &Request{e: e, id: rec.ID, hash: rec.Hash, principal: rec.Principal, created: rec.Created,
		ctx: proxyCtx, cancel: func(error) {},
		remote: &remote{owner: rec.Owner, status: Status{State: rec.State}}}
}

// proxyCtx is the context of every proxy Request, ended with errProxy.
var proxyCtx = func() context.Context {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errProxy)
	return ctx
}()

// errUnreachable: the owner of a proxied request holds its lease but did not
// answer a call.
var errUnreachable = errors.New("resume: the owning instance did not answer")

// errProxy ends the context of every proxy Request: no handler runs for it here.
var errProxy = errors.New("resume: the request runs on another instance")

// claim takes rec over from its lost owner (Store.Claim) and recovers it here as
// after a restart, with Options.OwnerLost's response for a request that was
// processing (or a new run when restartable, which claimAll and resolve hand to
// Options.OnRestartable once for all they claimed). It returns the live request
// and whether it is to run again, or ErrClaimed when another instance claimed it
// first, or ErrUnknown.
func (e *Engine) claim(rec Record) (*Request, bool, error) {
	e.claimMu.Lock()
	defer e.claimMu.Unlock()
	got, err := e.store.Claim(e.ctx, rec.Hash, rec.Owner, e.self)
	switch {
	case errors.Is(err, ErrClaimed):
		return nil, false, err
	case err != nil:
		if !errors.Is(err, ErrNotFound) {
			e.log.Warn().Err(err).Str("request", string(rec.ID)).Msg("claiming a request of a lost instance")
		}
		return nil, false, ErrUnknown
	}
	how := e.recoverOne(*got, e.opts.OwnerLost)
	e.log.Info().Str("request", string(rec.ID)).Str("owner", rec.Owner).Bool("rerun", how == recoveredRerun).
		Msg("claimed a request of a lost instance")
	e.mu.Lock()
	r := e.live[rec.Hash]
	e.mu.Unlock()
	if r == nil {
		return nil, false, ErrUnknown
	}
	return r, how == recoveredRerun, nil
}

// claimAll claims lost instances' requests, all of them, as found in the store,
// and reports whether any is to run again.
func (e *Engine) claimAll(recs []Record) (rerun bool) {
	for _, rec := range recs {
		_, again, _ := e.claim(rec)
		rerun = rerun || again
	}
	if len(recs) > 0 {
		e.trim()
	}
	return rerun
}

// restartableReady tells Options.OnRestartable that Restartable has requests to
// run again. Not called within New, whose caller takes them itself.
func (e *Engine) restartableReady() {
	if e.opts.OnRestartable != nil {
		e.goBackground(e.opts.OnRestartable)
	}
}

// sweep claims the requests of an instance whose lease lapsed (Peers.OnDeparted).
// Every instance sweeps; Store.Claim lets one win each request.
func (e *Engine) sweep(instance string) {
	if !e.enter() {
		return
	}
	defer e.bg.Done()
	if e.peers.Alive(e.ctx, instance) {
		// Back under the same name already (a restart): the new process recovers
		// its requests itself. (A sweep that started before it came back can still
		// claim some: those end owner_lost instead of server_restarted.)
		return
	}
	var lost []Record
	for rec := range e.storedRecords("claiming those listed of lost instance " + instance) {
		if rec.Owner == instance && !rec.tombstone() {
			lost = append(lost, rec)
		}
	}
	e.log.Info().Str("instance", instance).Int("requests", len(lost)).Msg("an instance was lost; claiming its requests")
	if e.claimAll(lost) {
		e.restartableReady()
	}
}

// The proxy's side of each Request method (r.remote != nil).

// current returns what the proxy stands for now: the owner's request (nil, to
// reach through calls) or, once the owner was lost, its successor.
func (p *remote) current() (*Request, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.next, p.owner
}

// call sends c to the owner. When no answer comes because the owner is gone, the
// proxy moves to the request's successor (failover) and reports it in next.
func (r *Request) call(c PeerCall) (rep PeerReply, next *Request, err error) {
	p := r.remote
	nx, owner := p.current()
	if nx != nil {
		return PeerReply{}, nx, nil
	}
	c.Hash = r.hash
	rep, err = r.e.peers.Call(r.e.ctx, owner, c)
	if err == nil {
		return rep, nil, rep.Error()
	}
	if r.e.peers.Alive(r.e.ctx, owner) {
		return PeerReply{}, nil, fmt.Errorf("%w: %w", errUnreachable, err)
	}
	if nx := r.failover(true); nx != nil {
		return PeerReply{}, nx, nil
	}
	return PeerReply{}, nil, ErrUnknown
}

// failover replaces a lost owner by the request's successor: claimed here, or
// proxied to the instance that claimed it. An attached proxy re-attaches its sink
// there after what it has written, so the client gets the rest without resuming.
//
// ownerLost says the caller has just found the owner's lease gone; otherwise (a
// watch that fired) resolve checks it again, in case an instance of that name is
// back already.
func (r *Request) failover(ownerLost bool) *Request {
	p := r.remote
	p.mu.Lock()
	if p.next != nil {
		nx := p.next
		p.mu.Unlock()
		return nx
	}
	owner := p.owner
	p.mu.Unlock()

	rec := Record{Hash: r.hash, ID: r.id, Principal: r.principal, Created: r.created, Owner: owner}
	nx, err := r.e.resolve(rec, ownerLost)
	if err != nil {
		r.e.log.Info().Err(err).Str("request", string(r.id)).Msg("the owner of a proxied request was lost, and the request with it")
		r.gone.Store(true)
		r.detachRemote(nil)
		return nil
	}
	p.mu.Lock()
	if p.next != nil { // another failover won
		nx = p.next
		p.mu.Unlock()
		return nx
	}
	p.next = nx
	sink, cursor := p.sink, p.cursor
	p.mu.Unlock()
	r.detachRemote(nil)
	if sink != nil {
		// The cursor says what was written to the client, not what it
		// acknowledged: the successor keeps the request's ack mode.
		if err := nx.reattach(sink, cursor); err != nil {
			r.e.log.Info().Err(err).Str("request", string(r.id)).Msg("re-attaching a proxied request after its owner was lost")
		}
	}
	return nx
}

// detachRemote closes the proxy's inbox and its watch of the owner, and returns
// the inbox's name; when sink is not nil, only if it is the proxy's sink.
func (r *Request) detachRemote(sink Sink) (inbox string, ok bool) {
	p := r.remote
	p.mu.Lock()
	if sink != nil && p.sink != sink {
		p.mu.Unlock()
		return "", false
	}
	inbox, closeInbox, unwatch := p.inbox, p.closeInbox, p.unwatch
	p.sink, p.inbox, p.closeInbox, p.unwatch = nil, "", nil, nil
	p.mu.Unlock()
	if closeInbox != nil {
		closeInbox()
	}
	if unwatch != nil {
		unwatch()
	}
	return inbox, inbox != ""
}

func (r *Request) remoteTouch(ack uint64) error {
	rep, nx, err := r.call(PeerCall{Op: PeerTouch, Ack: ack})
	if nx != nil {
		return nx.Touch(ack)
	}
	if errors.Is(err, errUnreachable) {
		// The owner holds its lease but did not answer (it may have just died):
		// the request counts as running, as last known, until the lease says.
		r.e.log.Debug().Err(err).Str("request", string(r.id)).Msg("the owner of a proxied request did not answer a touch")
		return nil
	}
	if err != nil {
		return err
	}
	p := r.remote
	p.mu.Lock()
	p.status = rep.Status
	p.mu.Unlock()
	return nil
}

func (r *Request) remoteStatus() Status {
	nx, _ := r.remote.current()
	if nx != nil {
		return nx.Status()
	}
	p := r.remote
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.status
}

// remoteAttach is Attach (written == ack) or reattach (ack 0) of a proxy.
func (r *Request) remoteAttach(sink Sink, ack, written uint64) error {
	if nx, _ := r.remote.current(); nx != nil {
		if written > ack {
			return nx.reattach(sink, written)
		}
		return nx.Attach(sink, ack)
	}
	p := r.remote
	inbox, closeInbox := r.e.peers.Listen(func(m Message) error { return r.remoteDeliver(sink, m) })
	p.mu.Lock()
	// Messages may come before the owner's answer: the cursor counts from what
	// the client has.
	oldClose, oldWatch := p.closeInbox, p.unwatch
	p.sink, p.inbox, p.closeInbox, p.cursor, p.unwatch = sink, inbox, closeInbox, max(ack, written), nil
	p.mu.Unlock()
	if oldClose != nil {
		oldClose()
	}
	if oldWatch != nil {
		oldWatch()
	}
	c := PeerCall{Op: PeerAttach, Ack: ack, Inbox: inbox}
	if written > ack {
		c.Op, c.Ack = PeerReattach, written
	}
	_, nx, err := r.call(c)
	if c.Op == PeerReattach && errors.Is(err, errRemote) {
		// An owner older than PeerReattach: attach with what was written as an
		// ack, which also switches the request to ack mode (the older way).
		c.Op = PeerAttach
		_, nx, err = r.call(c)
	}
	if nx != nil {
		// The failover attached sink to the successor after what it was
		// written, which is not an acknowledgement: the client's own ack is
		// applied there now.
		if ack > 0 {
			if err := nx.Touch(ack); err != nil {
				r.e.log.Debug().Err(err).Str("request", string(r.id)).Msg("acknowledging to the successor of a lost owner")
			}
		}
		return nil
	}
	if err != nil {
		r.detachRemote(sink)
		return err
	}
	_, owner := p.current()
	unwatch := r.e.peers.Watch(owner, func() {
		if r.e.enter() {
			defer r.e.bg.Done()
			r.failover(false)
		}
	})
	p.mu.Lock()
	if p.sink == sink && p.unwatch == nil {
		p.unwatch, unwatch = unwatch, nil
	}
	p.mu.Unlock()
	if unwatch != nil { // detached meanwhile
		unwatch()
	}
	return nil
}

// remoteDeliver writes a message the owner delivered to the proxy's inbox.
func (r *Request) remoteDeliver(sink Sink, m Message) error {
	if err := sink.Write(r.e.ctx, m); err != nil {
		return err
	}
	p := r.remote
	p.mu.Lock()
	if p.sink == sink && m.Seq > p.cursor {
		p.cursor = m.Seq
	}
	p.mu.Unlock()
	if m.Kind == KindResponse {
		r.gone.Store(true) // the client has the result; the owner keeps it for a while
	}
	return nil
}

func (r *Request) remoteDetach(sink Sink) {
	if nx, _ := r.remote.current(); nx != nil {
		nx.Detach(sink)
		return
	}
	inbox, ok := r.detachRemote(sink)
	if !ok {
		return
	}
	if _, nx, err := r.call(PeerCall{Op: PeerDetach, Inbox: inbox}); nx != nil {
		nx.Detach(sink)
	} else if err != nil {
		r.e.log.Debug().Err(err).Str("request", string(r.id)).Msg("detaching a proxied request")
	}
}

func (r *Request) remoteCancel() {
	_, nx, err := r.call(PeerCall{Op: PeerCancel})
	if nx != nil {
		nx.Cancel()
		return
	}
	if err != nil {
		r.e.log.Debug().Err(err).Str("request", string(r.id)).Msg("cancelling a proxied request")
	}
	r.gone.Store(true)
	r.detachRemote(nil)
}

// The owner's side.

// peerSink is a sink on another instance: an inbox a proxy opened there.
type peerSink struct {
	peers Peers
	inbox string
}

func (s peerSink) Write(ctx context.Context, m Message) error {
	return s.peers.Deliver(ctx, s.inbox, m)
}

// servePeer answers another instance's call (Peers.Handle).
func (e *Engine) servePeer(_ context.Context, from string, c PeerCall) PeerReply {
	if !e.enter() {
		return PeerReply{Err: PeerError(ErrClosed)}
	}
	defer e.bg.Done()
	switch c.Op {
	case PeerAnswer:
		if e.opts.Answer == nil {
			return PeerReply{Err: PeerError(errRemote)}
		}
		return PeerReply{Err: PeerError(e.opts.Answer(c.Data))}
	case PeerDetach: // the watch goes even when the request has gone
		e.unwatchSink(peerSink{e.peers, c.Inbox})
	}
	r, err := e.byHash(c.Hash)
	if err != nil {
		return PeerReply{Err: PeerError(err)}
	}
	switch c.Op {
	case PeerTouch:
		if err := r.Touch(c.Ack); err != nil {
			return PeerReply{Err: PeerError(err)}
		}
		return PeerReply{Status: r.Status()}
	case PeerAttach, PeerReattach:
		s := peerSink{e.peers, c.Inbox}
		ack := c.Ack
		if c.Op == PeerReattach {
			ack = 0 // written, not acknowledged
		}
		if err := r.attach(s, ack, c.Ack, attachPlain); err != nil {
			return PeerReply{Err: PeerError(err)}
		}
		e.watchSink(r, s)
		// The replay runs after the answer: a long one must not outlast the call.
		e.goBackground(func() { r.kick(Message{}) })
	case PeerDetach:
		r.Detach(peerSink{e.peers, c.Inbox})
	case PeerCancel:
		r.Cancel()
	default:
		return PeerReply{Err: PeerError(errRemote)}
	}
	return PeerReply{}
}

// byHash finds a request this engine holds (a caller holding its hash has read
// it from the Store, so the token was checked there).
func (e *Engine) byHash(h TokenHash) (*Request, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if r, ok := e.live[h]; ok {
		return r, nil
	}
	if t, ok := e.tombs[h]; ok {
		return nil, t.err()
	}
	return nil, ErrUnknown
}

// watchSink detaches r from s when the instance of s's inbox is lost.
func (e *Engine) watchSink(r *Request, s peerSink) {
	stop := e.peers.Watch(e.peers.InboxOwner(s.inbox), func() {
		if e.enter() {
			defer e.bg.Done()
			e.unwatchSink(s)
			r.Detach(s)
		}
	})
	e.mu.Lock()
	if old := e.sinkWatch[s]; old != nil {
		defer old()
	}
	e.sinkWatch[s] = stop
	e.mu.Unlock()
}

func (e *Engine) unwatchSink(s peerSink) {
	e.mu.Lock()
	stop := e.sinkWatch[s]
	delete(e.sinkWatch, s)
	e.mu.Unlock()
	if stop != nil {
		stop()
	}
}
