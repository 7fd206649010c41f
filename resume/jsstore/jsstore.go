package jsstore

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"iter"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcp-resume/mcp-resume/resume"
)

// Options configure a Store. The zero value of each field means its default.
type Options struct {
	// Stream names the stream of queued messages. Default "MCP_RESUME".
	Stream string
	// Subject prefixes the per-request subjects: <Subject>.<token hash, hex>.
	// Default "mr.msg".
	Subject string
	// Bucket names the KV bucket of records. Default "mcp-resume".
	Bucket string
	// Memory keeps the stream and the bucket in memory instead of on disk.
	Memory bool
	// Replicas of the stream and the bucket (a cluster). Default 1.
	Replicas int
	// MaxAge bounds how long a message or a record is kept: a safety net for the
	// ones no process deletes (an instance gone for good). It must exceed the
	// longest a request runs plus its retention. Default 24 hours.
	MaxAge time.Duration
	// Duplicates is the stream's deduplication window, which makes the one retry
	// of a publish whose acknowledgement was lost idempotent. JetStream keeps every
	// message id for this long, so it stays short. Default 30 seconds.
	Duplicates time.Duration
}

func (o *Options) withDefaults() Options {
	var v Options
	if o != nil {
		v = *o
	}
	if v.Stream == "" {
		v.Stream = "MCP_RESUME"
	}
	if v.Subject == "" {
		v.Subject = "mr.msg"
	}
	if v.Bucket == "" {
		v.Bucket = "mcp-resume"
	}
	if v.Replicas <= 0 {
		v.Replicas = 1
	}
	if v.MaxAge <= 0 {
		v.MaxAge = 24 * time.Hour
	}
	if v.Duplicates <= 0 {
		v.Duplicates = 30 * time.Second
	}
	v.Duplicates = min(v.Duplicates, v.MaxAge)
	return v
}

// Store is a resume.Store on JetStream. It is safe for concurrent use.
type Store struct {
	opts   Options
	stream jetstream.Stream    // queued messages
	kv     jetstream.KeyValue  // records
	kvs    jetstream.Stream    // the bucket's own stream, for deleting a key without a marker
	js     jetstream.JetStream // for publishing

	mu   sync.Mutex // guards reqs and every request's fields
	reqs map[resume.TokenHash]*request
}

// request is what this process knows of a request's messages: where each one
// sits in the stream. A request is in reqs once it is known to exist (put by this
// process, or found in the bucket); its index is complete once loaded.
type request struct {
	loaded bool
	held   []loc // ascending seq (and so ascending stream sequence)
}

// loc places one message: its sequence number in the request, and in the stream.
type loc struct{ seq, sseq uint64 }

var _ resume.Store = (*Store)(nil)

// New returns a store on js, creating its stream and bucket, or updating their
// configuration to opts.
func New(ctx context.Context, js jetstream.JetStream, opts *Options) (*Store, error) {
	o := opts.withDefaults()
	storage := jetstream.FileStorage
	if o.Memory {
		storage = jetstream.MemoryStorage
	}
	stream, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        o.Stream,
		Description: "mcp-resume: queued messages of resumable requests, one subject per request",
		Subjects:    []string{o.Subject + ".*"},
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardOld,
		MaxAge:      o.MaxAge,
		Duplicates:  o.Duplicates,
		Storage:     storage,
		Replicas:    o.Replicas,
		AllowDirect: true,
	})
	if err != nil {
		return nil, fmt.Errorf("jsstore: stream %s: %w", o.Stream, err)
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      o.Bucket,
		Description: "mcp-resume: records of resumable requests, keyed by token hash",
		History:     1,
		TTL:         o.MaxAge,
		Storage:     storage,
		Replicas:    o.Replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("jsstore: bucket %s: %w", o.Bucket, err)
	}
	kvs, err := js.Stream(ctx, "KV_"+o.Bucket)
	if err != nil {
		return nil, fmt.Errorf("jsstore: the stream of bucket %s: %w", o.Bucket, err)
	}
	return &Store{opts: o, stream: stream, kv: kv, kvs: kvs, js: js, reqs: make(map[resume.TokenHash]*request)}, nil
}

// Stream returns the stream of queued messages (for inspection: its state).
func (s *Store) Stream() jetstream.Stream { return s.stream }

// Bucket returns the bucket of records (for inspection).
func (s *Store) Bucket() jetstream.KeyValue { return s.kv }

func key(h resume.TokenHash) string { return hex.EncodeToString(h[:]) }

func (s *Store) subject(h resume.TokenHash) string { return s.opts.Subject + "." + key(h) }

// Put creates or replaces a record. A record created here starts a request that
// has no message yet, so its index is complete from the start.
func (s *Store) Put(ctx context.Context, rec resume.Record) error {
	val := encodeRecord(rec)
	_, err := s.kv.Create(ctx, key(rec.Hash), val)
	fresh := err == nil
	if errors.Is(err, jetstream.ErrKeyExists) {
		_, err = s.kv.Put(ctx, key(rec.Hash), val)
	}
	if err != nil {
		return fmt.Errorf("jsstore: putting record %s: %w", key(rec.Hash)[:12], err)
	}
	s.mu.Lock()
	if _, ok := s.reqs[rec.Hash]; !ok {
		s.reqs[rec.Hash] = &request{loaded: fresh}
	}
	s.mu.Unlock()
	return nil
}

// Get returns a record from the bucket.
func (s *Store) Get(ctx context.Context, h resume.TokenHash) (*resume.Record, error) {
	e, err := s.kv.Get(ctx, key(h))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, resume.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("jsstore: getting record %s: %w", key(h)[:12], err)
	}
	rec, err := decodeRecord(h, e.Value())
	if err != nil {
		return nil, fmt.Errorf("jsstore: record %s: %w", key(h)[:12], err)
	}
	return rec, nil
}

// Append publishes a message on the request's subject and waits for the stream to
// acknowledge it. A publish whose acknowledgement does not come is sent once more
// with the same message id, which the stream's deduplication window absorbs.
func (s *Store) Append(ctx context.Context, h resume.TokenHash, m resume.Message) error {
	if err := s.ensure(ctx, h); err != nil {
		return err
	}
	subj := s.subject(h)
	data := encodeMessage(m)
	id := jetstream.WithMsgID(key(h) + "." + fmt.Sprint(m.Seq))
	ack, err := s.js.Publish(ctx, subj, data, id)
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		ack, err = s.js.Publish(ctx, subj, data, id)
	}
	if err != nil {
		return fmt.Errorf("jsstore: publishing message %d of %s: %w", m.Seq, key(h)[:12], err)
	}
	s.mu.Lock()
	if r := s.reqs[h]; r != nil && r.loaded {
		r.held = append(r.held, loc{m.Seq, ack.Sequence})
	}
	s.mu.Unlock()
	return nil
}

// Discard deletes messages from the stream. A run of messages at the head of the
// request's queue goes in one subject purge, others one by one.
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
	if r == nil {
		s.mu.Unlock()
		return nil
	}
	drop := make(map[uint64]bool, len(seqs))
	for _, q := range seqs {
		drop[q] = true
	}
	var gone []loc
	prefix := 0 // how many of the oldest held messages go
	for i, l := range r.held {
		if drop[l.seq] {
			gone = append(gone, l)
			if prefix == i {
				prefix++
			}
		}
	}
	r.held = slices.DeleteFunc(r.held, func(l loc) bool { return drop[l.seq] })
	s.mu.Unlock()

	if len(gone) > 1 && prefix == len(gone) {
		err := s.stream.Purge(ctx, jetstream.WithPurgeSubject(s.subject(h)), jetstream.WithPurgeSequence(gone[len(gone)-1].sseq+1))
		if err != nil {
			return fmt.Errorf("jsstore: purging %d messages of %s: %w", len(gone), key(h)[:12], err)
		}
		return nil
	}
	for _, l := range gone {
		if err := s.stream.DeleteMsg(ctx, l.sseq); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
			return fmt.Errorf("jsstore: deleting message %d of %s: %w", l.seq, key(h)[:12], err)
		}
	}
	return nil
}

// Replay reads the request's messages after a sequence number from the stream,
// one direct get each, up to the last one this process knew of at the call.
func (s *Store) Replay(ctx context.Context, h resume.TokenHash, after uint64) iter.Seq2[resume.Message, error] {
	return func(yield func(resume.Message, error) bool) {
		if err := s.ensure(ctx, h); err != nil {
			yield(resume.Message{}, err)
			return
		}
		s.mu.Lock()
		r := s.reqs[h]
		if r == nil { // deleted meanwhile
			s.mu.Unlock()
			yield(resume.Message{}, resume.ErrNotFound)
			return
		}
		i, _ := slices.BinarySearchFunc(r.held, after+1, func(l loc, seq uint64) int { return cmpU64(l.seq, seq) })
		if i == len(r.held) {
			s.mu.Unlock()
			return
		}
		from, last := r.held[i].sseq, r.held[len(r.held)-1].sseq
		s.mu.Unlock()
		subj := s.subject(h)
		for from <= last {
			raw, err := s.stream.GetMsg(ctx, from, jetstream.WithGetMsgSubject(subj))
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				return // everything after was discarded, or the request deleted
			}
			if err != nil {
				yield(resume.Message{}, fmt.Errorf("jsstore: reading %s at %d: %w", key(h)[:12], from, err))
				return
			}
			if raw.Sequence > last {
				return
			}
			from = raw.Sequence + 1
			m, err := decodeMessage(raw.Data)
			if err != nil {
				yield(resume.Message{}, fmt.Errorf("jsstore: message at %d: %w", raw.Sequence, err))
				return
			}
			if m.Seq <= after {
				continue
			}
			if !yield(m, nil) {
				return
			}
		}
	}
}

// Delete purges the request's subject from the stream and its key's subject from
// the bucket's stream. Neither leaves a marker behind (kv.Delete and kv.Purge would
// leave one per key until PurgeDeletes).
func (s *Store) Delete(ctx context.Context, h resume.TokenHash) error {
	// Forgotten last, so that a Replay meanwhile finds nothing in the stream
	// instead of loading the request again.
	defer func() {
		s.mu.Lock()
		delete(s.reqs, h)
		s.mu.Unlock()
	}()
	if err := s.stream.Purge(ctx, jetstream.WithPurgeSubject(s.subject(h))); err != nil {
		return fmt.Errorf("jsstore: purging the messages of %s: %w", key(h)[:12], err)
	}
	if err := s.kvs.Purge(ctx, jetstream.WithPurgeSubject("$KV."+s.opts.Bucket+"."+key(h))); err != nil {
		return fmt.Errorf("jsstore: purging record %s: %w", key(h)[:12], err)
	}
	return nil
}

// Records reads every record from the bucket in one pass (a watcher that stops
// after the current values).
func (s *Store) Records(ctx context.Context) iter.Seq2[resume.Record, error] {
	return func(yield func(resume.Record, error) bool) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		w, err := s.kv.WatchAll(ctx, jetstream.IgnoreDeletes())
		if err != nil {
			yield(resume.Record{}, fmt.Errorf("jsstore: listing records: %w", err))
			return
		}
		defer func() { _ = w.Stop() }()
		for {
			var e jetstream.KeyValueEntry
			select {
			case e = <-w.Updates():
			case <-ctx.Done():
				yield(resume.Record{}, fmt.Errorf("jsstore: listing records: %w", ctx.Err()))
				return
			}
			if e == nil {
				return // the current values are done
			}
			var h resume.TokenHash
			if n, err := hex.Decode(h[:], []byte(e.Key())); err != nil || n != len(h) {
				continue // not one of ours
			}
			rec, err := decodeRecord(h, e.Value())
			if err != nil {
				if !yield(resume.Record{}, fmt.Errorf("jsstore: record %s: %w", e.Key()[:12], err)) {
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

// ensure makes sure this process knows request h and has its complete index: from
// memory, or by reading its record and its messages (a request of an earlier
// process). It returns resume.ErrNotFound for a request the store does not hold.
func (s *Store) ensure(ctx context.Context, h resume.TokenHash) error {
	s.mu.Lock()
	r := s.reqs[h]
	ok := r != nil && r.loaded
	s.mu.Unlock()
	if ok {
		return nil
	}
	if r == nil {
		if _, err := s.Get(ctx, h); err != nil {
			return err
		}
	}
	held, err := s.scan(ctx, h)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.reqs[h]; r != nil && r.loaded {
		return nil // loaded meanwhile
	}
	s.reqs[h] = &request{loaded: true, held: held}
	return nil
}

// scan reads where each of a request's messages sits in the stream.
func (s *Store) scan(ctx context.Context, h resume.TokenHash) ([]loc, error) {
	subj := s.subject(h)
	var held []loc
	for from := uint64(1); ; {
		raw, err := s.stream.GetMsg(ctx, from, jetstream.WithGetMsgSubject(subj))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return held, nil
		}
		if err != nil {
			return nil, fmt.Errorf("jsstore: reading %s at %d: %w", key(h)[:12], from, err)
		}
		m, err := decodeMessage(raw.Data)
		if err != nil {
			return nil, fmt.Errorf("jsstore: message at %d: %w", raw.Sequence, err)
		}
		held = append(held, loc{m.Seq, raw.Sequence})
		from = raw.Sequence + 1
	}
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
