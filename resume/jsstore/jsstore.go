package jsstore

import (
	"bytes"
	"cmp"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mcp-resume/mcp-resume/internal/backoff"
	"github.com/mcp-resume/mcp-resume/resume/internal/queue"
	"github.com/mcp-resume/mcp-resume/resume/internal/replicas"
	"github.com/mcp-resume/mcp-resume/resume/internal/wire"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

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
	// Replicas of the stream and the bucket, 1 to 5, each on another server of a
	// NATS cluster. New scales a stream or bucket that exists with another count
	// to it (JetStream copies its messages to the new replicas, or drops some),
	// and fails with an error naming both counts when JetStream cannot (a single
	// server, fewer servers than replicas). Default: the count they have, 1 for
	// new ones (a store opened without a count leaves a replicated stream as it
	// is).
	Replicas int
	// MaxAge bounds how long a message or a record is kept: a safety net for the
	// ones no process deletes (an instance gone for good). It must exceed the
	// longest a request runs plus its retention. Default 24 hours.
	MaxAge time.Duration
	// Duplicates is the stream's deduplication window, which makes the retry of a
	// publish whose acknowledgement was lost idempotent. JetStream keeps every
	// message id for this long, so it stays short. Default 30 seconds.
	Duplicates time.Duration
	// OutageWait is how long Append, Discard, Replay, Delete and Records wait
	// for NATS while it is unreachable: the connection is down and the client
	// reconnecting, or the server does not answer (a timeout, no responders,
	// JetStream not available yet). Each call is tried again, a publish with the
	// same message id, until it succeeds, fails otherwise, its ctx ends, or
	// OutageWait has passed since it began; then it returns the last error. The
	// wait bounds each try too, so it must be well above a call's ordinary
	// latency. It is at most Duplicates: a publish tried again after the
	// deduplication window could be stored twice. Default 30 seconds (and
	// Duplicates). Put, Get and Claim do not wait.
	OutageWait time.Duration
	// DeferRecords lets the record of a new request wait like its messages
	// (flushDelay) before it is written, and a request that ends meanwhile be
	// written once, with its final state, beside its last messages: a quick call
	// costs one round trip to the store instead of three. A crash within the
	// wait loses the request (a client that got its resume policy is answered
	// not_found after the restart). Only for a store no other process reads
	// (serve --data-dir with --sync periodic): in a cluster another instance
	// looks records up.
	DeferRecords bool
	// Logger receives what the store does on its own (a stream or bucket found
	// gone and made anew). Nil means none.
	Logger *zerolog.Logger
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
	if v.MaxAge <= 0 {
		v.MaxAge = 24 * time.Hour
	}
	if v.Duplicates <= 0 {
		v.Duplicates = 30 * time.Second
	}
	v.Duplicates = min(v.Duplicates, v.MaxAge)
	if v.OutageWait <= 0 {
		v.OutageWait = 30 * time.Second
	}
	v.OutageWait = min(v.OutageWait, v.Duplicates)
	return v
}

// Store is a resume.Store on JetStream. It is safe for concurrent use.
type Store struct {
	opts   Options
	stream jetstream.Stream    // queued messages
	kv     jetstream.KeyValue  // records
	kvs    jetstream.Stream    // the bucket's own stream, for deleting a key without a marker
	js     jetstream.JetStream // for publishing
	api    string              // the JetStream API's subject prefix, for batched reads
	// replicated: the bucket has replicas, whose reads may lag its leader.
	replicated bool
	// timeout bounds one try of a call whose ctx has no deadline (the client's
	// default, which JetStream would apply itself).
	timeout time.Duration
	// win holds the message publishes in flight (see window).
	win *window
	// flushDelay: see the package's flushDelay.
	flushDelay time.Duration
	// streamCfg and kvCfg make the stream and the bucket (New, and checkStore
	// when they are gone).
	streamCfg jetstream.StreamConfig
	kvCfg     jetstream.KeyValueConfig
	// bg: the store's checks of its stream and bucket (see lost.go).
	bg sync.WaitGroup

	mu   sync.Mutex // guards reqs, undeleted, dirty, armed, closed and every request's fields
	reqs map[resume.TokenHash]*request
	// undeleted: requests whose Delete failed, to purge again (see Delete).
	undeleted map[resume.TokenHash]struct{}
	// dirty: requests with messages appended but not sent yet (see Append);
	// armed: a flush of them is scheduled.
	dirty map[resume.TokenHash]struct{}
	armed bool
	// closed: Close has run; nothing is scheduled any more.
	closed bool
	// checking: a check of the stream and the bucket runs; checked: when the
	// last one ended (see lost.go).
	checking bool
	checked  time.Time
	// created: when the stream and the bucket's stream this store writes to
	// were made (JetStream's StreamInfo.Created): one made anew differs.
	created [2]time.Time
}

// request is what this process knows of a request's messages: where each one
// sits in the stream. A request is in reqs once it is known to exist (put by this
// process, or found in the bucket); its index is complete once loaded.
type request struct {
	loaded bool
	// lost: the stream or the bucket was gone and made anew since the store
	// knew the request (see lost.go).
	lost  bool
	held  []loc  // ascending seq
	rev   uint64 // the revision of its record this store last wrote or read; 0: unknown
	owner string // the record's Owner at rev
	// doomed: discarded messages still in the stream, deleted in batches (see
	// Discard).
	doomed []loc
	// pendFrom: held messages numbered below it are all acknowledged (reapLocked).
	pendFrom uint64
	// unsent: messages appended and not sent yet, in order (see Append).
	unsent []*pending
	// fmu is held while a batch of unsent messages is sent, so that batches go
	// out in order.
	fmu sync.Mutex
	// unwritten: the record of a new request, to be written by flush
	// (DeferRecords); shown: the newest record put and not known to be written,
	// which Get answers with; fresh: no record of it was written yet; gen counts
	// the Puts of the request, so that a flush whose write failed does not put
	// back a record a newer Put replaced.
	unwritten, shown *resume.Record
	fresh            bool
	gen              uint64
}

// loc places one message: its sequence number in the request, and in the stream
// (0 while its publish is unacknowledged: pend is set then).
type loc struct {
	seq, sseq uint64
	pend      *pending
	// data: the message, kept for the newest tailKeep messages a request holds,
	// which Replay then gives from memory (a client that reconnects, or a drain
	// past a gap, wants the newest; they come even while NATS is away).
	data []byte
}

// tailKeep is how many of a request's newest messages the index keeps whole.
const tailKeep = 64

// pending is a message appended and not yet acknowledged by the stream: not
// sent yet (see Append), or sent and waiting (see settle).
type pending struct {
	seq     uint64     // the message's number in its request
	msg     *nats.Msg  // the publish: subject, data and message id
	mu      sync.Mutex // guards the fields below
	sent    bool       // published at least once
	dropped bool       // discarded before it was sent: never sent
	att     *attempt   // the latest publish; nil while unsent or failed to send
	failed  bool       // att failed, or could not be sent: to be sent again
	sseq    uint64     // where it sits, once acknowledged
}

// flushDelay is how long an appended message waits before it is sent to the
// stream, and flushBatch how many of a request's messages wait at most: one
// delivered and discarded meanwhile (a client attached without acks) is never
// sent, nor deleted after. A Store reads flushDelay when it is made (a test
// that must act within the delay, whatever the machine's load, sets it longer).
var flushDelay = time.Millisecond

const flushBatch = 256

// ackPatience is how long, past its OutageWait, settle goes on sending again
// what the stream has not acknowledged while the connection is up: a stream
// whose window of publishes in flight is full acknowledges late, not never.
const ackPatience = 5 * time.Second

// recordRetry is how long a deferred record whose write found NATS away waits
// before it is tried again.
const recordRetry = 100 * time.Millisecond

// discardBatch is how many discarded messages of a request wait in the stream
// before they are deleted together (a request's Delete takes the rest).
const discardBatch = 64

// recordHistory is the bucket's history: how many revisions of a key the
// server keeps before it drops the oldest on its own. The store keeps one, by
// itself (see write); the rest is room, so that the server never drops a
// revision on its own.
//
// Why it matters: a revision the server drops for the history limit is dropped
// without a tombstone in the stream's files (nats-server's file store records
// such a removal only in its index, written every two minutes and at a clean
// shutdown), while a purge writes one. After a crash the dropped revision is
// read again from its block; the limit enforced at startup hides it behind the
// newer revision as long as that one is there, but once the newer one is purged
// (Delete) the older one was the record after the crash: a deleted request came
// back as it was before its final state (issue 24).
const recordHistory = 8

var (
	_ resume.Lister  = (*Store)(nil)
	_ resume.Claimer = (*Store)(nil)
)

// New returns a store on js, creating its stream and bucket, or updating their
// configuration to opts.
func New(ctx context.Context, js jetstream.JetStream, opts *Options) (*Store, error) {
	o := opts.withDefaults()
	storage := jetstream.FileStorage
	if o.Memory {
		storage = jetstream.MemoryStorage
	}
	streamR, had, err := replicas.For(ctx, js, o.Stream, o.Replicas)
	if err != nil {
		return nil, fmt.Errorf("jsstore: stream %s: %w", o.Stream, err)
	}
	streamCfg := jetstream.StreamConfig{
		Name:        o.Stream,
		Description: "mcp-resume: queued messages of resumable requests, one subject per request",
		Subjects:    []string{o.Subject + ".*"},
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardOld,
		MaxAge:      o.MaxAge,
		Duplicates:  o.Duplicates,
		Storage:     storage,
		Replicas:    streamR,
		AllowDirect: true,
	}
	stream, err := js.CreateOrUpdateStream(ctx, streamCfg)
	if err != nil {
		return nil, fmt.Errorf("jsstore: stream %s: %w", o.Stream, replicas.Error(err, streamR, had))
	}
	bucketR, had, err := replicas.For(ctx, js, "KV_"+o.Bucket, o.Replicas)
	if err != nil {
		return nil, fmt.Errorf("jsstore: bucket %s: %w", o.Bucket, err)
	}
	kvCfg := jetstream.KeyValueConfig{
		Bucket:      o.Bucket,
		Description: "mcp-resume: records of resumable requests, keyed by token hash",
		History:     recordHistory,
		TTL:         o.MaxAge,
		Storage:     storage,
		Replicas:    bucketR,
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, kvCfg)
	if err != nil {
		return nil, fmt.Errorf("jsstore: bucket %s: %w", o.Bucket, replicas.Error(err, bucketR, had))
	}

	kvs, err := js.Stream(ctx, "KV_"+o.Bucket)
	if err != nil {
		return nil, fmt.Errorf("jsstore: the stream of bucket %s: %w", o.Bucket, err)
	}
	api := jetstream.DefaultAPIPrefix
	switch jo := js.Options(); {
	case jo.Domain != "":
		api = "$JS." + jo.Domain + ".API."
	case jo.APIPrefix != "":
		api = strings.TrimSuffix(jo.APIPrefix, ".") + "."
	}
	s := &Store{
		opts: o, stream: stream, kv: kv, kvs: kvs, js: js, api: api, timeout: js.Options().DefaultTimeout,
		win: newWindow(js.Options().DefaultTimeout), streamCfg: streamCfg, kvCfg: kvCfg,
		replicated: kvs.CachedInfo().Config.Replicas > 1,
		reqs:       make(map[resume.TokenHash]*request), undeleted: make(map[resume.TokenHash]struct{}),
		dirty: make(map[resume.TokenHash]struct{}), flushDelay: flushDelay,
		created: [2]time.Time{stream.CachedInfo().Created, kvs.CachedInfo().Created},
	}
	s.win.onFail = s.suspect
	return s, nil
}

// Stream returns the stream of queued messages (for inspection: its state).
func (s *Store) Stream() jetstream.Stream { return s.stream }

// Bucket returns the bucket of records (for inspection).
func (s *Store) Bucket() jetstream.KeyValue { return s.kv }

func key(h resume.TokenHash) string { return hex.EncodeToString(h[:]) }

func (s *Store) subject(h resume.TokenHash) string { return s.opts.Subject + "." + key(h) }

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
	if s.opts.DeferRecords && rec.State == resume.StateProcessing && s.deferRecord(rec) {
		return nil
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

// deferRecord keeps rec, the record of a request still processing, to be written
// with the request's waiting messages (flush), when no record of the request
// was written yet; it reports whether it did.
func (s *Store) deferRecord(rec resume.Record) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, known := s.reqs[rec.Hash]
	switch {
	case !known:
		r = &request{loaded: true, fresh: true}
		s.reqs[rec.Hash] = r
	case !r.fresh:
		return false
	}
	// While the request's first record is being written (fresh), a newer one
	// waits for the flush after it, in order.
	r.gen++
	r.unwritten, r.shown, r.owner = &rec, &rec, rec.Owner
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
	ps := r.unsent
	if fresh {
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
	for _, p := range ps { // the messages go out first
		s.send(p)
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
	}
	if err != nil {
		s.suspect(err)
		return fmt.Errorf("jsstore: putting record %s: %w", key(rec.Hash)[:12], err)
	}
	s.mu.Lock()
	r = s.reqs[rec.Hash]
	if r == nil {
		r = &request{loaded: fresh}
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

// Append queues a message for its request's subject (queue): it is published
// after flushDelay, or once flushBatch of the request's messages wait, or when
// something needs it stored, unless discarded before (Discard drops it unsent).
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
	msgID := key(h) + "." + strconv.FormatUint(m.Seq, 10)
	p := &pending{seq: m.Seq, msg: &nats.Msg{Subject: s.subject(h), Data: data, Header: nats.Header{jetstream.MsgIDHeader: []string{msgID}}}}
	n, err := s.queue(h, loc{seq: m.Seq, pend: p, data: data})
	if n >= flushBatch {
		s.flush(h)
	}
	return err
}

// connected waits until the connection is up, for at most Options.OutageWait.
func (s *Store) connected(ctx context.Context) error {
	nc := s.js.Conn()
	if nc.Status() == nats.CONNECTED {
		return nil
	}
	end := time.Now().Add(s.opts.OutageWait)
	for nc.Status() != nats.CONNECTED {
		if !s.await(ctx, end, 10*time.Millisecond) {
			switch {
			case ctx.Err() != nil:
				return ctx.Err()
			case nc.IsClosed():
				return nats.ErrConnectionClosed
			case nc.Status() != nats.CONNECTED:
				return nats.ErrConnectionReconnecting
			}
		}
	}
	return nil
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
	s.mu.Unlock()
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
	s.mu.Lock()
	ps := r.unsent
	r.unsent = nil
	s.mu.Unlock()
	for _, p := range ps {
		s.send(p)
	}
}

// send publishes p, unless it was sent or dropped already.
func (s *Store) send(p *pending) {
	p.mu.Lock()
	if p.sent || p.dropped {
		p.mu.Unlock()
		return
	}
	p.sent = true // from now on a Discard deletes it from the stream
	p.mu.Unlock()
	s.publish(context.Background(), p)
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
	end := time.Now().Add(s.opts.OutageWait)
	pauses := backoff.Double(10*time.Millisecond, 500*time.Millisecond)
	for {
		pause := pauses.Next()
		s.mu.Lock()
		r := s.reqs[h]
		var wait []*pending
		if r != nil && r.lost { // meanwhile: nothing of it goes to the stream made anew
			s.mu.Unlock()
			return nil
		}
		if r != nil {
			for _, ls := range [][]loc{r.held, r.doomed} {
				for _, l := range ls {
					if l.pend != nil && !l.pend.isDropped() {
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
			s.republish(ctx, p)
		}
	}
}

// outcome waits for pending publish p to be resolved (see window): true when
// it is stored (and recorded in h's index), false when it must be sent again.
func (s *Store) outcome(ctx context.Context, h resume.TokenHash, p *pending) (bool, error) {
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

// republish sends p again with its message id, unless it is stored or
// dropped meanwhile.
func (s *Store) republish(ctx context.Context, p *pending) {
	p.mu.Lock()
	sseq, dropped := p.sseq, p.dropped
	p.mu.Unlock()
	if sseq != 0 || dropped {
		return
	}
	s.publish(ctx, p)
}

// record notes where p sits in request h's index.
func (s *Store) record(h resume.TokenHash, p *pending, sseq uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.reqs[h]
	if r == nil {
		return
	}
	if i, ok := slices.BinarySearchFunc(r.held, p.seq, func(l loc, seq uint64) int { return cmp.Compare(l.seq, seq) }); ok && r.held[i].pend == p {
		r.held[i].sseq, r.held[i].pend = sseq, nil
	}
	for i := range r.doomed {
		if r.doomed[i].pend == p {
			r.doomed[i].sseq, r.doomed[i].pend = sseq, nil
		}
	}
}

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
	full := len(r.doomed) >= discardBatch
	s.mu.Unlock()
	if !full {
		return nil
	}
	return s.sweep(ctx, h, false)
}

// Close writes what waits (the records and messages written behind, see
// Append) and waits until the stream has acknowledged every message, so that a
// graceful stop leaves everything appended stored. The store is not used after.
func (s *Store) Close(ctx context.Context) error {
	s.mu.Lock()
	hs := make([]resume.TokenHash, 0, len(s.reqs))
	for h := range s.reqs {
		hs = append(hs, h)
	}
	s.mu.Unlock()
	var first error
	for _, h := range hs {
		if err := s.settle(ctx, h); err != nil && first == nil {
			first = err
		}
	}
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.win.wait()
	s.bg.Wait()
	return first
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

// ReplayFresh is Replay of a request as the stream holds it now, read again
// each time instead of from what this Store remembers of it: for a request
// another instance writes (resume.FreshReplayer; a task's events streamed on an
// instance that does not run it).
func (s *Store) ReplayFresh(ctx context.Context, h resume.TokenHash, after uint64) iter.Seq2[resume.Message, error] {
	return func(yield func(resume.Message, error) bool) {
		var held []loc
		err := s.retry(ctx, func(ctx context.Context) error {
			var err error
			held, err = s.scan(ctx, h)
			return err
		})
		if err != nil {
			yield(resume.Message{}, err)
			return
		}
		i, _ := slices.BinarySearchFunc(held, after+1, func(l loc, seq uint64) int { return cmp.Compare(l.seq, seq) })
		todo := held[i:]
		subj := s.subject(h)
		for len(todo) > 0 {
			batch := todo[:min(len(todo), replayBatch)]
			todo = todo[len(batch):]
			stored := make(map[uint64]resume.Message, len(batch))
			if err := s.retry(ctx, func(ctx context.Context) error { return s.readBatch(ctx, subj, batch, stored) }); err != nil {
				yield(resume.Message{}, fmt.Errorf("jsstore: reading messages of %s from %d: %w", key(h)[:12], batch[0].seq, err))
				return
			}
			for _, l := range batch {
				if m, ok := stored[l.seq]; ok && !yield(m, nil) {
					return
				}
			}
		}
	}
}

// Replay reads the request's indexed messages after a sequence number, up to the
// last one indexed at the call, in order: the newest (tailKeep) and those whose
// publish is not acknowledged yet from memory (a Replay does not wait for the
// store), the others from the stream, replayBatch of them in one batched direct get.
// Only indexed messages are read: not a publish that failed but was stored all
// the same (see Append), nor a discarded message.
func (s *Store) Replay(ctx context.Context, h resume.TokenHash, after uint64) iter.Seq2[resume.Message, error] {
	return func(yield func(resume.Message, error) bool) {
		if err := s.ensure(ctx, h); err != nil {
			yield(resume.Message{}, err)
			return
		}
		if err := s.lostErr(h); err != nil {
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
		i, _ := slices.BinarySearchFunc(r.held, after+1, func(l loc, seq uint64) int { return cmp.Compare(l.seq, seq) })
		todo := slices.Clone(r.held[i:])
		s.mu.Unlock()
		subj := s.subject(h)
		for len(todo) > 0 {
			batch := todo[:min(len(todo), replayBatch)]
			todo = todo[len(batch):]
			var fromStream []loc
			for _, l := range batch {
				if l.data == nil && l.pend == nil {
					fromStream = append(fromStream, l)
				}
			}
			stored := make(map[uint64]resume.Message, len(fromStream))
			if len(fromStream) > 0 {
				err := s.retry(ctx, func(ctx context.Context) error {
					return s.readBatch(ctx, subj, fromStream, stored)
				})
				if err != nil {
					yield(resume.Message{}, fmt.Errorf("jsstore: reading messages of %s from %d: %w", key(h)[:12], fromStream[0].seq, err))
					return
				}
			}
			for _, l := range batch {
				var m resume.Message
				switch {
				case l.data != nil || l.pend != nil: // the newest, or not acknowledged yet: from memory
					data := l.data
					if data == nil {
						data = l.pend.msg.Data
					}
					var err error
					if m, err = wire.DecodeMessage(data); err == nil && m.Seq != l.seq {
						err = fmt.Errorf("%w: message %d where message %d of %s was", errCodec, m.Seq, l.seq, key(h)[:12])
					}
					if err != nil {
						yield(resume.Message{}, err)
						return
					}
				default:
					var ok bool
					if m, ok = stored[l.seq]; !ok {
						if s.isHeld(h, l.seq) {
							s.verify(ctx) // held, yet not in the stream: is it the same stream?
						}
						if err := s.lostErr(h); err != nil {
							yield(resume.Message{}, err) // with the stream
							return
						}
						continue // deleted meanwhile (the request ended)
					}
				}
				if !s.isHeld(h, l.seq) {
					continue // discarded meanwhile
				}
				if !yield(m, nil) {
					return
				}
			}
		}
	}
}

// leaderGet reads the message at stream sequence sseq through the stream's
// leader, not a direct get, which any replica answers: a replica that lags the
// leader (a NATS cluster, --replicas) misses the newest messages, and a message
// a batched read did not bring is read here, so that a miss means deleted.
func (s *Store) leaderGet(ctx context.Context, sseq uint64) (subject string, data []byte, err error) {
	m, err := s.leaderRead(ctx, s.opts.Stream, struct {
		Seq uint64 `json:"seq"`
	}{sseq})
	if err != nil {
		return "", nil, err
	}
	return m.Subject, m.Data, nil
}

// leaderMsg is a stream message as the stream's leader gives it.
type leaderMsg struct {
	Subject string `json:"subject"`
	Seq     uint64 `json:"seq"`
	Header  []byte `json:"hdrs"`
	Data    []byte `json:"data"`
}

// leaderRead asks stream's leader for the message req names
// (STREAM.MSG.GET): jetstream.ErrMsgNotFound when there is none.
func (s *Store) leaderRead(ctx context.Context, stream string, req any) (*leaderMsg, error) {
	body, _ := json.Marshal(req)
	rctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	m, err := s.js.Conn().RequestWithContext(rctx, s.api+"STREAM.MSG.GET."+stream, body)
	if err != nil {
		return nil, err
	}
	var resp struct {
		Message *leaderMsg `json:"message"`
		Error   *struct {
			Code        int    `json:"code"`
			ErrCode     int    `json:"err_code"`
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(m.Data, &resp); err != nil {
		return nil, fmt.Errorf("jsstore: reading from %s: %w", stream, err)
	}
	switch {
	case resp.Error != nil && resp.Error.ErrCode == int(jetstream.JSErrCodeMessageNotFound):
		return nil, jetstream.ErrMsgNotFound
	case resp.Error != nil:
		return nil, &jetstream.APIError{Code: resp.Error.Code, ErrorCode: jetstream.ErrorCode(resp.Error.ErrCode), Description: resp.Error.Description}
	case resp.Message == nil:
		return nil, fmt.Errorf("jsstore: reading from %s: an empty answer", stream)
	}
	return resp.Message, nil
}

// replayBatch is how many messages a Replay reads from the stream at once.
const replayBatch = 1024

// readBatch reads the messages locs place, all of subject subj, with batched
// direct gets: each asks for the subject's messages from the lowest stream
// sequence still wanted, as many as the span up to the highest could hold
// (at most maxBatchSpan), so that messages of the subject the index does not
// hold (a publish that failed but was stored, see Append) do not cut a batch
// short. A wanted message a batch went past without bringing was deleted, or
// the replica that answered lags: it is read through the stream's leader. The
// messages read go into got, which a try after a failure (a batch slower than
// one try's timeout, on a loaded server) passes again: it reads only what is
// still missing, so that every try makes progress.
func (s *Store) readBatch(ctx context.Context, subj string, locs []loc, got map[uint64]resume.Message) error {
	var missing []loc
	for _, l := range locs {
		if _, ok := got[l.seq]; !ok {
			missing = append(missing, l)
		}
	}
	var confirm []loc // skipped by a batch: deleted, or a lagging replica
	for len(missing) > 0 {
		from, to := missing[0].sseq, missing[0].sseq
		for _, l := range missing {
			from, to = min(from, l.sseq), max(to, l.sseq)
		}
		n := int(min(to-from+1, maxBatchSpan))
		if err := s.directBatch(ctx, subj, from, n, missing, got); err != nil {
			return err
		}
		var reached uint64 // the highest stream sequence a wanted message came from
		for _, l := range missing {
			if _, ok := got[l.seq]; ok {
				reached = max(reached, l.sseq)
			}
		}
		var rest []loc
		for _, l := range missing {
			switch _, ok := got[l.seq]; {
			case ok:
			case l.sseq < reached || n == int(to-from+1):
				confirm = append(confirm, l) // the batch went past it, or covered the span
			default:
				rest = append(rest, l)
			}
		}
		if len(rest) == len(missing) { // no progress
			confirm = append(confirm, rest...)
			break
		}
		missing = rest
	}
	for _, l := range confirm {
		rawSubj, data, err := s.leaderGet(ctx, l.sseq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			return err
		}
		msg, err := wire.DecodeMessage(data)
		if err == nil && (rawSubj != subj || msg.Seq != l.seq) {
			err = fmt.Errorf("%w: %s message %d where message %d was", errCodec, rawSubj, msg.Seq, l.seq)
		}
		if err != nil {
			return fmt.Errorf("jsstore: message at %d: %w", l.sseq, err)
		}
		got[l.seq] = msg
	}
	return nil
}

// maxBatchSpan bounds the messages one batched direct get asks for.
const maxBatchSpan = 8192

// directBatch reads up to n messages of subj from stream sequence from, in one
// batched direct get without headers, and adds those locs place to got.
func (s *Store) directBatch(ctx context.Context, subj string, from uint64, n int, locs []loc, got map[uint64]resume.Message) error {
	want := make(map[uint64]bool, len(locs))
	for _, l := range locs {
		want[l.seq] = true
	}
	nc := s.js.Conn()
	sub, err := nc.SubscribeSync(nc.NewRespInbox())
	if err != nil {
		return err
	}
	defer func() { _ = sub.Unsubscribe() }()
	req, _ := json.Marshal(struct {
		Seq       uint64 `json:"seq"`
		NextFor   string `json:"next_by_subj"`
		Batch     int    `json:"batch"`
		NoHeaders bool   `json:"no_hdr"`
	}{from, subj, n, true})
	if err := nc.PublishRequest(s.api+"DIRECT.GET."+s.opts.Stream, sub.Subject, req); err != nil {
		return err
	}
	for {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			return err
		}
		switch status := m.Header.Get("Status"); status {
		case "":
			msg, err := wire.DecodeMessage(m.Data)
			if err != nil {
				return fmt.Errorf("jsstore: batched read of %s: %w", subj, err)
			}
			if want[msg.Seq] {
				got[msg.Seq] = msg
			}
		case "204", "404": // end of batch; nothing (more) of the subject
			return nil
		default:
			return fmt.Errorf("jsstore: batched read of %s: status %s %s", subj, status, m.Header.Get("Description"))
		}
	}
}

// isHeld reports whether request h still holds message seq.
func (s *Store) isHeld(h resume.TokenHash, seq uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.reqs[h]
	if r == nil {
		return false
	}
	_, ok := slices.BinarySearchFunc(r.held, seq, func(l loc, seq uint64) int { return cmp.Compare(l.seq, seq) })
	return ok
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
	}
	s.mu.Unlock()
	return rec, nil
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
	var rev uint64
	var owner string
	if r == nil {
		rec, n, err := s.get(ctx, h)
		if err != nil {
			return err
		}
		rev, owner = n, rec.Owner
	}
	held, err := s.scan(ctx, h)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch r := s.reqs[h]; {
	case r == nil:
		s.reqs[h] = &request{loaded: true, held: held, rev: rev, owner: owner}
	case !r.loaded:
		r.loaded, r.held = true, held
	}
	return nil
}

// scan reads where each of a request's messages sits in the stream.
func (s *Store) scan(ctx context.Context, h resume.TokenHash) ([]loc, error) {
	subj := s.subject(h)
	var held []loc
	for from := uint64(1); ; {
		raw, err := s.stream.GetMsg(ctx, from, jetstream.WithGetMsgSubject(subj))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			// A publish sent again after its acknowledgement failed sits after
			// messages appended later: the index is in the request's order.
			slices.SortStableFunc(held, func(a, b loc) int { return cmp.Compare(a.seq, b.seq) })
			return slices.CompactFunc(held, func(a, b loc) bool { return a.seq == b.seq }), nil
		}
		if err != nil {
			return nil, fmt.Errorf("jsstore: reading %s at %d: %w", key(h)[:12], from, err)
		}
		m, err := wire.DecodeMessage(raw.Data)
		if err != nil {
			return nil, fmt.Errorf("jsstore: message at %d: %w", raw.Sequence, err)
		}
		held = append(held, loc{seq: m.Seq, sseq: raw.Sequence})
		from = raw.Sequence + 1
	}
}

// retry runs op, a call to NATS that is safe to repeat, until it succeeds, fails
// otherwise than by NATS being unreachable, ctx ends, or Options.OutageWait has
// passed since retry was called, and returns its last error. Each try gets the
// client's default timeout unless ctx has an earlier deadline, and none goes past
// the OutageWait. No try is made while the client is reconnecting: it would keep
// the call in its reconnect buffer and send it when it is back, maybe after this
// one has given up (a message stored though Append failed). Between tries it
// waits for the connection to be up again, or a little more each time while NATS
// does not answer.
func (s *Store) retry(ctx context.Context, op func(ctx context.Context) error) error {
	end := time.Now().Add(s.opts.OutageWait)
	nc := s.js.Conn()
	var err error
	pauses := backoff.Double(10*time.Millisecond, 500*time.Millisecond)
	for {
		pause := pauses.Next()
		if st := nc.Status(); st == nats.RECONNECTING || st == nats.CONNECTING {
			if err == nil {
				err = nats.ErrConnectionReconnecting
			}
		} else {
			deadline := time.Now().Add(s.timeout)
			if end.Before(deadline) {
				deadline = end
			}
			tctx, cancel := context.WithDeadline(ctx, deadline)
			err = op(tctx)
			cancel()
			s.suspect(err)
			if err == nil || ctx.Err() != nil || !unreachable(err) {
				return err
			}
		}
		if !s.await(ctx, end, pause) {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
	}
}

// unreachable reports whether err says that NATS did not answer: the connection
// is down or reconnecting, the call timed out, nobody serves the API (yet), or
// JetStream is not available (yet).
func unreachable(err error) bool {
	var apiErr *jetstream.APIError
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout),
		errors.Is(err, nats.ErrNoResponders), errors.Is(err, jetstream.ErrNoStreamResponse),
		errors.Is(err, nats.ErrDisconnected), errors.Is(err, nats.ErrConnectionReconnecting),
		errors.Is(err, nats.ErrReconnectBufExceeded):
		return true
	case errors.As(err, &apiErr):
		return apiErr.Code == 503
	}
	return false
}

// await waits before another try: until the connection is up when it is not,
// else for pause; never past end. It reports whether to try again: false when ctx
// ended, end passed, or the connection is closed for good.
func (s *Store) await(ctx context.Context, end time.Time, pause time.Duration) bool {
	nc := s.js.Conn()
	wait := time.Until(end)
	var up chan nats.Status // nil while connected: wait out the pause
	if nc.Status() == nats.CONNECTED {
		wait = min(wait, pause)
	} else {
		up = nc.StatusChanged(nats.CONNECTED, nats.CLOSED)
		defer nc.RemoveStatusListener(up)
		if st := nc.Status(); st == nats.CONNECTED || st == nats.CLOSED { // meanwhile
			return wait > 0 && st == nats.CONNECTED
		}
	}
	if wait <= 0 {
		return false
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-up:
	case <-t.C:
	case <-ctx.Done():
		return false
	}
	return time.Now().Before(end) && !nc.IsClosed()
}
