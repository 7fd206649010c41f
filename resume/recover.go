package resume

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"time"
)

// Recovery. A durable store outlives the process: when an engine starts (New), every
// record its store holds belongs to a request of an earlier process. Each one is
// brought back as a live request that has ended, under its old token hash and id,
// with its queued messages (rebuilt from Store.Replay) and a fresh Retention clock:
//
//   - completed or failed (its final response is stored): resumable as it was; a
//     requests/resume replays what is queued, the final response last. A record
//     still processing whose final response is stored (the process stopped
//     between the two) ends as the response says: failed for a JSON-RPC error or
//     a tool error, completed otherwise; never run again.
//   - processing and restartable (started with StartOptions.Payload): it processes
//     again, detached, with what it had queued (but its unanswered server-to-client
//     requests), and Engine.Restartable hands it to the caller to run again; the
//     client resumes it with its old token and gets the new run's messages and
//     result.
//   - processing: its handler died with the old process, so it ends now as failed.
//     Its unanswered server-to-client requests are dropped (nobody waits for the
//     answers), and Options.Ended's response for ErrRestarted (package mcp's: a
//     JSON-RPC error with data.reason "server_restarted") is queued as its final
//     response. getStatus
//     answers status "failed"; requests/resume delivers what is queued, then that
//     error under the request's id.
//   - anything else (its response already acknowledged, a state never stored):
//     deleted.
//
// A record the store cannot decode, or whose messages cannot be read back, is
// left in the store and not recovered (logged; the first kind is counted in
// Stats.Unreadable): the failure may pass, or be a newer version's format, and a
// later process recovers what it can read.
//
// Tombstones are not stored (but a cluster's, read by the other instances, and
// a task's), so a request that ended cancelled or expired in the earlier process
// answers "not found" after a restart; a task answers as before, for a fresh
// TombstoneTTL. A recovered request keeps
// its ack mode (Record.AckMode).
//
// Sequence numbers. A message leaves the store once delivered (without ack mode)
// or acknowledged, so the highest stored number can be below one a client holds.
// A processing request that is recovered (restarted, or run again) therefore
// starts a new epoch (Record.Epoch, stored before its first new message): its
// messages are numbered after epoch<<32, above any number an earlier run gave out
// (a run queues fewer than 2^32 messages), and a client's ack or duplicate check
// never mistakes a new message for an old one.

// With a Cluster, an engine recovers only the requests it owned (the same Self
// as the earlier process), and hands the others to the Cluster (Bind), which
// claims those of instances that are gone; the requests of live instances are
// theirs.

// storedRecords yields the records the store holds (Store.Records). A record the
// store cannot read is counted (Stats.Unreadable), logged and skipped, and stays
// in the store: a newer version may read it, an operator may look at it. Any
// other error ends the listing; it is logged, saying what happens then.
func (e *Engine) storedRecords(ctx context.Context, then string) iter.Seq[Record] {
	return func(yield func(Record) bool) {
		n := 0
		ls, ok := e.store.(Lister)
		if !ok {
			return
		}
		for rec, err := range ls.Records(ctx) {
			switch {
			case errors.Is(err, ErrUnreadable):
				e.unreadable.Add(1)
				e.log.Error().Err(err).Msg("a stored request cannot be read; skipped, left in the store")
				continue
			case err != nil:
				e.log.Error().Err(err).Int("listed", n).Msg("listing the stored requests failed; " + then)
				return
			}
			n++
			if !yield(rec) {
				return
			}
		}
	}
}

// recoverStored recovers the requests the store holds, its Store calls bounded
// by ctx. Called once, by New.
func (e *Engine) recoverStored(ctx context.Context) {
	if e.store == nil {
		return
	}
	start := time.Now()
	var recs []Record
	for rec := range e.storedRecords(ctx, "recovering those listed") {
		if rec.Owner == e.self {
			recs = append(recs, rec)
			continue
		}
		if e.cluster == nil {
			// Another owner's (a store a cluster used before): this engine
			// owns every request in its store, and only the owner's writes
			// pass (Store.Put), so it becomes the owner first.
			cl, ok := e.store.(Claimer)
			if !ok {
				e.log.Error().Str("request", string(rec.ID)).Str("owner", rec.Owner).Msg("a stored request of another owner, and a store that cannot move it (no Claim); not recovered, left in the store")
				continue
			}
			if got, err := cl.Claim(ctx, rec.Hash, rec.Owner, e.self); err != nil {
				e.log.Error().Err(err).Str("request", string(rec.ID)).Msg("taking over a stored request of another owner failed; not recovered, left in the store")
			} else {
				recs = append(recs, *got)
			}
			continue
		}
		e.others = append(e.others, rec)
	}
	if len(recs) == 0 {
		return
	}
	var resumable, restarted, rerun, dropped, left, tombs int
	for _, rec := range recs {
		if ctx.Err() != nil {
			break // New fails; the rest stays stored, for the next process
		}
		switch e.recoverOne(ctx, rec, ErrRestarted) {
		case recoveredLeft:
			left++
		case recoveredTombstone:
			tombs++
		case recoveredResumable:
			resumable++
		case recoveredRestarted:
			restarted++
		case recoveredRerun:
			rerun++
		default:
			dropped++
		}
	}
	e.trim("", true)
	e.log.Info().Int("resumable", resumable).Int("restarted", restarted).Int("rerun", rerun).Int("dropped", dropped).Int("left", left).Int("taskTombstones", tombs).
		Stringer("took", time.Since(start)).Msg("recovered the requests of an earlier process")
}

type recovered uint8

const (
	recoveredDropped recovered = iota
	recoveredResumable
	recoveredRestarted
	recoveredRerun
	recoveredLeft      // not read; still stored
	recoveredTombstone // a task's tombstone, remembered again
)

// recoverOne brings back one stored request, or deletes it. A request that was
// processing (and is not restartable) ends with lost's response. ctx bounds its
// Store calls.
func (e *Engine) recoverOne(ctx context.Context, rec Record, lost error) recovered {
	if rec.Tombstone() {
		// A task's client polls it by id, for its ttl: it says how it ended.
		if rec.Task && (rec.TTL == 0 || time.Now().Before(rec.Created.Add(rec.TTL))) {
			e.restoreTombstone(rec)
			return recoveredTombstone
		}
		e.dropStored(ctx, rec) // this instance's own, from before: nothing to bring back
		return recoveredDropped
	}
	var q outbox
	var inputs []uint64 // unanswered server-to-client requests
	var resp *Message   // the final response, if stored
	for m, err := range e.store.Replay(ctx, rec.Hash, 0) {
		if errors.Is(err, ErrNotFound) { // deleted meanwhile
			e.dropStored(ctx, rec)
			return recoveredDropped
		}
		if err != nil {
			// Not deleted: the failure may pass (NATS away for longer than the
			// store waits) or be a message a newer version wrote. Until a later
			// process recovers it, its client gets not_found.
			e.log.Error().Err(err).Str("request", string(rec.ID)).Msg("replaying a stored request failed; not recovered, left in the store")
			return recoveredLeft
		}
		q.add(m, false, e.clock()) // superseded now, as far as this process knows
		q.last = m.Seq
		switch m.Kind {
		case KindResponse:
			resp = &m
		case KindRequest:
			inputs = append(inputs, m.Seq)
		}
	}
	return e.recoverReplayed(ctx, rec, q, inputs, resp, lost)
}

// recoverReplayed is recoverOne once rec's messages are read: q holds them,
// inputs names its unanswered server-to-client requests, resp is its final
// response (nil when none is stored).
func (e *Engine) recoverReplayed(ctx context.Context, rec Record, q outbox, inputs []uint64, resp *Message, lost error) recovered {
	hasResponse := resp != nil
	state, how := rec.State, recoveredResumable
	switch {
	case state == StateProcessing && hasResponse:
		// The process stopped between storing the final response and the final
		// state: the response says how the request ended (a tool error or a
		// JSON-RPC error is failed, never completed), and that is stored now,
		// without the payload, so that no later process runs it again.
		state = StateCompleted
		if resp.Failed {
			state = StateFailed
		}
		rec.State, rec.Payload = state, nil
		if err := e.store.Put(ctx, rec); err != nil {
			e.log.Warn().Err(err).Str("request", string(rec.ID)).Msg("storing the final state of a recovered request")
		}
	case state == StateProcessing && rec.Payload != nil:
		return e.recoverRestartable(ctx, rec, q, inputs, lost)
	case state == StateProcessing:
		e.discardInputs(ctx, rec, &q, inputs)
		newEpoch(&rec, &q)
		m := Message{Seq: q.next(), Kind: KindResponse}
		m.Data, m.Failed = e.opts.Ended(rec.ID, m.Seq, lost), true
		if err := e.store.Append(ctx, rec.Hash, m); err != nil {
			e.log.Warn().Err(err).Str("request", string(rec.ID)).Msg("queueing the response of a restarted request; dropped")
			e.dropStored(ctx, rec)
			return recoveredDropped
		}
		q.add(m, false, 0)
		state, how = StateFailed, recoveredRestarted
		rec.State = state
		if err := e.store.Put(ctx, rec); err != nil {
			e.log.Warn().Err(err).Str("request", string(rec.ID)).Msg("storing the state of a restarted request")
		}
		if f := e.opts.OnLost; f != nil {
			f(rec, lost)
		}
	case state != StateCompleted && state != StateFailed, !hasResponse:
		// A state the engine never stores, or a response already acknowledged
		// (the process stopped before deleting the request): nothing to resume.
		e.dropStored(ctx, rec)
		return recoveredDropped
	}

	// No handler runs for it: its context ends when it is freed, like any other.
	// Its Retention clock runs from now.
	rec.State = state
	r := e.newRequest(context.Background(), rec, q)
	if !e.revive(r, func() { e.retainLocked(r) }) {
		return recoveredDropped
	}
	return how
}

// revive makes a recovered request live: its entry in the registry (with
// register's bookkeeping, under e.mu), and its clock. It reports false, and r is
// dropped, when the engine is closed or already holds the request.
func (e *Engine) revive(r *Request, register func()) bool {
	e.mu.Lock()
	if dup := e.live.get(r.hash) != nil; dup || e.closed {
		e.mu.Unlock()
		r.cancel(ErrClosed)
		return false
	}
	e.live.add(r)
	r.use = e.useLocked(r.principal)
	register()
	e.mu.Unlock()
	e.addBytes(r, r.q.bytes)
	r.mu.Lock()
	r.scheduleLocked()
	r.mu.Unlock()
	return true
}

// discardInputs drops a recovered request's unanswered server-to-client requests:
// no handler waits for their answers any more.
func (e *Engine) discardInputs(ctx context.Context, rec Record, q *outbox, inputs []uint64) {
	if len(inputs) == 0 {
		return
	}
	q.remove(inputs)
	if err := e.store.Discard(ctx, rec.Hash, inputs...); err != nil {
		e.log.Warn().Err(err).Str("request", string(rec.ID)).Msg("discarding the inputs of a recovered request")
	}
}

// recoverRestartable brings back a restartable request that was processing: it
// processes again, detached, keeping what it had queued except its unanswered
// server-to-client requests (the new run asks again), for the caller to run it
// again (Restartable). Past MaxLive (or MaxLivePerPrincipal) it is failed like any other restarted request.
func (e *Engine) recoverRestartable(ctx context.Context, rec Record, q outbox, inputs []uint64, lost error) recovered {
	e.mu.Lock()
	dup := e.live.get(rec.Hash) != nil
	closed, full := e.closed, e.fullLocked(rec.Principal)
	e.mu.Unlock()
	switch {
	case dup || closed:
		// Live here already, or the engine is closing: the stored request is
		// left as it is (for the next process to run again).
		return recoveredDropped
	case full:
		rec.Payload = nil
		return e.recoverReplayed(ctx, rec, q, inputs, nil, lost) // fails it as restarted
	}
	e.discardInputs(ctx, rec, &q, inputs)
	newEpoch(&rec, &q)
	if err := e.store.Put(ctx, rec); err != nil {
		// Its new messages are numbered in the new epoch all the same; should
		// the process stop again before storing one, the next run could reuse
		// this epoch's numbers.
		e.log.Warn().Err(err).Str("request", string(rec.ID)).Msg("storing the epoch of a request run again")
	}
	// Processing and detached: its maxWait clock runs from now.
	rec.State = StateProcessing
	r := e.newRequest(context.Background(), rec, q)
	if !e.revive(r, func() {
		e.addRunningLocked(r.principal, 1)
		e.restartable = append(e.restartable, r)
	}) {
		return recoveredDropped
	}
	return recoveredRerun
}

// newEpoch starts the next epoch of a recovered request that was processing: after
// the one in its record and the one of its last stored message (a process that
// stopped before storing its epoch may have stored messages of it).
func newEpoch(rec *Record, q *outbox) {
	rec.Epoch = max(rec.Epoch, uint32(q.last>>32)) + 1
	q.last = max(q.last, uint64(rec.Epoch)<<32)
}

// restoreTombstone remembers again the stored tombstone of a task of an
// earlier process, until the end of the task's ttl (for a fresh TombstoneTTL
// when it has none); its record stays stored until then.
func (e *Engine) restoreTombstone(rec Record) {
	state := rec.State
	if rec.Acknowledged {
		state = StateCompleted // what a lookup answers: ErrAcknowledged
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	until := time.Now().Add(e.opts.TombstoneTTL)
	if rec.TTL > 0 { // the end of its ttl, not a fresh TombstoneTTL at each restart
		until = rec.Created.Add(rec.TTL)
	}
	e.tombs[rec.Hash] = tombstone{id: rec.ID, principal: rec.Principal, state: state, stored: true, until: until}
	e.tombQ = append(e.tombQ, rec.Hash)
	e.armTombsLocked(time.Now())
}

// dropStored deletes rec's request from the store.
func (e *Engine) dropStored(ctx context.Context, rec Record) {
	if err := e.store.Delete(ctx, rec.Hash); err != nil {
		e.log.Warn().Err(err).Str("request", string(rec.ID)).Msg("deleting a stored request")
	}
}

// endedResponse is the default Options.Ended: a JSON-RPC 2.0 error, code -32603,
// whose message is cause's.
func endedResponse(id []byte, _ uint64, cause error) []byte {
	msg, _ := json.Marshal(cause.Error()) // cannot fail: a string
	b := append([]byte(`{"jsonrpc":"2.0","id":`), id...)
	b = append(b, `,"error":{"code":-32603,"message":`...)
	b = append(b, msg...)
	return append(b, "}}"...)
}
