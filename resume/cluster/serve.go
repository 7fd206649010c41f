package cluster

import (
	"context"
	"errors"
	"sync"

	"github.com/mcp-resume/mcp-resume/resume"
)

// This file is the engine's side of the cluster (resume.Cluster): resolving a
// request another instance owns (a proxy, proxy.go) or lost (a claim), the
// owner's answers to the proxies' calls, the claims of a departed instance's
// requests, and the forwarding of a client's answers.

// engineSide is the state Node keeps for its engine once bound.
type engineSide struct {
	e      resume.Host             // the engine, as Bind hands it
	answer func(data []byte) error // OnAnswer's

	mu sync.Mutex // guards sinkWatch and sweepAt
	// sinkWatch holds, for each remote sink a request is attached to, the
	// watch of the sink's instance. Entries whose request let the sink go
	// without a PeerDetach (it ended, or another sink took over) leave in
	// amortized sweeps (sweepAt: the size at which the next one runs).
	sinkWatch map[peerSink]*sinkWatch
	sweepAt   int
}

// sinkWatch is a request attached to a remote sink, and the stop of the watch
// of the sink's instance.
type sinkWatch struct {
	r    *resume.Request
	stop func()
}

// minSinkSweep is the smallest size of sinkWatch at which it is swept.
const minSinkSweep = 64

var _ resume.Cluster = (*Node)(nil)

// Bind makes n serve the engine e (resume.Cluster): it answers the calls of
// other instances' proxies, claims the requests of instances that depart, and
// claims now, within ctx, those among others (records the engine found in the
// store) whose owner is gone. Call it once: resume.New does.
func (n *Node) Bind(ctx context.Context, e resume.Host, others []resume.Record) {
	n.side.e = e
	n.side.sinkWatch = make(map[peerSink]*sinkWatch)
	n.side.sweepAt = minSinkSweep
	n.Handle(n.servePeer)
	n.OnDeparted(n.sweep)
	var lost []resume.Record
	alive := map[string]bool{}
	for _, rec := range others {
		a, ok := alive[rec.Owner]
		if !ok {
			a = n.Alive(ctx, rec.Owner)
			alive[rec.Owner] = a
		}
		if !a && !rec.Tombstone() {
			lost = append(lost, rec)
		}
	}
	n.claimAll(ctx, lost) // what is to run again, New's caller takes from Restartable
}

// Leave stops the watches of remote sinks (resume.Cluster; the engine's Close
// calls it). Leaving the cluster itself is Close's.
func (n *Node) Leave() {
	n.side.mu.Lock()
	watches := n.side.sinkWatch
	n.side.sinkWatch = map[peerSink]*sinkWatch{}
	n.side.mu.Unlock()
	for _, w := range watches {
		w.stop()
	}
}

// OnAnswer sets the receiver of clients' responses that other instances forward
// (Forward) to this one, which sent the server-to-client requests they answer.
// Its error goes back to the forwarding instance. Set it before Bind.
func (n *Node) OnAnswer(fn func(data []byte) error) { n.side.answer = fn }

// Forward sends a client's response to a server-to-client request to the
// instance that sent the request, whose OnAnswer takes it.
func (n *Node) Forward(ctx context.Context, instance string, data []byte) error {
	rep, err := n.Call(ctx, instance, PeerCall{Op: PeerAnswer, Data: data})
	if err != nil {
		return err
	}
	return rep.Error()
}

// Resolve returns what serves rec here (resume.Cluster): the request itself when
// this engine owns it, a proxy when a live instance does, or the request claimed
// from a lost owner.
func (n *Node) Resolve(rec resume.Record) (resume.Handle, error) { return n.resolve(rec, false) }

// resolve is Resolve; ownerLost says the caller has just found the owner's lease
// gone. Claims race between instances; the loser follows the winner.
func (n *Node) resolve(rec resume.Record, ownerLost bool) (resume.Handle, error) {
	e := n.side.e
	for i := range 3 {
		switch {
		case rec.Owner == n.Self():
			// Claimed here, maybe by a claim still recovering it.
			r, err := e.Held(rec.Hash)
			if err != nil {
				return nil, err
			}
			return r, nil
		case (i > 0 || !ownerLost) && n.Alive(e.Context(), rec.Owner):
			return n.proxy(rec), nil
		}
		r, rerun, err := e.Claim(e.Context(), rec)
		if rerun {
			e.RestartableReady()
		}
		if err == nil {
			return r, nil
		}
		if !errors.Is(err, resume.ErrClaimed) {
			return nil, err
		}
		got, err := e.Store().Get(e.Context(), rec.Hash)
		if err != nil {
			return nil, resume.ErrUnknown
		}
		rec = *got
	}
	return nil, resume.ErrUnknown
}

// claimAll claims lost instances' requests, all of them, as found in the store,
// within ctx, and reports whether any is to run again.
func (n *Node) claimAll(ctx context.Context, recs []resume.Record) (rerun bool) {
	e := n.side.e
	for _, rec := range recs {
		_, again, _ := e.Claim(ctx, rec)
		rerun = rerun || again
	}
	if len(recs) > 0 {
		e.Trim()
	}
	return rerun
}

// sweep claims the requests of an instance whose lease lapsed (OnDeparted).
// Every instance sweeps; Store.Claim lets one win each request.
func (n *Node) sweep(instance string) {
	e := n.side.e
	if !e.Enter() {
		return
	}
	defer e.Exit()
	if n.Alive(e.Context(), instance) {
		// Back under the same name already (a restart): the new process recovers
		// its requests itself. (A sweep that started before it came back can still
		// claim some: those end owner_lost instead of server_restarted.)
		return
	}
	var lost []resume.Record
	for rec := range e.Records("claiming those listed of lost instance " + instance) {
		if rec.Owner == instance && !rec.Tombstone() {
			lost = append(lost, rec)
		}
	}
	e.Logger().Info().Str("instance", instance).Int("requests", len(lost)).Msg("an instance was lost; claiming its requests")
	if n.claimAll(e.Context(), lost) {
		e.RestartableReady()
	}
}

// The owner's side.

// peerSink is a sink on another instance: an inbox a proxy opened there.
type peerSink struct {
	n     *Node
	inbox string
}

func (s peerSink) Write(ctx context.Context, m resume.Message) error {
	return s.n.Deliver(ctx, s.inbox, m)
}

// servePeer answers another instance's call (Handle).
func (n *Node) servePeer(_ context.Context, from string, c PeerCall) PeerReply {
	e := n.side.e
	if !e.Enter() {
		return PeerReply{Err: PeerError(resume.ErrClosed)}
	}
	defer e.Exit()
	switch c.Op {
	case PeerAnswer:
		if n.side.answer == nil {
			return PeerReply{Err: PeerError(errRemote)}
		}
		return PeerReply{Err: PeerError(n.side.answer(c.Data))}
	case PeerDetach: // the watch goes even when the request has gone
		n.unwatchSink(peerSink{n, c.Inbox})
	}
	r, err := e.Held(c.Hash)
	if err != nil {
		return PeerReply{Err: PeerError(err)}
	}
	switch c.Op {
	case PeerTouch:
		if err := r.Touch(c.Ack); err != nil {
			return PeerReply{Err: PeerError(err)}
		}
		return PeerReply{Status: r.Status(), Detached: c.Inbox != "" && !r.Attached(peerSink{n, c.Inbox})}
	case PeerAttach, PeerReattach, PeerAttachAcked, PeerAttachAll, PeerAttachFollow:
		s := peerSink{n, c.Inbox}
		ack, mode := c.Ack, resume.AttachModePlain
		switch c.Op {
		case PeerReattach:
			ack = 0 // written, not acknowledged
		case PeerAttachAcked:
			mode = resume.AttachModeAcked
		case PeerAttachAll:
			mode = resume.AttachModeAll
		case PeerAttachFollow:
			mode = resume.AttachModeFollow
		}
		deliver, err := e.AttachWritten(r, s, ack, c.Ack, mode)
		if err != nil {
			return PeerReply{Err: PeerError(err)}
		}
		n.watchSink(r, s)
		// The replay runs after the answer: a long one must not outlast the call.
		if e.Enter() {
			go func() {
				defer e.Exit()
				deliver()
			}()
		}
	case PeerDetach:
		r.Detach(peerSink{n, c.Inbox})
	case PeerCancel:
		r.Cancel()
	default:
		return PeerReply{Err: PeerError(errRemote)}
	}
	return PeerReply{}
}

// watchSink detaches r from s when the instance of s's inbox is lost.
func (n *Node) watchSink(r *resume.Request, s peerSink) {
	e := n.side.e
	stop := n.Watch(n.InboxOwner(s.inbox), func() {
		if e.Enter() {
			defer e.Exit()
			n.unwatchSink(s)
			r.Detach(s)
		}
	})
	n.side.mu.Lock()
	old := n.side.sinkWatch[s]
	n.side.sinkWatch[s] = &sinkWatch{r: r, stop: stop}
	var sweep []peerSink
	var ws []*sinkWatch
	if len(n.side.sinkWatch) >= n.side.sweepAt {
		for k, w := range n.side.sinkWatch {
			sweep, ws = append(sweep, k), append(ws, w)
		}
		n.side.sweepAt = max(minSinkSweep, 2*len(n.side.sinkWatch))
	}
	n.side.mu.Unlock()
	if old != nil {
		old.stop()
	}
	// The requests are asked without the lock (a request's lock is never taken
	// under it); an entry replaced meanwhile stays.
	var stops []func()
	for i, k := range sweep {
		if w := ws[i]; w.r.Gone() || !w.r.Attached(k) {
			n.side.mu.Lock()
			if n.side.sinkWatch[k] == w {
				delete(n.side.sinkWatch, k)
				stops = append(stops, w.stop)
			}
			n.side.mu.Unlock()
		}
	}
	for _, stop := range stops {
		stop()
	}
}

func (n *Node) unwatchSink(s peerSink) {
	n.side.mu.Lock()
	w := n.side.sinkWatch[s]
	delete(n.side.sinkWatch, s)
	n.side.mu.Unlock()
	if w != nil {
		w.stop()
	}
}
