package jsstore

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcp-resume/mcp-resume/resume"
)

// Records: a request's state in the KV bucket (Put, Get, Claim, Records), written
// at once or deferred to the write-behind, read from the leader where it must be.

// Put creates or replaces a record. A record created here starts a request that
// has no message yet, so its index is complete from the start. A record this
// store already knows (a request's final state) is replaced in one write.
//
// A record is replaced only while rec.Owner owns it (resume.ErrClaimed
// otherwise): each write expects the revision this store last wrote or read, and
// when another write came between, the record is read again and its owner
// checked. That fences an instance cut off from NATS for longer than its lease,
// whose requests another instance claimed meanwhile, out of their records in the
// moments before it finds its lease gone.
func (s *Store) Put(ctx context.Context, rec resume.Record) error {
	if err := s.lostErr(rec.Hash); err != nil {
		return err
	}
	if s.opts.DeferRecords && s.deferRecord(rec) {
		return nil // processing, or ended before its first record was written
	}
	s.mu.Lock()
	r := s.reqs[rec.Hash]
	fresh := r != nil && r.fresh
	if r != nil {
		r.gen++
		r.unwritten = nil // this one replaces it
		if fresh {
			r.shown = &rec
		}
	}
	s.mu.Unlock()
	if rec.State.Ended() {
		if fresh {
			return s.putFresh(ctx, rec, r)
		}
		// The durability point of a request's messages: its final state is
		// stored only after them, and after the deletion of those it
		// discarded (a later process recovers it as it is now).
		if err := s.sweep(ctx, rec.Hash, true); err != nil {
			return err
		}
		if err := s.lostErr(rec.Hash); err != nil { // while it waited
			return err
		}
	}
	return s.putNow(ctx, rec)
}

// deferRecord keeps rec to be written with the request's waiting messages
// (flush), when no record of the request was written yet (processing, or
// ended before that); it reports whether it did.
func (s *Store) deferRecord(rec resume.Record) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, known := s.reqs[rec.Hash]
	switch {
	case !known:
		r = &request{loaded: true, fresh: true, bare: true}
		s.reqs[rec.Hash] = r
	case !r.fresh:
		return false
	}
	// While the request's first record is being written (fresh), a newer one
	// waits for the flush after it, in order.
	r.gen++
	r.unwritten, r.shown, r.owner = &rec, &rec, rec.Owner
	r.volatile = false // written as any other from now on
	s.dirtyLocked(rec.Hash)
	return true
}

// kvMsg is the publish that writes val as key k's revision after rev.
func (s *Store) kvMsg(k string, val []byte, rev uint64) *nats.Msg {
	subj := "$KV." + s.opts.Bucket + "." + k
	if s.api != jetstream.DefaultAPIPrefix { // as the KV client does through a domain or prefix
		subj = s.api + subj
	}
	m := &nats.Msg{Subject: subj, Data: val}
	if rev != 0 { // else there is no earlier revision (or a delete marker, see create)
		m.Header = nats.Header{jetstream.MsgRollup: []string{jetstream.MsgRollupSubject}}
	}
	return m
}

// putFresh writes rec, the final state of a request whose record was never
// written (DeferRecords), together with its waiting messages: its record is
// published beside them, not after their acknowledgements, and Put returns once
// all are stored. A crash before that may leave the record without its last
// messages, as it would leave the request unknown had the record waited; once
// Put has returned, the request is stored exactly. Anything unusual (the key
// has an older revision, a publish fails) falls back to putNow.
func (s *Store) putFresh(ctx context.Context, rec resume.Record, r *request) error {
	h := rec.Hash
	r.fmu.Lock() // after a flush writing its first record, if one is
	s.mu.Lock()
	fresh, gen := r.fresh, r.gen
	var units []*pending
	if fresh {
		units = s.packLocked(h, r, r.unsent)
		r.unsent = nil
	}
	s.mu.Unlock()
	if !fresh { // written meanwhile: replaced as any other
		r.fmu.Unlock()
		if err := s.sweep(ctx, h, true); err != nil {
			return err
		}
		return s.putNow(ctx, rec)
	}
	for _, p := range units { // the messages go out first
		s.publish(context.Background(), p)
	}
	fut, err := s.js.PublishMsgAsync(s.kvMsg(key(h), encodeRecord(rec), 0), jetstream.WithExpectLastSequencePerSubject(0))
	r.fmu.Unlock()
	if err := s.sweep(ctx, h, true); err != nil {
		return err
	}
	var rev uint64
	if err == nil {
		t := time.NewTimer(s.timeout)
		select {
		case ack := <-fut.Ok():
			rev = ack.Sequence
		case <-fut.Err():
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
	if rev == 0 {
		err = s.putNow(ctx, rec)
	}
	s.mu.Lock()
	if rev != 0 {
		r.rev, r.owner, r.fresh = rev, rec.Owner, false
	}
	if r.gen == gen {
		r.shown = nil
	}
	s.mu.Unlock()
	return err
}

// putNow writes rec.
func (s *Store) putNow(ctx context.Context, rec resume.Record) error {
	val := encodeRecord(rec)
	s.mu.Lock()
	var rev uint64
	r, known := s.reqs[rec.Hash]
	if known && r.fresh {
		known = false // created, not replaced
	}
	if known && r.owner == rec.Owner {
		rev = r.rev // else 0: read and check the owner first
	}
	s.mu.Unlock()
	var err error
	fresh := false
	if known {
		rev, err = s.replace(ctx, rec, val, rev)
	} else {
		rev, err = s.create(ctx, key(rec.Hash), val)
		fresh = err == nil
		if errors.Is(err, errStale) {
			rev, err = s.replace(ctx, rec, val, 0)
		}
		if !fresh {
			// The record was there already (a request run again after a
			// restart), or may be (the create failed): so may its messages.
			s.mu.Lock()
			if r := s.reqs[rec.Hash]; r != nil {
				r.bare = false
			}
			s.mu.Unlock()
		}
	}
	if err != nil {
		s.suspect(err)
		return fmt.Errorf("jsstore: putting record %s: %w", key(rec.Hash)[:12], err)
	}
	s.mu.Lock()
	r = s.reqs[rec.Hash]
	if r == nil {
		r = &request{loaded: fresh, bare: fresh} // made, not found: nothing was appended to it
		s.reqs[rec.Hash] = r
	}
	r.rev, r.owner, r.fresh = rev, rec.Owner, false
	s.mu.Unlock()
	return nil
}

// replace writes val, rec's encoding, over the record that exists, expecting
// revision rev (0: unknown), and returns the new revision. When the record
// changed since rev, it is read again: owned by another instance than rec.Owner,
// it is left as it is (resume.ErrClaimed); gone, it is created again, unless it
// was this store's to write at rev (then another instance deleted it:
// resume.ErrClaimed).
func (s *Store) replace(ctx context.Context, rec resume.Record, val []byte, rev uint64) (uint64, error) {
	k := key(rec.Hash)
	for range 3 {
		if rev != 0 {
			n, err := s.write(ctx, k, val, rev)
			if !errors.Is(err, errStale) {
				return n, err
			}
		}
		cur, curRev, err := s.get(ctx, rec.Hash)
		switch {
		case errors.Is(err, resume.ErrNotFound) && rev != 0:
			// Written here, deleted elsewhere (this store's Delete forgets
			// the revision): by an instance that claimed it and let it go.
			return 0, fmt.Errorf("deleted by another instance: %w", resume.ErrClaimed)
		case errors.Is(err, resume.ErrNotFound):
			n, err := s.create(ctx, k, val)
			if !errors.Is(err, errStale) {
				return n, err
			}
			continue // created meanwhile
		case err != nil:
			return 0, err
		case cur.Owner != rec.Owner:
			return 0, fmt.Errorf("owned by %q, not %q: %w", cur.Owner, rec.Owner, resume.ErrClaimed)
		}
		rev = curRev
	}
	return 0, errors.New("the record kept changing")
}

// errStale: a write expected a revision of the record that is not its last.
var errStale = errors.New("the record's revision changed")

// write stores val under key k, expecting rev as its last revision (0: none),
// and returns the new revision, or errStale. It is the bucket's put, with a
// rollup: the server purges every earlier revision of the key as it stores this
// one, leaving a tombstone for each in the stream's files, so that none is ever
// dropped for the history limit (see recordHistory).
func (s *Store) write(ctx context.Context, k string, val []byte, rev uint64) (uint64, error) {
	ack, err := s.js.PublishMsg(ctx, s.kvMsg(k, val, rev), jetstream.WithExpectLastSequencePerSubject(rev))
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant) {
		return 0, fmt.Errorf("%w (not %d)", errStale, rev)
	}
	if err != nil {
		return 0, err
	}
	return ack.Sequence, nil
}

// create writes val as a new record under key k: errStale when the key holds a
// record. A delete marker that a KV client left there (this store leaves none)
// counts as no record.
func (s *Store) create(ctx context.Context, k string, val []byte) (uint64, error) {
	rev, err := s.write(ctx, k, val, 0)
	if !errors.Is(err, errStale) {
		return rev, err
	}
	last, gerr := s.kvs.GetLastMsgForSubject(ctx, "$KV."+s.opts.Bucket+"."+k)
	if gerr != nil || (last.Header.Get("KV-Operation") != "DEL" && last.Header.Get("KV-Operation") != "PURGE") {
		return 0, err
	}
	return s.write(ctx, k, val, last.Sequence)
}

// Get returns a record from the bucket.
func (s *Store) Get(ctx context.Context, h resume.TokenHash) (*resume.Record, error) {
	s.mu.Lock()
	if r := s.reqs[h]; r != nil && r.shown != nil {
		rec := *r.shown
		s.mu.Unlock()
		return &rec, nil
	}
	s.mu.Unlock()
	rec, _, err := s.get(ctx, h)
	return rec, err
}

// get reads a record and the revision of its key.
func (s *Store) get(ctx context.Context, h resume.TokenHash) (*resume.Record, uint64, error) {
	e, err := s.kv.Get(ctx, key(h))
	if errors.Is(err, jetstream.ErrKeyNotFound) && s.replicated {
		return s.getFromLeader(ctx, h)
	}
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, resume.ErrNotFound
	}
	if err != nil {
		return nil, 0, fmt.Errorf("jsstore: getting record %s: %w", key(h)[:12], err)
	}
	rec, err := decodeRecord(h, e.Value())
	if err != nil {
		return nil, 0, unreadable(e.Key(), err)
	}
	return rec, e.Revision(), nil
}

// getFromLeader is get through the bucket's leader: a replica answers a KV get,
// and one that lags the leader does not have a record written a moment ago (a
// request started on another instance, looked up here at once).
func (s *Store) getFromLeader(ctx context.Context, h resume.TokenHash) (*resume.Record, uint64, error) {
	subj := "$KV." + s.opts.Bucket + "." + key(h)
	m, err := s.leaderRead(ctx, "KV_"+s.opts.Bucket, struct {
		LastBySubj string `json:"last_by_subj"`
	}{subj})
	if errors.Is(err, jetstream.ErrMsgNotFound) || (err == nil && (bytes.Contains(m.Header, []byte("KV-Operation: DEL")) || bytes.Contains(m.Header, []byte("KV-Operation: PURGE")))) {
		return nil, 0, resume.ErrNotFound
	}
	if err != nil {
		return nil, 0, fmt.Errorf("jsstore: getting record %s: %w", key(h)[:12], err)
	}
	rec, err := decodeRecord(h, m.Data)
	if err != nil {
		return nil, 0, unreadable(key(h), err)
	}
	return rec, m.Seq, nil
}

// Records reads every record from the bucket in one pass (a watcher that stops
// after the current values). A value it cannot decode is yielded as an error
// wrapping resume.ErrUnreadable, and the pass goes on; keys that are not token
// hashes are not ours and are passed over. Starting the watcher waits for NATS as a write does
// (Options.OutageWait); once started, it fails if no record comes for that long.
func (s *Store) Records(ctx context.Context) iter.Seq2[resume.Record, error] {
	return func(yield func(resume.Record, error) bool) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		var w jetstream.KeyWatcher
		err := s.retry(ctx, func(context.Context) error {
			// Not the try's context: the watcher stops with the one it is given
			// (the client bounds creating it by its default timeout).
			var err error
			w, err = s.kv.WatchAll(ctx, jetstream.IgnoreDeletes())
			return err
		})
		if err != nil {
			yield(resume.Record{}, fmt.Errorf("jsstore: listing records: %w", err))
			return
		}
		defer func() { _ = w.Stop() }()
		stall := time.NewTimer(s.opts.OutageWait)
		defer stall.Stop()
		for {
			var e jetstream.KeyValueEntry
			open := true
			select {
			case e, open = <-w.Updates():
			case <-stall.C:
				yield(resume.Record{}, fmt.Errorf("jsstore: listing records: none came for %s", s.opts.OutageWait))
				return
			case <-ctx.Done():
				yield(resume.Record{}, fmt.Errorf("jsstore: listing records: %w", ctx.Err()))
				return
			}
			switch {
			case !open: // not the end of the current values: the watcher stopped
				yield(resume.Record{}, errors.New("jsstore: listing records: the watcher stopped"))
				return
			case e == nil:
				return // the current values are done
			}
			stall.Reset(s.opts.OutageWait)
			var h resume.TokenHash
			if n, err := hex.Decode(h[:], []byte(e.Key())); err != nil || n != len(h) {
				continue // not one of ours
			}
			rec, err := decodeRecord(h, e.Value())
			if err != nil {
				if !yield(resume.Record{}, unreadable(e.Key(), err)) {
					return
				}
				continue
			}
			if !yield(*rec, nil) {
				return
			}
		}
	}
}

// unreadable is the error for the record under key that decodeRecord refused.
func unreadable(key string, err error) error {
	return fmt.Errorf("jsstore: record %s: %w: %w", key[:12], resume.ErrUnreadable, err)
}

// Claim moves a record to a new owner with a compare-and-set on the key's
// revision: of racing claims, the first update wins and the others see a newer
// revision (or another owner) and get resume.ErrClaimed.
func (s *Store) Claim(ctx context.Context, h resume.TokenHash, from, to string) (*resume.Record, error) {
	rec, rev, err := s.get(ctx, h)
	if err != nil {
		return nil, err
	}
	if rec.Owner != from {
		return nil, resume.ErrClaimed
	}
	rec.Owner = to
	rev, err = s.write(ctx, key(h), encodeRecord(*rec), rev)
	if err != nil {
		if errors.Is(err, errStale) {
			return nil, resume.ErrClaimed
		}
		return nil, fmt.Errorf("jsstore: claiming record %s: %w", key(h)[:12], err)
	}
	s.mu.Lock()
	if r := s.reqs[h]; r != nil {
		r.rev, r.owner = rev, to
		r.bare = false // others may have written to it meanwhile
	}
	s.mu.Unlock()
	return rec, nil
}
