package metrics

import (
	"context"
	"iter"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcp-resume/mcp-resume/resume"
)

// StoreTimer measures the latency of a resume.Store's calls, by operation, as the
// histogram mcp_resume_store_seconds{op}. Register it with Handler. It is safe
// for concurrent use, and what Wrap returns is when its Store is.
type StoreTimer struct {
	hist *prometheus.HistogramVec
}

var _ prometheus.Collector = (*StoreTimer)(nil)

// NewStoreTimer returns a StoreTimer.
func NewStoreTimer() *StoreTimer {
	return &StoreTimer{hist: prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "mcp_resume_store_seconds",
		Help: "Latency of the resume store's calls, by operation (replay and records: the whole iteration).",
		// 50µs (memory) to ~1.6s (a struggling remote JetStream).
		Buckets: prometheus.ExponentialBuckets(50e-6, 2, 16),
	}, []string{"op"})}
}

// Describe and Collect make the timer a prometheus.Collector.
func (t *StoreTimer) Describe(ch chan<- *prometheus.Desc) { t.hist.Describe(ch) }
func (t *StoreTimer) Collect(ch chan<- prometheus.Metric) { t.hist.Collect(ch) }

// Wrap returns s with every call timed. The result keeps s's contract, and is
// a resume.Lister, or a Lister and a Claimer, when s is; it tells s of
// deliveries when s is a resume.DeliveryWatcher.
func (t *StoreTimer) Wrap(s resume.Store) resume.Store {
	ts := &timedStore{s: s,
		put: t.hist.WithLabelValues("put"), get: t.hist.WithLabelValues("get"), appendOp: t.hist.WithLabelValues("append"),
		discard: t.hist.WithLabelValues("discard"), replay: t.hist.WithLabelValues("replay"),
		del: t.hist.WithLabelValues("delete"), records: t.hist.WithLabelValues("records"),
		claim: t.hist.WithLabelValues("claim"),
	}
	ls, list := s.(resume.Lister)
	cs, claim := s.(resume.Claimer)
	switch {
	case list && claim:
		return timedShared{timedListed{ts, ls}, cs}
	case list:
		return timedListed{ts, ls}
	}
	return ts
}

type timedStore struct {
	s resume.Store

	put, get, appendOp, discard, replay, del, records, claim prometheus.Observer
}

var (
	_ resume.Store           = (*timedStore)(nil)
	_ resume.DeliveryWatcher = (*timedStore)(nil)
)

func since(o prometheus.Observer, start time.Time) { o.Observe(time.Since(start).Seconds()) }

func (s *timedStore) Put(ctx context.Context, rec resume.Record) error {
	defer since(s.put, time.Now())
	return s.s.Put(ctx, rec)
}

func (s *timedStore) Get(ctx context.Context, h resume.TokenHash) (*resume.Record, error) {
	defer since(s.get, time.Now())
	return s.s.Get(ctx, h)
}

func (s *timedStore) Append(ctx context.Context, h resume.TokenHash, m resume.Message) error {
	defer since(s.appendOp, time.Now())
	return s.s.Append(ctx, h, m)
}

func (s *timedStore) Discard(ctx context.Context, h resume.TokenHash, seqs ...uint64) error {
	defer since(s.discard, time.Now())
	return s.s.Discard(ctx, h, seqs...)
}

func (s *timedStore) Delete(ctx context.Context, h resume.TokenHash) error {
	defer since(s.del, time.Now())
	return s.s.Delete(ctx, h)
}

// Delivered is the wrapped store's, when it is a resume.DeliveryWatcher.
func (s *timedStore) Delivered(h resume.TokenHash) {
	if w, ok := s.s.(resume.DeliveryWatcher); ok {
		w.Delivered(h)
	}
}

func (s *timedStore) Replay(ctx context.Context, h resume.TokenHash, after uint64) iter.Seq2[resume.Message, error] {
	return timedSeq(s.replay, s.s.Replay(ctx, h, after))
}

// timedListed is a timed resume.Lister.
type timedListed struct {
	*timedStore
	ls resume.Lister
}

var _ resume.Lister = timedListed{}

func (s timedListed) Records(ctx context.Context) iter.Seq2[resume.Record, error] {
	return timedSeq(s.records, s.ls.Records(ctx))
}

// timedShared is a timed resume.Lister, resume.Claimer and
// resume.FreshReplayer: a store of a cluster.
type timedShared struct {
	timedListed
	cs resume.Claimer
}

var _ resume.Claimer = timedShared{}

func (s timedShared) Claim(ctx context.Context, h resume.TokenHash, from, to string) (*resume.Record, error) {
	defer since(s.claim, time.Now())
	return s.cs.Claim(ctx, h, from, to)
}

var _ resume.FreshReplayer = timedShared{}

// ReplayFresh is the wrapped store's, timed as a replay (Replay for a store
// without it).
func (s timedShared) ReplayFresh(ctx context.Context, h resume.TokenHash, after uint64) iter.Seq2[resume.Message, error] {
	if f, ok := s.s.(resume.FreshReplayer); ok {
		return timedSeq(s.replay, f.ReplayFresh(ctx, h, after))
	}
	return s.Replay(ctx, h, after)
}

// timedSeq observes the time from the start of an iteration to its end (or the
// caller's break).
func timedSeq[T any](o prometheus.Observer, seq iter.Seq2[T, error]) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		defer since(o, time.Now())
		seq(yield)
	}
}
