package jsstore

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcp-resume/mcp-resume/resume"
	"github.com/mcp-resume/mcp-resume/resume/internal/queue"
)

// Deletion: messages discarded once delivered, a request's messages swept, and a
// request deleted with its record.

// discardBatch is how many discarded messages of a request wait in the stream
// before they are deleted together (a request's Delete takes the rest).
const discardBatch = 64

// Discard takes messages out of the request's index at once (Replay no longer
// yields them) and deletes them from the stream in batches: once discardBatch of
// them wait, they are deleted together, in one subject purge when they are the
// oldest of the request's messages (a delivered prefix: the common case), one by
// one otherwise. The request's Delete takes the rest. A process that stops
// before a batch is deleted leaves those messages to the next one, which
// replays them again: a client with acks knows them already.
func (s *Store) Discard(ctx context.Context, h resume.TokenHash, seqs ...uint64) error {
	if len(seqs) == 0 {
		return nil
	}
	if err := s.ensure(ctx, h); errors.Is(err, resume.ErrNotFound) {
		return nil
	} else if err != nil {
		return err
	}
	s.mu.Lock()
	r := s.reqs[h]
	if r == nil || r.lost { // a lost request's index names another stream's messages
		s.mu.Unlock()
		return nil
	}
	if len(seqs) == 1 {
		// One delivered message, most often the oldest (a replay drains the
		// queue from its head): no scan of the index, no copy of it.
		if i, ok := slices.BinarySearchFunc(r.held, seqs[0], func(l loc, seq uint64) int { return cmp.Compare(l.seq, seq) }); ok {
			if l := r.held[i]; !l.pend.drop() {
				r.doomed = append(r.doomed, l)
			}
			r.held = queue.Remove(r.held, i)
		}
	} else {
		drop := make(map[uint64]bool, len(seqs))
		for _, q := range seqs {
			drop[q] = true
		}
		for _, l := range r.held {
			if drop[l.seq] && !l.pend.drop() {
				r.doomed = append(r.doomed, l)
			}
		}
		r.held = slices.DeleteFunc(r.held, func(l loc) bool { return drop[l.seq] })
	}
	full := len(r.doomed)-r.kept >= discardBatch // not counting those a sweep could not delete
	s.mu.Unlock()
	if !full {
		return nil
	}
	return s.sweep(ctx, h, false)
}

// Sweep makes the stream hold exactly what request h's index holds now: every
// message appended is stored (its publish acknowledged) and every message
// discarded is deleted, which Append and Discard leave to later. For readers of
// the stream itself (another process); a request's final state and its Delete
// do it anyway.
func (s *Store) Sweep(ctx context.Context, h resume.TokenHash) error { return s.sweep(ctx, h, true) }

// sweep deletes request h's discarded messages from the stream, once every
// message indexed is stored; all of them, or (for a Discard's batch) all but the
// newest when one purge takes them: that one stays in the stream, still
// discarded, until the next sweep. A purge that empties the stream's last block
// makes the server remove the block's file and create a new one for the next
// message, which a request streaming alone would pay at every batch.
//
// A pack (see flush) is deleted once every message in it is discarded: one
// whose others are still held stays, and its discarded messages stay doomed,
// for a later sweep. For all (the request's final state, or Sweep), the stream
// must say what is discarded: those are named in a stream message of their
// own (encodeDropped), which a later process's index leaves out (see scan).
func (s *Store) sweep(ctx context.Context, h resume.TokenHash, all bool) error {
	if err := s.settle(ctx, h); err != nil {
		return err
	}
	s.mu.Lock()
	r := s.reqs[h]
	if r == nil || r.lost { // a lost request's index names another stream's messages
		s.mu.Unlock()
		return nil
	}
	// The stream messages that hold a discarded message and one still held.
	var shared map[uint64]bool
	if len(r.doomed) > 0 {
		at := make(map[uint64]bool, len(r.doomed))
		for _, l := range r.doomed {
			at[l.sseq] = true
		}
		for _, l := range r.held {
			if l.pend == nil && at[l.sseq] {
				if shared == nil {
					shared = map[uint64]bool{}
				}
				shared[l.sseq] = true
			}
		}
	}
	var gone, kept []loc
	var mark []uint64
	for _, l := range r.doomed {
		switch {
		case l.pend != nil || shared[l.sseq]: // not acknowledged (discarded meanwhile), or in a pack still held
			kept = append(kept, l)
			if all && l.pend == nil && !l.marked {
				mark = append(mark, l.seq)
			}
		default:
			gone = append(gone, l)
		}
	}
	// One purge of the subject below the last discarded message takes them all
	// when every message still held sits after it (and is acknowledged).
	var top uint64
	sseqs := make([]uint64, 0, len(gone)) // of the stream messages to delete, each once
	for _, l := range gone {
		top = max(top, l.sseq)
		sseqs = append(sseqs, l.sseq)
	}
	slices.Sort(sseqs)
	sseqs = slices.Compact(sseqs)
	prefix := true
	for _, l := range r.held {
		if l.pend != nil || l.sseq < top {
			prefix = false
			break
		}
	}
	below := top + 1
	if len(sseqs) > 1 && prefix && !all {
		for _, l := range gone {
			if l.sseq == top {
				kept = append(kept, l)
			}
		}
		below = top
	}
	r.doomed, r.kept = kept, len(kept)
	s.mu.Unlock()
	// undo puts back in the index what a deletion that failed left in the
	// stream (from stream sequence from on), for the next sweep.
	undo := func(from uint64) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.reqs[h] != r {
			return
		}
		there := make(map[uint64]bool, len(r.doomed))
		for _, l := range r.doomed {
			there[l.seq] = true
		}
		for _, l := range gone {
			if l.sseq >= from && !there[l.seq] {
				r.doomed = append(r.doomed, l)
			}
		}
	}
	if len(sseqs) > 1 && prefix {
		err := s.retry(ctx, func(ctx context.Context) error {
			return s.stream.Purge(ctx, jetstream.WithPurgeSubject(s.subject(h)), jetstream.WithPurgeSequence(below))
		})
		if err != nil {
			undo(0)
			return fmt.Errorf("jsstore: purging %d messages of %s: %w", len(gone), key(h)[:12], err)
		}
	} else {
		i := 0 // the next to delete, kept across tries
		err := s.retry(ctx, func(ctx context.Context) error {
			for ; i < len(sseqs); i++ {
				if err := s.deleteMsg(ctx, sseqs[i]); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			undo(sseqs[i])
			return fmt.Errorf("jsstore: deleting the message at %d of %s: %w", sseqs[i], key(h)[:12], err)
		}
	}
	if len(mark) == 0 {
		return nil
	}
	return s.markDropped(ctx, h, mark)
}

// deleteMsg deletes the message at stream sequence sseq from the stream; one
// that is not there (deleted by a purge meanwhile: a message discarded while
// its publish was unacknowledged, which an earlier purge took) is no error.
// (The client's DeleteMsg says so only in its error's text.)
func (s *Store) deleteMsg(ctx context.Context, sseq uint64) error {
	body, _ := json.Marshal(struct {
		Seq     uint64 `json:"seq"`
		NoErase bool   `json:"no_erase"`
	}{sseq, true})
	m, err := s.js.Conn().RequestWithContext(ctx, s.api+"STREAM.MSG.DELETE."+s.opts.Stream, body)
	if err != nil {
		return err
	}
	var resp struct {
		Success bool      `json:"success"`
		Error   *apiError `json:"error"`
	}
	if err := json.Unmarshal(m.Data, &resp); err != nil {
		return fmt.Errorf("jsstore: deleting from %s: %w", s.opts.Stream, err)
	}
	switch e := resp.Error; {
	case resp.Success:
		return nil
	case e == nil:
		return fmt.Errorf("jsstore: deleting from %s: not done", s.opts.Stream)
	case e.ErrCode == int(jetstream.JSErrCodeMessageNotFound), e.ErrCode == jsErrSequenceNotFound,
		e.ErrCode == jsErrMsgDeleteFailed && e.Description == "no message found":
		return nil
	default:
		return &jetstream.APIError{Code: e.Code, ErrorCode: jetstream.ErrorCode(e.ErrCode), Description: e.Description}
	}
}

// The server's error codes of a deletion of a message that is not there:
// "sequence N not found" (the store had none), and the deletion failed with
// the store's "no message found".
const (
	jsErrSequenceNotFound = 10043
	jsErrMsgDeleteFailed  = 10057
)

// markDropped stores the stream message that says request h's messages seqs
// are discarded (messages that packs still holding others keep in the
// stream), and notes in the index that it is stored.
func (s *Store) markDropped(ctx context.Context, h resume.TokenHash, seqs []uint64) error {
	slices.Sort(seqs)
	// Unique: a message is marked once (a later process's index leaves it
	// out), and a mark that failed is made again with more.
	msgID := key(h) + ".d" + strconv.FormatUint(seqs[0], 10) + "-" + strconv.FormatUint(seqs[len(seqs)-1], 10) + "." + strconv.Itoa(len(seqs))
	msg := &nats.Msg{Subject: s.subject(h), Data: encodeDropped(seqs), Header: nats.Header{jetstream.MsgIDHeader: []string{msgID}}}
	err := s.retry(ctx, func(ctx context.Context) error {
		_, err := s.js.PublishMsg(ctx, msg, noRetry)
		return err
	})
	if err != nil {
		return fmt.Errorf("jsstore: storing that %d messages of %s are discarded: %w", len(seqs), key(h)[:12], err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.reqs[h]; r != nil {
		for i := range r.doomed {
			if _, ok := slices.BinarySearch(seqs, r.doomed[i].seq); ok {
				r.doomed[i].marked = true
			}
		}
	}
	return nil
}

// Delete purges the request's key's subject from the bucket's stream, then its
// subject from the stream. Neither leaves a marker behind (kv.Delete and kv.Purge
// would leave one per key until PurgeDeletes). A purge is kept across a crash of
// the server (it leaves a tombstone per message in the stream's files, or
// removes a block that it empties), and the
// key holds no earlier revision that a crash could bring back (see write): once
// Delete has returned, no later process finds the request. The record goes
// first, so that a crash between the two purges leaves messages that no record
// names (nothing reads them; they age out after Options.MaxAge), never a record
// whose messages are gone. A request whose purge fails (NATS unreachable for
// longer than Options.OutageWait) is purged again by the next Deletes that
// succeed, a few at a time, one try each: else its record would stay until
// MaxAge, and the next process would recover it. A request kept in memory
// alone (Options.DeliveredInMemory) is forgotten, with no call to NATS.
func (s *Store) Delete(ctx context.Context, h resume.TokenHash) error {
	// A message not sent yet never is; a publish still unacknowledged would
	// land after the purge.
	s.mu.Lock()
	lost := false
	r := s.reqs[h]
	if r != nil {
		for _, p := range r.unsent {
			p.drop()
		}
		r.gen++
		r.unwritten, r.shown = nil, nil
		if r.volatile {
			// Nothing of it was written, nor will be (see Delivered): a
			// flush that finds it now finds nothing to write.
			delete(s.reqs, h)
			s.mu.Unlock()
			return nil
		}
		if lost = r.lost; lost { // nothing of it to wait for: its subject is purged
			r.held, r.doomed, r.kept = nil, nil, 0
		}
	}
	s.mu.Unlock()
	var err error
	if !lost {
		err = s.settle(ctx, h)
	}
	var writing chan struct{}
	if r != nil {
		// A flush writing the request's record finishes first (it holds fmu),
		// and a final record it writes behind lands first: neither may land
		// after the purge.
		r.fmu.Lock()
		//lint:ignore SA2001 a barrier: the lock is taken only to wait for the flush that holds it
		r.fmu.Unlock()
		s.mu.Lock()
		writing = r.writing
		s.mu.Unlock()
	}
	if writing != nil {
		select {
		case <-writing:
		case <-ctx.Done():
		}
	}
	// Read once settle has sent and stored what an Append slipped in
	// meanwhile. One whose record was never written (fresh) has not learned
	// whether an earlier process left messages under its token (a create
	// that finds a record says so): its subject is purged too.
	s.mu.Lock()
	bare := r != nil && s.reqs[h] == r && r.bare && !r.fresh
	s.mu.Unlock()
	if err == nil {
		err = s.retry(ctx, func(ctx context.Context) error { return s.purge(ctx, h, !bare) })
	}
	s.mu.Lock()
	// Forgotten last, so that a Replay meanwhile finds nothing in the stream
	// instead of loading the request again.
	delete(s.reqs, h)
	var again []resume.TokenHash
	if err != nil {
		s.undeleted[h] = struct{}{}
	} else {
		for u := range s.undeleted {
			if len(again) == 16 {
				break
			}
			again = append(again, u)
			delete(s.undeleted, u)
		}
	}
	s.mu.Unlock()
	if err != nil {
		return fmt.Errorf("jsstore: deleting %s: %w", key(h)[:12], err)
	}
	for _, u := range again {
		if err := s.purge(ctx, u, true); err != nil {
			s.mu.Lock()
			s.undeleted[u] = struct{}{}
			s.mu.Unlock()
		}
	}
	return nil
}

// purge removes request h's record, then its messages unless messages is
// false (its subject holds none: see request.bare).
func (s *Store) purge(ctx context.Context, h resume.TokenHash, messages bool) error {
	if err := s.kvs.Purge(ctx, jetstream.WithPurgeSubject("$KV."+s.opts.Bucket+"."+key(h))); err != nil {
		return fmt.Errorf("purging its record: %w", err)
	}
	if !messages {
		return nil
	}
	if err := s.stream.Purge(ctx, jetstream.WithPurgeSubject(s.subject(h))); err != nil {
		return fmt.Errorf("purging its messages: %w", err)
	}
	return nil
}
