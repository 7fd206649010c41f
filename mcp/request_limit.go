package mcp

import (
	"math"
	"sync"
	"time"
)

// Defaults of the failed token check limit (Options.TokenFailureBurst and
// Options.TokenFailureRefill).
const (
	DefaultTokenFailureBurst  = 10
	DefaultTokenFailureRefill = time.Second
)

// addressBurstFactor is how many times TokenFailureBurst a principal's (or, without
// one, a remote address's) bucket of failed token checks holds: the allowance
// that bounds an attacker who opens a new session for each guess.
const addressBurstFactor = 100

// failLimiter is the brute-force protection of resume tokens. Each failed token
// check (a getStatus, resume, cancel, retry or task request by token answered
// not_found) spends one failure from two token buckets: its session's, which
// holds burst failures, and its address's (a principal; a remote address for
// sessions without one), which holds addressBurstFactor times as many. Each
// regains one failure per refill. A token check is refused while either bucket
// of its session is empty, unless it names a request the session carries (see
// connState.lookup).
//
// So an attacker gets burst checked guesses from one session and
// addressBurstFactor*burst from one address in a burst, then one per refill per
// address however many sessions it opens; a session is held back by others'
// failures only once its address's whole allowance is gone, and never from a
// request it carries.
//
// A bucket is stored only while it is not full, and a bucket charged with n
// failures is full again within n refill intervals: on average the buckets held
// in each map number at most the failed checks of one refill interval (the
// failure rate times refill), plus the full ones that the next sweep (when the
// maps have doubled since the last, or a minute later) forgets.
// It reads the clock through time.Now, so tests drive it with testing/synctest.
type failLimiter struct {
	refill time.Duration

	mu        sync.Mutex // guards the fields below
	sessions  buckets    // by session id
	addresses buckets    // by connState.limitKey
	sweepAt   int        // size of the two maps at which full buckets are swept out
	sweptAt   time.Time  // when they last were
}

// sweepEvery is how often, at the most, a failure sweeps the full buckets out
// when the maps have not grown to their sweep size.
const sweepEvery = time.Minute

// minBucketSweep is the smallest size of the bucket maps at which they are swept.
const minBucketSweep = 1024

type buckets struct {
	burst float64
	m     map[string]*bucket
}

type bucket struct {
	tokens float64   // failures still allowed, as of at
	at     time.Time // when tokens was computed
}

// newFailLimiter returns nil (no limit) when burst < 0 or refill < 0.
func newFailLimiter(burst int, refill time.Duration) *failLimiter {
	if burst == 0 {
		burst = DefaultTokenFailureBurst
	}
	if refill == 0 {
		refill = DefaultTokenFailureRefill
	}
	if burst < 0 || refill < 0 {
		return nil
	}
	return &failLimiter{
		refill:    refill,
		sessions:  buckets{burst: float64(burst), m: make(map[string]*bucket)},
		addresses: buckets{burst: float64(addressBurstFactor * burst), m: make(map[string]*bucket)},
		sweepAt:   minBucketSweep,
		sweptAt:   time.Now(),
	}
}

// level returns key's bucket brought up to now (nil when it is full: not stored).
func (bs *buckets) level(key string, now time.Time, refill time.Duration) *bucket {
	b := bs.m[key]
	if b == nil {
		return nil
	}
	b.tokens = math.Min(bs.burst, b.tokens+float64(now.Sub(b.at))/float64(refill))
	b.at = now
	if b.tokens >= bs.burst {
		delete(bs.m, key)
		return nil
	}
	return b
}

// waitLocked returns how long key's bucket stays empty; 0 when it is not.
func (bs *buckets) waitLocked(key string, now time.Time, refill time.Duration) time.Duration {
	if b := bs.level(key, now, refill); b != nil && b.tokens < 1 {
		return time.Duration((1 - b.tokens) * float64(refill))
	}
	return 0
}

// failLocked spends one failure from key's bucket.
func (bs *buckets) failLocked(key string, now time.Time, refill time.Duration) {
	b := bs.level(key, now, refill)
	if b == nil {
		b = &bucket{tokens: bs.burst, at: now}
		bs.m[key] = b
	}
	b.tokens = math.Max(0, b.tokens-1)
}

// wait returns how long the session (session "": none, as for a stateless one)
// at address stays limited; 0 when it is not.
func (l *failLimiter) wait(session, address string) time.Duration {
	if l == nil {
		return 0
	}
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.addresses.waitLocked(address, now, l.refill)
	if session != "" {
		w = max(w, l.sessions.waitLocked(session, now, l.refill))
	}
	return w
}

// fail spends one failure from the buckets of session and address.
func (l *failLimiter) fail(session, address string) {
	if l == nil {
		return
	}
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.addresses.failLocked(address, now, l.refill)
	if session != "" {
		l.sessions.failLocked(session, now, l.refill)
	}
	if n := len(l.sessions.m) + len(l.addresses.m); n >= l.sweepAt || now.Sub(l.sweptAt) >= sweepEvery {
		// Buckets that refilled are forgotten, so the maps hold only keys that
		// failed recently.
		for _, bs := range []*buckets{&l.sessions, &l.addresses} {
			for k := range bs.m {
				bs.level(k, now, l.refill)
			}
		}
		l.sweepAt = max(minBucketSweep, 2*(len(l.sessions.m)+len(l.addresses.m)))
		l.sweptAt = now
	}
}

// size returns the number of buckets stored (for tests).
func (l *failLimiter) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.sessions.m) + len(l.addresses.m)
}
