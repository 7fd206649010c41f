package resume

import (
	"bytes"
	"time"
)

// Tombstones: what a lookup of an ended request answers while the engine
// remembers it, and what the Store keeps of it (a cluster's, a task's).

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
	now := time.Now()
	e.tombs[h] = tombstone{id: bytes.Clone(id), principal: principal, state: StateCancelled, until: now.Add(e.opts.TombstoneTTL)}
	e.tombQ = append(e.tombQ, h)
	e.armTombsLocked(now)
}

// knownLocked says whether a request with hash h is live or has a tombstone.
// Called with e.mu held.
func (e *Engine) knownLocked(h TokenHash) bool {
	live := e.live.get(h) != nil
	_, tomb := e.tombs[h]
	return live || tomb
}

// forget removes an ended request and leaves its tombstone. Called with r.mu held.
func (e *Engine) forget(r *Request, final State) {
	now := time.Now()
	e.mu.Lock()
	if e.live.get(r.hash) == r {
		e.live.remove(r)
	}
	if r.inRetainQ {
		e.all.retained--
		if r.use != nil {
			r.use.retained--
		}
	}
	e.releaseUseLocked(r)
	aged := e.ageTombsLocked(now)
	// A cluster's other instances read the tombstone from the store; a task's
	// outlives a restart there (its client polls it by id for its ttl).
	stored := e.store != nil && (e.cluster != nil || r.task)
	until := now.Add(e.opts.TombstoneTTL)
	if end := r.Created().Add(r.extra().ttl); r.task && r.extra().ttl > 0 && end.After(until) {
		until = end
	}
	e.tombs[r.hash] = tombstone{id: r.id, principal: r.principal, state: final, evicted: r.evicted, stored: stored, until: until}
	if final == StateExpired {
		e.expired.Add(1)
	}
	e.tombQ = append(e.tombQ, r.hash)
	e.armTombsLocked(now)
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
	e.deleteTombs(aged)
	if !stored {
		return
	}
	// The tombstone is stored: a record with no messages whose state is
	// cancelled or expired, which the other instances of a cluster read (see
	// lookupShared in cluster.go) and a later process recovers for a task. It
	// goes when this engine's tombstone does.
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

// ageTombsLocked drops the tombstones whose time is over, and the oldest while
// there are more than MaxTombstones, and returns those among them that are
// stored: their records go too (deleteTombs). They are queued in the order
// they were made, so a task's, which may last to the end of its ttl, holds
// back those behind it (which still answer lookups only until their own time).
// It arms the tombstone timer for the next. Called with e.mu held.
func (e *Engine) ageTombsLocked(now time.Time) (aged []TokenHash) {
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
	e.armTombsLocked(now)
	return aged
}

// armTombsLocked arms the tombstone timer for when the oldest tombstone's
// time is over, unless it is armed for then already: an engine where no
// request ends meanwhile still lets its tombstones, and their stored records,
// go. Called with e.mu held.
func (e *Engine) armTombsLocked(now time.Time) {
	if e.closed || len(e.tombQ) == 0 {
		return
	}
	at := now
	if t, ok := e.tombs[e.tombQ[0]]; ok {
		at = t.until
	}
	switch {
	case e.tombTimer == nil:
		e.tombTimer = time.AfterFunc(at.Sub(now), e.ageTombs)
	case !at.Equal(e.tombAt):
		e.tombTimer.Reset(at.Sub(now))
	default:
		return
	}
	e.tombAt = at
}

// ageTombs is the tombstone timer's: the tombstones whose time is over go.
func (e *Engine) ageTombs() {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return
	}
	e.tombAt = time.Time{} // fired: armed again for the next
	aged := e.ageTombsLocked(time.Now())
	e.mu.Unlock()
	e.deleteTombs(aged)
}

// deleteTombs deletes the stored records of aged tombstones, in the background.
func (e *Engine) deleteTombs(aged []TokenHash) {
	if len(aged) == 0 || e.store == nil {
		return
	}
	e.goBackground(func() {
		for _, h := range aged {
			if err := e.store.Delete(e.ctx, h); err != nil {
				e.log.Warn().Err(err).Msg("deleting an old tombstone from the store")
			}
		}
	})
}
