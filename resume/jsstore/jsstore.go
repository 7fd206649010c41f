package jsstore

import (
	"cmp"
	"context"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/mcp-resume/mcp-resume/resume"
	"github.com/mcp-resume/mcp-resume/resume/internal/replicas"
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
	// written once, with its final state, after its last messages, by the
	// flush: a quick call costs the store one record written behind, and its
	// Put of the final state does not wait for the store (its answer goes out
	// at once). A crash within the wait loses the request (a client that got
	// its resume policy is answered not_found after the restart). Only for a
	// store no other process reads (serve --data-dir with --sync periodic): in
	// a cluster another instance looks records up.
	DeferRecords bool
	// DeliveredInMemory, with DeferRecords, writes nothing of a request that
	// ended before any of it was written and whose final response then
	// reached its client (Delivered): it is kept in memory for the rest of
	// its retention, and its Delete costs the store nothing. A quick keyed
	// call, whose client has its answer at once, then costs the store no
	// write at all. Close writes what it keeps so (a planned restart loses
	// nothing); a crash loses it, and a client that lost the answer on the
	// wire and sends its key again after that crash runs the call again. A
	// request written to after its delivery (a Put, an Append) is written as
	// any other.
	DeliveredInMemory bool
	// FlushDelay is how long an appended message (and, with DeferRecords, a
	// new request's record) waits for others of its request before it is
	// written: a request that ends within it is written once, with its final
	// state, or (DeliveredInMemory) not at all. Default 1 ms.
	FlushDelay time.Duration
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
	// packMax bounds a pack's size: packBytes, or less under a server whose
	// largest message is smaller.
	packMax int
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
	// Discard); kept: how many of them the last sweep left there, in packs
	// that hold messages still held (see sweep).
	doomed []loc
	kept   int
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
	// writing is closed once the final record a flush wrote behind (see
	// writeFinal) is stored or failed; nil when none is in flight. Delete
	// waits for it, so that no record lands after its purge.
	writing chan struct{}
	// volatile: ended and delivered before any of it was written
	// (DeliveredInMemory): the flush behind leaves it; Close and a Sweep
	// write it.
	volatile bool
	// bare: this store made the request's first record, and no message of it
	// was sent since: its subject in the stream holds nothing, and Delete
	// purges its record alone (a quick call, delivered within the write-behind,
	// costs the stream no purge). Messages that no record names (a process
	// that crashed between Delete's two purges, or after it published the
	// messages of a request whose record it failed to write) are not looked
	// for when a request of the same token is made again (a client's key);
	// they age out after Options.MaxAge, as any such message does.
	bare bool
}

// loc places one message: its sequence number in the request, and in the stream
// (0 while its publish is unacknowledged: pend is set then).
//
// Several messages sent in one pack share their stream sequence (and their
// pending pack while it is unacknowledged).
type loc struct {
	seq, sseq uint64
	pend      *pending
	// marked: discarded from a pack that still holds others, and said so in
	// the stream (see sweep).
	marked bool
	// data: the message, kept for the newest tailKeep messages a request holds,
	// which Replay then gives from memory (a client that reconnects, or a drain
	// past a gap, wants the newest; they come even while NATS is away).
	data []byte
}

// tailKeep is how many of a request's newest messages the index keeps whole.
const tailKeep = 64

// pending is a message appended and not yet acknowledged by the stream: not
// sent yet (see Append), or sent and waiting (see settle); or a pack of
// several of a request's messages sent as one stream message (see flush),
// which the index's locs of its messages then point to.
type pending struct {
	seq  uint64 // the message's number in its request (a pack's: its first's)
	data []byte // its encoding (a pack's: the pack's)
	// A pack's: its messages' numbers, ascending, and their encodings.
	seqs  []uint64
	parts [][]byte
	// msg: the publish (subject, data and message id), made once it is sent
	// alone or as a pack, under the store's mutex.
	msg *nats.Msg
	mu  sync.Mutex // guards the fields below
	// via: the pack this message went out in (set with sent, under the store's
	// mutex); its publish is the pack's from then on.
	via     *pending
	sent    bool     // published at least once, or taken to be (flush)
	dropped bool     // discarded before it was sent: never sent
	att     *attempt // the latest publish; nil while unsent or failed to send
	failed  bool     // att failed, or could not be sent: to be sent again
	sseq    uint64   // where it sits, once acknowledged
}

// unit returns the pending publish that carries p: the pack it went out in,
// or p itself.
func (p *pending) unit() *pending {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.via != nil {
		return p.via
	}
	return p
}

// part returns the encoding of message seq, which p (a message, or a pack)
// carries; nil when it does not.
func (p *pending) part(seq uint64) []byte {
	if p.seqs == nil {
		if p.seq != seq {
			return nil
		}
		return p.data
	}
	if i, ok := slices.BinarySearch(p.seqs, seq); ok {
		return p.parts[i]
	}
	return nil
}

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
	stream, err := replicas.Create(ctx, streamR, had, func(ctx context.Context) (jetstream.Stream, error) {
		return js.CreateOrUpdateStream(ctx, streamCfg)
	})
	if err != nil {
		return nil, fmt.Errorf("jsstore: stream %s: %w", o.Stream, err)
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
	kv, err := replicas.Create(ctx, bucketR, had, func(ctx context.Context) (jetstream.KeyValue, error) {
		return js.CreateOrUpdateKeyValue(ctx, kvCfg)
	})
	if err != nil {
		return nil, fmt.Errorf("jsstore: bucket %s: %w", o.Bucket, err)
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
		win: newWindow(js.Options().DefaultTimeout, js.Conn().StatusChanged(nats.CLOSED)), streamCfg: streamCfg, kvCfg: kvCfg,
		replicated: kvs.CachedInfo().Config.Replicas > 1,
		reqs:       make(map[resume.TokenHash]*request), undeleted: make(map[resume.TokenHash]struct{}),
		dirty: make(map[resume.TokenHash]struct{}), flushDelay: cmp.Or(o.FlushDelay, flushDelay), packMax: packBytes,
		created: [2]time.Time{stream.CachedInfo().Created, kvs.CachedInfo().Created},
	}
	s.win.onFail = s.suspect
	if mp := int(js.Conn().MaxPayload()); mp > 0 {
		s.packMax = min(s.packMax, mp/2)
	}
	return s, nil
}

// Stream returns the stream of queued messages (for inspection: its state).
func (s *Store) Stream() jetstream.Stream { return s.stream }

// Bucket returns the bucket of records (for inspection).
func (s *Store) Bucket() jetstream.KeyValue { return s.kv }

func key(h resume.TokenHash) string { return hex.EncodeToString(h[:]) }

func (s *Store) subject(h resume.TokenHash) string { return s.opts.Subject + "." + key(h) }

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
	s.js.Conn().RemoveStatusListener(s.win.connClosed)
	s.bg.Wait()
	return first
}
