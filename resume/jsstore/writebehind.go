package jsstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcp-resume/mcp-resume/internal/backoff"
	"github.com/mcp-resume/mcp-resume/resume"
	"github.com/mcp-resume/mcp-resume/resume/internal/wire"
)

// The write-behind: Append queues a request's messages, which are published to
// the stream after flushDelay or in batches, pipelined (see window), and settle
// waits for their acknowledgements where something needs them stored.

// flushDelay is how long an appended message waits before it is sent to the
// stream, and flushBatch how many of a request's messages wait at most: one
// delivered and discarded meanwhile (a client attached without acks) is never
// sent, nor deleted after. It is the default of Options.FlushDelay (a test
// that must act within the delay, whatever the machine's load, sets it longer).
const flushDelay = time.Millisecond

const flushBatch = 256

// packBytes bounds the size of a pack: the messages of a request sent
// together as one stream message (see flush). A message this big or bigger
// goes alone, as one does when it is the only one waiting.
const packBytes = 64 << 10

// ackPatience is how long, past its OutageWait, settle goes on sending again
// what the stream has not acknowledged while the connection is up: a stream
// whose window of publishes in flight is full acknowledges late, not never.
const ackPatience = 5 * time.Second

// recordRetry is how long a deferred record whose write found NATS away waits
// before it is tried again.
const recordRetry = 100 * time.Millisecond

// Append queues a message for its request's subject (queue): it is published
// after flushDelay, or once flushBatch of the request's messages wait, or when
// something needs it stored, unless discarded before (Discard drops it unsent),
// in one pack with those of its request waiting beside it (see packLocked).
// Publishes are pipelined, in order, on the connection, at most maxInFlight of
// the store's at once (see window): an Append that finds its request's batch
// full while the window is full waits for the stream. What needs the message
// stored waits for its acknowledgement (settle): the Put of a request's final
// state (so a stored final state always comes with the messages before it),
// Delete and Sweep; a publish whose acknowledgement failed is sent again then,
// with the same message id. A Replay does not wait: it gives an unacknowledged
// message from the publish itself.
//
// While the connection is not up, Append waits for it, for up to
// Options.OutageWait, and fails after that: a request that keeps appending
// during an outage is held back, not buffered without bound. A message queued
// just before the connection went is sent from the client's reconnect buffer,
// or sent again by settle; one whose publish failed may still be stored (its
// acknowledgement was lost); this process's Replay never yields a message whose
// Append failed, but a later process that indexes the request from the stream
// may.
func (s *Store) Append(ctx context.Context, h resume.TokenHash, m resume.Message) error {
	if err := s.ensure(ctx, h); err != nil {
		return err
	}
	if err := s.lostErr(h); err != nil {
		return err
	}
	if err := s.connected(ctx); err != nil {
		return fmt.Errorf("jsstore: appending message %d of %s: %w", m.Seq, key(h)[:12], err)
	}
	data := wire.EncodeMessage(m)
	p := &pending{seq: m.Seq, data: data} // its publish is made when it is sent (packLocked), alone or in a pack
	n, err := s.queue(h, loc{seq: m.Seq, pend: p, data: data})
	if n >= flushBatch {
		s.flush(h)
	}
	return err
}

// queue indexes l, whose message is not sent yet, and schedules its sending
// (resume.ErrStoreLost for a lost request);
// it returns how many of request h's messages wait.
func (s *Store) queue(h resume.TokenHash, l loc) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.reqs[h]
	if r == nil || !r.loaded {
		return 0, nil
	}
	if r.lost { // while Append waited for the connection
		return 0, fmt.Errorf("jsstore: request %s: %w", key(h)[:12], resume.ErrStoreLost)
	}
	r.volatile = false // written as any other from now on
	r.held = append(r.held, l)
	for i := len(r.held) - tailKeep - 1; i >= 0 && r.held[i].data != nil; i-- {
		r.held[i].data = nil
	}
	reapLocked(r)
	r.unsent = append(r.unsent, l.pend)
	s.dirtyLocked(h)
	return len(r.unsent), nil
}

// dirtyLocked schedules the flush of request h's waiting writes.
func (s *Store) dirtyLocked(h resume.TokenHash) {
	if s.closed {
		return
	}
	if !s.armed {
		s.armed = true
		time.AfterFunc(s.flushDelay, s.flushDirty)
	}
	s.dirty[h] = struct{}{}
}

// flushDirty sends the waiting messages of every request. It stays armed while
// it runs (a flush may wait for the window) and schedules itself again for the
// requests that became dirty meanwhile: one flusher at a time.
func (s *Store) flushDirty() {
	s.mu.Lock()
	hs := make([]resume.TokenHash, 0, len(s.dirty))
	for h := range s.dirty {
		hs = append(hs, h)
	}
	clear(s.dirty)
	s.mu.Unlock()
	for _, h := range hs {
		s.flush(h)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.dirty) > 0 && !s.closed {
		time.AfterFunc(s.flushDelay, s.flushDirty)
	} else {
		s.armed = false
	}
}

// Delivered tells the store that request h's final response reached its
// client (resume.DeliveryWatcher). With Options.DeliveredInMemory, a request
// that ended before any of it was written is never written from now on
// (volatile): a flush behind leaves it, and its Delete removes nothing from
// the stream or the bucket. Close and Sweep write it; a Put or an Append
// makes it one written as any other.
func (s *Store) Delivered(h resume.TokenHash) {
	if !s.opts.DeliveredInMemory {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.reqs[h]
	// bare: no message of it was sent; fresh with an ended record waiting:
	// no record of it was written, and no flush has taken it (a flush takes
	// the waiting record and packs the messages under s.mu).
	if r == nil || !r.fresh || !r.bare || r.unwritten == nil || !r.unwritten.State.Ended() {
		return
	}
	r.volatile = true
	delete(s.dirty, h)
}

// flush writes request h's record if it waits (a failure leaves it waiting, for
// the next flush), and sends its waiting messages, pipelined, in order.
func (s *Store) flush(h resume.TokenHash) {
	s.mu.Lock()
	r := s.reqs[h]
	s.mu.Unlock()
	if r == nil {
		return
	}
	r.fmu.Lock()
	defer r.fmu.Unlock()
	s.mu.Lock()
	rec, gen := r.unwritten, r.gen
	r.unwritten = nil
	r.volatile = false // written now (Close, Sweep, or a flush that came first)
	s.mu.Unlock()
	if rec != nil && rec.State.Ended() {
		// A request that ended before its first record was written: its
		// messages go first, then its record, written behind (writeFinal).
		s.publishUnsent(h, r)
		s.writeFinal(h, r, *rec, gen)
		return
	}
	if rec != nil {
		ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
		err := s.putNow(ctx, *rec)
		cancel()
		s.mu.Lock()
		switch {
		case r.gen != gen || s.reqs[h] != r: // put again, or deleted, meanwhile
		case err == nil || !unreachable(err) || s.closed || s.js.Conn().IsClosed():
			r.shown = nil // written, or never will be (claimed, unreadable: the engine holds it)
		default: // NATS away: again in a while
			r.unwritten = rec
			time.AfterFunc(recordRetry, func() {
				s.mu.Lock()
				defer s.mu.Unlock()
				if s.reqs[h] == r && r.unwritten != nil {
					s.dirtyLocked(h)
				}
			})
		}
		s.mu.Unlock()
	}
	s.publishUnsent(h, r)
}

// publishUnsent publishes the messages of request h (r) not published yet.
func (s *Store) publishUnsent(h resume.TokenHash, r *request) {
	s.mu.Lock()
	units := s.packLocked(h, r, r.unsent)
	r.unsent = nil
	s.mu.Unlock()
	for _, p := range units {
		s.publish(context.Background(), p)
	}
}

// writeFinal writes rec, the final record of request r, which ended before
// any record of it was written, once its messages (published just before) are
// stored: the record is published now, pipelined behind them, and what waits
// for the acknowledgements runs in the background, so that a flush of many
// requests costs one round trip, not one a request. A record that could not
// be written waits for the next flush (NATS away) or is written as any other
// (the create found one: a request run again).
//
// Called from flush, with r.fmu held.
func (s *Store) writeFinal(h resume.TokenHash, r *request, rec resume.Record, gen uint64) {
	fut, err := s.js.PublishMsgAsync(s.kvMsg(key(h), encodeRecord(rec), 0), jetstream.WithExpectLastSequencePerSubject(0))
	done := make(chan struct{})
	s.mu.Lock()
	r.writing = done
	s.mu.Unlock()
	s.bg.Go(func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
		defer cancel()
		serr := s.sweep(ctx, h, true)
		var rev uint64
		if err == nil {
			select {
			case ack := <-fut.Ok():
				rev = ack.Sequence
			case <-fut.Err():
			case <-ctx.Done():
			}
		}
		if rev == 0 && serr == nil {
			serr = s.putNow(ctx, rec)
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if r.writing == done {
			r.writing = nil
		}
		switch {
		case rev != 0:
			r.rev, r.owner, r.fresh = rev, rec.Owner, false
		case serr != nil && r.gen == gen && s.reqs[h] == r && unreachable(serr) && !s.closed:
			r.unwritten = &rec // NATS away: the next flush tries again
			time.AfterFunc(recordRetry, func() {
				s.mu.Lock()
				defer s.mu.Unlock()
				if s.reqs[h] == r && r.unwritten != nil {
					s.dirtyLocked(h)
				}
			})
			return
		}
		if r.gen == gen {
			r.shown = nil
		}
	})
}

// packLocked takes ps, request r's messages waiting to be sent, in order, to
// be sent now: those not sent or dropped meanwhile, from now on sent (a
// Discard deletes them from the stream). It returns their publishes: a run of
// them is one pack, one stream message of up to s.packMax bytes, and a message
// goes alone when it is the only one or too big to share. A request appended
// to without pause (a task's progress) costs the stream a publish, an
// acknowledgement and a stored message per flush, not per message. The
// index's locs of a pack's messages point to the pack (see record).
//
// Under s.mu, so that republish, which takes it too, never sends a message
// alone that a pack carries.
func (s *Store) packLocked(h resume.TokenHash, r *request, ps []*pending) []*pending {
	var units, run []*pending
	size := 0
	end := func() {
		switch len(run) {
		case 0:
		case 1:
			s.publishingLocked(h, run[0])
			units = append(units, run[0])
		default:
			units = append(units, s.packRunLocked(h, r, run))
		}
		run, size = nil, 0
	}
	for _, p := range ps {
		p.mu.Lock()
		take := !p.sent && !p.dropped
		if take {
			p.sent = true
		}
		p.mu.Unlock()
		if !take {
			continue
		}
		n := len(p.data)
		if len(run) > 0 && size+n > s.packMax {
			end()
		}
		run = append(run, p)
		size += n
	}
	end()
	if len(units) > 0 {
		r.bare = false
	}
	return units
}

// packRunLocked makes the pack of run, two messages or more of request r,
// in ascending seq and taken for sending (packLocked), and points their
// pendings and their locs to it.
func (s *Store) packRunLocked(h resume.TokenHash, r *request, run []*pending) *pending {
	parts := make([][]byte, len(run))
	seqs := make([]uint64, len(run))
	for i, p := range run {
		parts[i], seqs[i] = p.data, p.seq
	}
	data, parts := encodePack(parts)
	first, last := seqs[0], seqs[len(seqs)-1]
	// An id of its own: the messages' numbers are unique to the request, and a
	// run is taken once.
	msgID := key(h) + "." + strconv.FormatUint(first, 10) + "-" + strconv.FormatUint(last, 10) + "." + strconv.Itoa(len(run))
	pk := &pending{seq: first, data: data, seqs: seqs, parts: parts, sent: true,
		msg: &nats.Msg{Subject: s.subject(h), Data: data, Header: nats.Header{jetstream.MsgIDHeader: []string{msgID}}}}
	i := 0
	for _, p := range run {
		p.mu.Lock()
		p.via = pk
		p.mu.Unlock()
		j, ok := slices.BinarySearchFunc(r.held[i:], p.seq, func(l loc, seq uint64) int { return cmp.Compare(l.seq, seq) })
		i += j
		if ok && r.held[i].pend == p {
			r.held[i].pend = pk
		}
	}
	return pk
}

// publishingLocked makes p's publish, a message of request h sent alone, with
// its message id (the request's and its number), unless it has one.
func (s *Store) publishingLocked(h resume.TokenHash, p *pending) {
	if p.msg != nil {
		return
	}
	msgID := key(h) + "." + strconv.FormatUint(p.seq, 10)
	p.msg = &nats.Msg{Subject: s.subject(h), Data: p.data, Header: nats.Header{jetstream.MsgIDHeader: []string{msgID}}}
}

// noRetry: a publish nobody answers fails at once, instead of nats.go sending
// it again on its own, later, maybe to a stream made anew (see lost.go); settle
// sends again what failed.
var noRetry = jetstream.WithRetryAttempts(0)

// publish sends p with its message id, once a slot of the window is free
// (waiting for one until ctx ends). A publish that cannot be sent (ctx ended,
// the connection is not up, its own window stays full) leaves p failed, for
// settle to send again. Nothing is published while the connection is down: the
// client's reconnect buffer would send it all at once when it is back, ahead of
// what waits for an acknowledgement.
func (s *Store) publish(ctx context.Context, p *pending) {
	fail := func() {
		p.mu.Lock()
		if p.sseq == 0 {
			p.att, p.failed = nil, true
		}
		p.mu.Unlock()
	}
	nc := s.js.Conn()
	if nc.Status() != nats.CONNECTED {
		fail()
		return
	}
	probe, err := s.win.acquire(ctx)
	if err != nil {
		fail()
		return
	}
	var fut jetstream.PubAckFuture
	if nc.Status() == nats.CONNECTED { // still, after a wait for the window
		fut, err = s.js.PublishMsgAsync(p.msg, noRetry)
	} else {
		err = nats.ErrConnectionReconnecting
	}
	if err != nil {
		s.win.release(probe)
		fail()
		return
	}
	a := &attempt{p: p, fut: fut, done: make(chan struct{})}
	p.mu.Lock()
	if p.sseq == 0 {
		p.att, p.failed = a, false
	}
	p.mu.Unlock()
	s.win.push(a)
}

// reapLocked records the acknowledgements that have come for request r's oldest
// pending publishes, without waiting, so that a request appended to without
// pause holds only its publishes in flight, not every message's.
func reapLocked(r *request) {
	i, _ := slices.BinarySearchFunc(r.held, r.pendFrom, func(l loc, seq uint64) int { return cmp.Compare(l.seq, seq) })
	for ; i < len(r.held); i++ {
		l := &r.held[i]
		if l.pend == nil {
			continue
		}
		l.pend.mu.Lock()
		sseq := l.pend.sseq
		l.pend.mu.Unlock()
		if sseq == 0 {
			break
		}
		l.sseq, l.pend = sseq, nil
	}
	if i < len(r.held) {
		r.pendFrom = r.held[i].seq
	} else if n := len(r.held); n > 0 {
		r.pendFrom = r.held[n-1].seq + 1
	}
}

// settle waits until every message of request h indexed now (held, and discarded
// but not yet deleted) is stored, and records where each sits. Publishes whose
// acknowledgement failed (the connection was lost: nats.go fails every
// acknowledgement outstanding then) or was given up as lost (see window: the
// publish or its acknowledgement was lost with a server of a NATS cluster, the
// connection staying up) are sent again together, pipelined, with their message
// ids, which the deduplication window absorbs for any that was stored after all;
// for up to Options.OutageWait.
func (s *Store) settle(ctx context.Context, h resume.TokenHash) error {
	if s.lostErr(h) != nil {
		return nil // nothing of it is to be stored in the stream made anew
	}
	s.flush(h)
	l := backoff.Start(10*time.Millisecond, 500*time.Millisecond, s.opts.OutageWait, 0)
	end := l.End()
	for {
		pause := l.Next()
		s.mu.Lock()
		r := s.reqs[h]
		var wait []*pending
		if r != nil && r.lost { // meanwhile: nothing of it goes to the stream made anew
			s.mu.Unlock()
			return nil
		}
		if r != nil {
			seen := map[*pending]bool{} // a pack's messages share it
			for _, ls := range [][]loc{r.held, r.doomed} {
				for _, l := range ls {
					if l.pend != nil && !seen[l.pend] && !l.pend.isDropped() {
						seen[l.pend] = true
						wait = append(wait, l.pend)
					}
				}
			}
		}
		s.mu.Unlock()
		if len(wait) == 0 {
			return nil
		}
		var failed []*pending
		for _, p := range wait {
			ok, err := s.outcome(ctx, h, p)
			if err != nil {
				return err
			}
			if !ok {
				failed = append(failed, p)
			}
		}
		if len(failed) == 0 {
			continue // those indexed meanwhile, if any
		}
		if !s.await(ctx, end, pause) {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if s.js.Conn().Status() != nats.CONNECTED {
				return fmt.Errorf("jsstore: publishing %d messages of %s: %w", len(failed), key(h)[:12], nats.ErrConnectionReconnecting)
			}
			// Connected past the OutageWait: try again, at the pace of the
			// pauses, for as long as acknowledgements may take under load
			// (ackPatience), not just one call's timeout.
			if time.Now().After(end.Add(max(s.timeout, ackPatience))) {
				return fmt.Errorf("jsstore: publishing %d messages of %s: no acknowledgement", len(failed), key(h)[:12])
			}
			if !backoff.Sleep(ctx, pause) {
				return ctx.Err()
			}
		}
		for _, p := range failed {
			s.republish(ctx, h, p)
		}
	}
}

// outcome waits for pending publish p to be resolved (see window): true when
// it is stored (and recorded in h's index), false when it must be sent again.
func (s *Store) outcome(ctx context.Context, h resume.TokenHash, p *pending) (bool, error) {
	p = p.unit()
	p.mu.Lock()
	att, sseq, failed, dropped := p.att, p.sseq, p.failed, p.dropped
	p.mu.Unlock()
	if dropped {
		return true, nil // never sent: nothing to wait for, nothing stored
	}
	if sseq == 0 {
		if failed || att == nil {
			return false, nil
		}
		select {
		case <-att.done:
		case <-ctx.Done():
			return false, ctx.Err()
		}
		p.mu.Lock()
		sseq = p.sseq
		p.mu.Unlock()
		if sseq == 0 {
			return false, nil
		}
	}
	s.record(h, p, sseq)
	return true, nil
}

// drop marks p, a message discarded, never to be sent, and reports whether it
// was not sent yet (false for nil: a message in the stream).
func (p *pending) drop() bool {
	if p == nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sent {
		return false
	}
	p.dropped = true
	return true
}

func (p *pending) isDropped() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dropped
}

// republish sends p again with its message id (the pack that carries it, if
// one does), unless it is stored or dropped meanwhile. A message not sent yet
// is taken to be sent: a flush does not send it again, nor pack it.
func (s *Store) republish(ctx context.Context, h resume.TokenHash, p *pending) {
	s.mu.Lock() // see packLocked
	p = p.unit()
	p.mu.Lock()
	sseq, dropped := p.sseq, p.dropped
	if !dropped {
		p.sent = true
	}
	p.mu.Unlock()
	if !dropped {
		s.publishingLocked(h, p)
		if r := s.reqs[h]; r != nil && sseq == 0 {
			r.bare = false // a message packLocked never took goes from here
		}
	}
	s.mu.Unlock()
	if sseq != 0 || dropped {
		return
	}
	s.publish(ctx, p)
}

// record notes where p (a message, or a pack of them) sits in request h's
// index.
func (s *Store) record(h resume.TokenHash, p *pending, sseq uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.reqs[h]
	if r == nil {
		return
	}
	seqs := p.seqs
	if seqs == nil {
		seqs = []uint64{p.seq}
	}
	for _, q := range seqs {
		if i, ok := slices.BinarySearchFunc(r.held, q, func(l loc, seq uint64) int { return cmp.Compare(l.seq, seq) }); ok && r.held[i].pend == p {
			r.held[i].sseq, r.held[i].pend = sseq, nil
		}
	}
	for i := range r.doomed {
		if r.doomed[i].pend == p {
			r.doomed[i].sseq, r.doomed[i].pend = sseq, nil
		}
	}
}
