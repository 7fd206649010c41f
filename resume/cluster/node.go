package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/mcp-resume/mcp-resume/internal/backoff"
	"github.com/mcp-resume/mcp-resume/resume/internal/replicas"
)

// Options configure a Node. The zero value of each field means its default. Every
// instance of a cluster uses the same Bucket, Lease and Subject.
type Options struct {
	// Name is this instance's name: 1 to 64 of [A-Za-z0-9_-]. Default: a random
	// one, "i-" and 12 hex digits. A stable name (a pod's) lets a restarted process
	// take its predecessor's place once that one's lease has lapsed.
	Name string
	// Bucket names the KV bucket of leases. Default "mcp-resume-leases".
	Bucket string
	// Lease is how long a lease lasts unrefreshed (the bucket's TTL); a node
	// refreshes its own every Lease/3. Default 10 seconds.
	Lease time.Duration
	// Subject prefixes the control subjects: <Subject>.<Name> for calls,
	// <Subject>.<Name>.in.<id> for inboxes. Default "mr.ctl".
	Subject string
	// CallTimeout bounds one Call or Deliver (an earlier deadline of its context
	// wins). Default 5 seconds.
	CallTimeout time.Duration
	// Memory keeps the bucket in memory instead of on disk.
	Memory bool
	// Replicas of the bucket, 1 to 5, each on another server of a NATS cluster.
	// Join scales a bucket that exists with another count to it, and fails with
	// an error naming both counts when JetStream cannot. Default: the count it
	// has, 1 for a new one (a node joining without a count leaves a replicated
	// bucket as it is).
	Replicas int
	// Logger receives the node's logs. Nil means none.
	Logger *zerolog.Logger
}

func (o *Options) withDefaults() (Options, error) {
	var v Options
	if o != nil {
		v = *o
	}
	if v.Name == "" {
		v.Name = "i-" + randomHex(6)
	}
	if !validName(v.Name) {
		return v, fmt.Errorf("cluster: instance name %q: want 1 to 64 of A-Z a-z 0-9 _ -", v.Name)
	}
	if v.Bucket == "" {
		v.Bucket = "mcp-resume-leases"
	}
	if v.Lease <= 0 {
		v.Lease = 10 * time.Second
	}
	if v.Subject == "" {
		v.Subject = "mr.ctl"
	}
	if !validSubject(v.Subject) {
		return v, fmt.Errorf("cluster: subject prefix %q: want dot-separated tokens without wildcards or spaces", v.Subject)
	}
	if v.CallTimeout <= 0 {
		v.CallTimeout = 5 * time.Second
	}
	return v, nil
}

// validName reports whether s may name an instance: it is then a single token of
// a NATS subject and a KV key.
func validName(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := range len(s) {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func validSubject(s string) bool {
	for tok := range strings.SplitSeq(s, ".") {
		if tok == "" || strings.ContainsAny(tok, "*> \t\r\n") {
			return false
		}
	}
	return true
}

// openBucket creates or updates the KV bucket of cfg, on disk or in memory,
// with the replicas asked (see Options.Replicas).
func openBucket(ctx context.Context, nc *nats.Conn, cfg jetstream.KeyValueConfig, memory bool, want int) (jetstream.KeyValue, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	cfg.Storage = jetstream.FileStorage
	if memory {
		cfg.Storage = jetstream.MemoryStorage
	}
	r, had, err := replicas.For(ctx, js, "KV_"+cfg.Bucket, want)
	if err != nil {
		return nil, fmt.Errorf("cluster: bucket %s: %w", cfg.Bucket, err)
	}
	cfg.Replicas = r
	kv, err := replicas.Create(ctx, r, had, func(ctx context.Context) (jetstream.KeyValue, error) { return js.CreateOrUpdateKeyValue(ctx, cfg) })
	if err != nil {
		return nil, fmt.Errorf("cluster: bucket %s: %w", cfg.Bucket, err)
	}
	return kv, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+); it panics instead.
	return hex.EncodeToString(b)
}

// ErrClosed is the error of a Call or Deliver made after Close.
var ErrClosed = errors.New("cluster: the node is closed")

// Node is this instance's membership of a cluster: its lease, its control
// subscription and its inboxes, and its engine's resume.Cluster once bound. Its
// methods are safe for concurrent use.
type Node struct {
	opts Options
	nc   *nats.Conn
	kv   jetstream.KeyValue
	log  zerolog.Logger
	inc  []byte // this incarnation: the value of its lease, random

	// ctx ends at Close: the loops stop and the handlers' contexts end.
	ctx      context.Context
	cancel   context.CancelFunc
	loops    sync.WaitGroup // refresh and poll
	tasks    sync.WaitGroup // handlers, lost and OnDeparted callbacks
	once     sync.Once
	calls    *nats.Subscription
	rev      uint64        // the lease's last revision: refresh's until the loops end, then Close's
	lost     chan struct{} // closed by loseLease (Lost)
	loseOnce sync.Once     // closes lost once

	mu       sync.Mutex // guards the fields below
	closed   bool
	handler  func(ctx context.Context, from string, c PeerCall) PeerReply
	departed []func(instance string)
	inboxes  map[*nats.Subscription]struct{}
	known    map[string]lease                // instances seen holding a lease (departures.go)
	watches  map[string]map[*watch]string    // per instance, each watch and the incarnation it watches
	waiting  map[string]map[*waiter]struct{} // per instance, the Calls and Delivers to it in flight (see awaiting)
	polls    uint64                          // polls started

	side engineSide // the engine's, once bound (serve.go)
}

// Join creates the lease bucket if needed, takes the lease of opts.Name, and
// starts serving calls. When the name's lease is held (by a live instance, or by
// a dead one whose lease has not lapsed yet) it tries again every Lease/10 until
// ctx ends. nc stays the caller's: Close does not close it.
func Join(ctx context.Context, nc *nats.Conn, opts *Options) (*Node, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	kv, err := openBucket(ctx, nc, jetstream.KeyValueConfig{
		Bucket:      o.Bucket,
		Description: "mcp-resume: leases of the cluster's instances, keyed by name",
		History:     1,
		TTL:         o.Lease,
	}, o.Memory, o.Replicas)
	if err != nil {
		return nil, err
	}
	log := zerolog.Nop()
	if o.Logger != nil {
		log = *o.Logger
	}
	n := &Node{
		opts:    o,
		nc:      nc,
		kv:      kv,
		log:     log.With().Str("component", "cluster").Str("instance", o.Name).Logger(),
		inc:     []byte(randomHex(8)),
		lost:    make(chan struct{}),
		inboxes: make(map[*nats.Subscription]struct{}),
		known:   make(map[string]lease),
		watches: make(map[string]map[*watch]string),
		waiting: make(map[string]map[*waiter]struct{}),
	}
	if n.rev, err = n.take(ctx); err != nil {
		return nil, err
	}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	if n.calls, err = nc.Subscribe(n.callSubject(o.Name), n.serve); err == nil {
		err = nc.FlushTimeout(o.CallTimeout) // the server knows of the subscription
	}
	if err != nil {
		n.Close()
		return nil, fmt.Errorf("cluster: subscribing to %s: %w", n.callSubject(o.Name), err)
	}
	n.loops.Add(2)
	go n.refresh()
	go n.poll()
	n.log.Info().Stringer("lease", o.Lease).Msg("joined the cluster")
	return n, nil
}

// take creates the lease, waiting for the name to be free.
func (n *Node) take(ctx context.Context) (uint64, error) {
	retry := n.opts.Lease / 10
	for logged := false; ; logged = true {
		rev, err := n.kv.Create(ctx, n.opts.Name, n.inc)
		if err == nil {
			return rev, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return 0, fmt.Errorf("cluster: taking the lease of %s: %w", n.opts.Name, err)
		}
		if !logged {
			n.log.Info().Msg("the name's lease is held; waiting for it to lapse")
		}
		if !backoff.Sleep(ctx, retry) {
			return 0, fmt.Errorf("cluster: the lease of %s is held by another instance (or by a dead one whose lease has not lapsed): %w",
				n.opts.Name, ctx.Err())
		}
	}
}

// refresh renews the lease every Lease/3 until Close, or until it finds the lease
// gone or taken.
func (n *Node) refresh() {
	defer n.loops.Done()
	// A refresh that fails is tried again soon, each try bounded, rather than at
	// the next third of the lease: the writes of a NATS cluster stop for several
	// seconds when the bucket's leader dies, and a lease refreshed every third of
	// 10 s would lapse. Each failed try doubles the next one's bound (up to a
	// third of the lease): a cluster that is slow rather than leaderless (its
	// servers short of CPU) answers a try that waits long enough.
	every := n.opts.Lease / 3
	again := max(n.opts.Lease/20, 100*time.Millisecond)
	first := min(every, n.opts.CallTimeout, max(n.opts.Lease/10, 200*time.Millisecond))
	try := first
	t := time.NewTimer(every)
	defer t.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
		}
		t.Reset(every)
		ctx, cancel := context.WithTimeout(n.ctx, try)
		rev, err := n.kv.Update(ctx, n.opts.Name, n.inc, n.rev)
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			// An update whose acknowledgement was lost moved the revision on:
			// the lease is still this incarnation's.
			switch e, gerr := n.kv.Get(ctx, n.opts.Name); {
			case gerr == nil && string(e.Value()) == string(n.inc):
				rev, err = e.Revision(), nil
			case gerr != nil && !errors.Is(gerr, jetstream.ErrKeyNotFound):
				err = gerr // not known to be lost: try again at the next tick
			}
		}
		cancel()
		switch {
		case err == nil:
			n.rev = rev
			try = first
		case n.ctx.Err() != nil:
			return
		case errors.Is(err, jetstream.ErrKeyRevisionMismatch):
			n.log.Error().Err(err).Msg("this instance's lease lapsed or was taken by another instance of the same name; no longer refreshing it")
			n.loseLease()
			return
		default:
			n.log.Warn().Err(err).Stringer("waited", try).Msg("refreshing the lease failed; trying again")
			try = min(2*try, max(every, first))
			t.Reset(again)
		}
	}
}

// Lost returns a channel that is closed when the node finds its lease lapsed (a
// partition from NATS, or a NATS outage, longer than Lease: the bucket's TTL
// removed it) or taken by another process of the same name. From then on the
// other instances count this one as gone and claim its requests, so it must stop
// running them: its process should shut down (mcp-resume serve does, with a
// non-zero exit) and be started again, and the new process's recovery brings back
// the requests that still name it as their owner. A node that holds its lease to
// Close never closes the channel.
func (n *Node) Lost() <-chan struct{} { return n.lost }

// loseLease closes Lost: refresh or a listing found this instance's lease gone or
// taken, whichever came first.
func (n *Node) loseLease() { n.loseOnce.Do(func() { close(n.lost) }) }

// Self returns this instance's name.
func (n *Node) Self() string { return n.opts.Name }

// Alive reports whether instance holds a lease now: false for a name that cannot
// be an instance's, and when the bucket gives no answer within CallTimeout (see
// readLease).
func (n *Node) Alive(ctx context.Context, instance string) bool {
	if !validName(instance) {
		return false
	}
	_, err := n.readLease(ctx, instance)
	if err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		n.log.Warn().Err(err).Str("peer", instance).Msg("reading a lease failed")
	}
	return err == nil
}

// readLease reads instance's lease. NATS can fail to answer for a moment while
// the lease is there: a server of a NATS cluster goes, and a read in flight
// through it with it, or the bucket's replicas stop serving reads (no
// responders) while its leadership moves. Taken for the lease's absence, that
// would have the caller claim the requests of a live instance. So each try gets
// a fifth of CallTimeout, and a failure other than ErrKeyNotFound is tried again
// until ctx ends or CallTimeout has passed; then the last error is returned.
func (n *Node) readLease(ctx context.Context, instance string) (jetstream.KeyValueEntry, error) {
	l := backoff.Start(10*time.Millisecond, n.opts.CallTimeout/10, n.opts.CallTimeout, n.opts.CallTimeout/5)
	for {
		tctx, cancel := l.Try(ctx)
		e, err := n.kv.Get(tctx, instance)
		cancel()
		if err == nil || errors.Is(err, jetstream.ErrKeyNotFound) || !l.Pause(ctx) {
			return e, err
		}
	}
}

// Close leaves the cluster: it stops refreshing and polling, deletes its lease (so
// the others see it depart at their next poll), closes its control subscription
// and its inboxes, and waits for the handlers and callbacks it started to return
// (do not call it from one of them). Later Calls and Delivers fail with ErrClosed;
// watches never fire. Close is idempotent.
func (n *Node) Close() {
	n.once.Do(func() {
		n.mu.Lock()
		n.closed = true
		subs := make([]*nats.Subscription, 0, len(n.inboxes)+1)
		for s := range n.inboxes {
			subs = append(subs, s)
		}
		clear(n.inboxes)
		clear(n.watches)
		n.mu.Unlock()
		n.cancel()
		if n.calls != nil {
			subs = append(subs, n.calls)
		}
		for _, s := range subs {
			_ = s.Unsubscribe() // fails only when the connection is closed, which ends it too
		}
		_ = n.nc.FlushTimeout(n.opts.CallTimeout) // the server knows: calls and Delivers fail at once
		n.loops.Wait()
		if err := n.release(); err != nil {
			n.log.Warn().Err(err).Msg("deleting the lease failed; the others will see this instance depart when it lapses")
		}
		n.tasks.Wait()
		n.log.Info().Msg("left the cluster")
	})
}

// goLocked runs f on a goroutine of its own that Close waits for, unless the
// node is closed; it reports whether f runs. n.mu is held.
func (n *Node) goLocked(f func()) bool {
	if n.closed {
		return false
	}
	n.tasks.Add(1)
	go func() {
		defer n.tasks.Done()
		f()
	}()
	return true
}

// release deletes the lease if it is still this incarnation's. A refresh that
// Close interrupted may have moved its revision on unseen.
func (n *Node) release() error {
	ctx, cancel := context.WithTimeout(context.Background(), n.opts.CallTimeout)
	defer cancel()
	err := n.kv.Delete(ctx, n.opts.Name, jetstream.LastRevision(n.rev))
	if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		e, gerr := n.kv.Get(ctx, n.opts.Name)
		if gerr != nil || string(e.Value()) != string(n.inc) {
			return nil // lapsed, or another process's now
		}
		err = n.kv.Delete(ctx, n.opts.Name, jetstream.LastRevision(e.Revision()))
	}
	return err
}
