package jsstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

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
	if err := s.finished(ctx, h); err != nil {
		return err
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
	full := len(r.doomed) >= discardBatch
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
func (s *Store) Sweep(ctx context.Context, h resume.TokenHash) error {
	if err := s.finished(ctx, h); err != nil {
		return err
	}
	return s.sweep(ctx, h, true)
}

// sweep deletes request h's discarded messages from the stream, once every
// message indexed is stored; all of them, or (for a Discard's batch) all but the
// newest when one purge takes them: that one stays in the stream, still
// discarded, until the next sweep. A purge that empties the stream's last block
// makes the server remove the block's file and create a new one for the next
// message, which a request streaming alone would pay at every batch.
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
	gone := r.doomed
	r.doomed = nil
	// One purge of the subject below the last discarded message takes them all
	// when every message still held sits after it (and is acknowledged).
	var top uint64
	for _, l := range gone {
		top = max(top, l.sseq)
	}
	prefix := true
	for _, l := range r.held {
		if l.pend != nil || l.sseq < top {
			prefix = false
			break
		}
	}
	below := top + 1
	if len(gone) > 1 && prefix && !all {
		i := slices.IndexFunc(gone, func(l loc) bool { return l.sseq == top })
		r.doomed = append(r.doomed, gone[i])
		below = top
	}
	s.mu.Unlock()
	if len(gone) > 1 && prefix {
		err := s.retry(ctx, func(ctx context.Context) error {
			return s.stream.Purge(ctx, jetstream.WithPurgeSubject(s.subject(h)), jetstream.WithPurgeSequence(below))
		})
		if err != nil {
			return fmt.Errorf("jsstore: purging %d messages of %s: %w", len(gone), key(h)[:12], err)
		}
		return nil
	}
	i := 0 // the next to delete, kept across tries
	err := s.retry(ctx, func(ctx context.Context) error {
		for ; i < len(gone); i++ {
			if err := s.stream.DeleteMsg(ctx, gone[i].sseq); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("jsstore: deleting message %d of %s: %w", gone[i].seq, key(h)[:12], err)
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
// MaxAge, and the next process would recover it.
func (s *Store) Delete(ctx context.Context, h resume.TokenHash) error {
	if err := s.finished(ctx, h); err != nil {
		return fmt.Errorf("jsstore: deleting %s: %w", key(h)[:12], err)
	}
	// A message not sent yet never is; a publish still unacknowledged would
	// land after the purge.
	s.mu.Lock()
	lost := false
	if r := s.reqs[h]; r != nil {
		for _, p := range r.unsent {
			p.drop()
		}
		r.gen++
		r.unwritten, r.shown = nil, nil
		if lost = r.lost; lost { // nothing of it to wait for: its subject is purged
			r.held, r.doomed = nil, nil
		}
	}
	s.mu.Unlock()
	var err error
	if !lost {
		err = s.settle(ctx, h)
	}
	if err == nil {
		err = s.retry(ctx, func(ctx context.Context) error { return s.purge(ctx, h) })
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
		if err := s.purge(ctx, u); err != nil {
			s.mu.Lock()
			s.undeleted[u] = struct{}{}
			s.mu.Unlock()
		}
	}
	return nil
}

// purge removes request h's record, then its messages.
func (s *Store) purge(ctx context.Context, h resume.TokenHash) error {
	if err := s.kvs.Purge(ctx, jetstream.WithPurgeSubject("$KV."+s.opts.Bucket+"."+key(h))); err != nil {
		return fmt.Errorf("purging its record: %w", err)
	}
	if err := s.stream.Purge(ctx, jetstream.WithPurgeSubject(s.subject(h))); err != nil {
		return fmt.Errorf("purging its messages: %w", err)
	}
	return nil
}
