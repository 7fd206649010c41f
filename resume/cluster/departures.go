package cluster

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// lease is what a node knows of another instance's lease: the incarnation that
// holds it (its value) and the newest revision seen. since is the first poll whose
// listing may judge it: an instance added by Watch is not judged by a poll that
// began before Watch read its lease, whose listing may predate it.
type lease struct {
	inc   string
	rev   uint64
	since uint64
}

// watch is one Watch's callback; its entry in Node.watches is the incarnation it
// watches.
type watch struct{ lost func() }

// OnDeparted adds fn to the functions called, each on a goroutine of its own, with
// the name of each instance that departs: its lease lapses or is deleted, or
// passes to a new process of the same name. This instance's own name is not
// reported (its loss is logged as an error).
func (n *Node) OnDeparted(fn func(instance string)) {
	n.mu.Lock()
	n.departed = append(n.departed, fn)
	n.mu.Unlock()
}

// Watch calls lost once, on a goroutine of its own, when the lease that instance
// holds now lapses, is deleted or passes to another process: at the poll that
// finds it so. lost is called at once when instance holds no lease (or it cannot
// be read within CallTimeout: see readLease). stop cancels the watch; it does not
// wait for a lost already running. Close cancels every watch.
func (n *Node) Watch(instance string, lost func()) (stop func()) {
	noop := func() {}
	var e jetstream.KeyValueEntry
	err := errors.New("not an instance name")
	if validName(instance) {
		e, err = n.readLease(n.ctx, instance)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return noop
	}
	if err != nil {
		if !errors.Is(err, jetstream.ErrKeyNotFound) {
			n.log.Warn().Err(err).Str("peer", instance).Msg("reading a watched lease failed; taking it for lost")
		}
		n.goLocked(lost)
		return noop
	}
	inc, rev := string(e.Value()), e.Revision()
	switch k, ok := n.known[instance]; {
	case !ok:
		n.known[instance] = lease{inc: inc, rev: rev, since: n.polls + 1}
	case k.inc != inc && rev < k.rev:
		// The incarnation read has been succeeded already.
		n.goLocked(lost)
		return noop
	}
	w := &watch{lost: lost}
	if n.watches[instance] == nil {
		n.watches[instance] = make(map[*watch]string)
	}
	n.watches[instance][w] = inc
	return func() {
		n.mu.Lock()
		delete(n.watches[instance], w)
		if len(n.watches[instance]) == 0 {
			delete(n.watches, instance)
		}
		n.mu.Unlock()
	}
}

// poll lists the leases every Lease/4 (and once at the start) until Close, and
// reports the departures it finds.
func (n *Node) poll() {
	defer n.loops.Done()
	every := n.opts.Lease / 4
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		n.pollOnce(min(every, n.opts.CallTimeout))
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (n *Node) pollOnce(timeout time.Duration) {
	n.mu.Lock()
	n.polls++
	p := n.polls
	n.mu.Unlock()
	ctx, cancel := context.WithTimeout(n.ctx, timeout)
	leases, err := n.list(ctx)
	cancel()
	if err != nil {
		if n.ctx.Err() == nil {
			n.log.Warn().Err(err).Msg("listing the leases failed; trying again")
		}
		return
	}
	// A listing can miss a key that is being refreshed (its old revision deleted,
	// the new one not yet counted): each key it misses is read again, the one
	// authoritative answer, before its instance is judged departed.
	n.mu.Lock()
	var missing []string
	for name, k := range n.known {
		if _, ok := leases[name]; !ok && k.since <= p {
			missing = append(missing, name)
		}
	}
	n.mu.Unlock()
	unsure := make(map[string]bool)
	for _, name := range missing {
		ctx, cancel := context.WithTimeout(n.ctx, timeout)
		e, err := n.kv.Get(ctx, name)
		cancel()
		switch {
		case err == nil:
			n.log.Debug().Str("peer", name).Msg("the listing missed a lease that is held")
			leases[name] = lease{inc: string(e.Value()), rev: e.Revision()}
		case !errors.Is(err, jetstream.ErrKeyNotFound):
			if n.ctx.Err() == nil {
				n.log.Warn().Err(err).Str("peer", name).Msg("reading a lease failed; trying again")
			}
			unsure[name] = true
		}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return
	}
	for name, k := range n.known {
		if k.since > p || unsure[name] {
			continue
		}
		switch cur, ok := leases[name]; {
		case !ok:
			delete(n.known, name)
			n.departLocked(name, "")
		case cur.inc != k.inc && cur.rev > k.rev:
			n.known[name] = cur
			n.departLocked(name, cur.inc)
		case cur.inc == k.inc:
			k.rev = max(k.rev, cur.rev)
			n.known[name] = k
		}
	}
	for name, cur := range leases {
		if _, ok := n.known[name]; !ok {
			n.known[name] = cur
		}
	}
}

// departLocked reports that instance's incarnations other than successor ("" when
// it holds no lease) have departed: to the watches on them and to OnDeparted.
// n.mu is held.
func (n *Node) departLocked(instance, successor string) {
	if instance == n.opts.Name {
		n.log.Error().Msg("this instance's lease lapsed or passed to another process")
		n.loseLease()
	} else {
		n.log.Info().Str("peer", instance).Bool("succeeded", successor != "").Msg("an instance departed")
		for _, fn := range n.departed {
			n.goLocked(func() { fn(instance) })
		}
	}
	for w := range n.waiting[instance] {
		w.cancel(errDeparted)
	}
	delete(n.waiting, instance)
	for w, inc := range n.watches[instance] {
		if inc != successor {
			delete(n.watches[instance], w)
			n.goLocked(w.lost)
		}
	}
	if len(n.watches[instance]) == 0 {
		delete(n.watches, instance)
	}
}

// errDeparted ends a Call or Deliver whose instance departed while it waited.
var errDeparted = errors.New("the instance departed")

// waiter is a Call or Deliver waiting for an instance's answer.
type waiter struct{ cancel context.CancelCauseFunc }

// awaiting returns ctx, ended also (with errDeparted) when instance departs, for
// a Call or Deliver to it: an instance that dies after it took a call (its lease
// lapses) fails the call at the poll that finds it gone, about Lease later, not
// at CallTimeout. Calls to a name whose lease passes to a new process fail too,
// even one the new process was about to answer: the caller sees no answer, as
// from any instance that restarts. done releases it.
func (n *Node) awaiting(ctx context.Context, instance string) (_ context.Context, done func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	w := &waiter{cancel: cancel}
	n.mu.Lock()
	if n.waiting[instance] == nil {
		n.waiting[instance] = make(map[*waiter]struct{})
	}
	n.waiting[instance][w] = struct{}{}
	n.mu.Unlock()
	return ctx, func() {
		n.mu.Lock()
		delete(n.waiting[instance], w)
		if len(n.waiting[instance]) == 0 {
			delete(n.waiting, instance)
		}
		n.mu.Unlock()
		cancel(nil)
	}
}

// list reads every lease in the bucket (the last value of each key, deleted ones
// left out) through a watcher that stops once it has delivered them.
func (n *Node) list(ctx context.Context) (map[string]lease, error) {
	w, err := n.kv.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, err
	}
	defer func() { _ = w.Stop() }()
	leases := make(map[string]lease)
	for {
		select {
		case e, ok := <-w.Updates():
			switch {
			case !ok:
				return nil, errors.New("the watcher stopped")
			case e == nil:
				return leases, nil
			}
			leases[e.Key()] = lease{inc: string(e.Value()), rev: e.Revision()}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}
