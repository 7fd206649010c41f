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

// failLimiter is the brute-force protection of resume tokens: one token bucket per
// key (a principal; a remote address for sessions without one), spent by each failed token check (a
// getStatus, resume or cancel by token answered not_found) and refilled at one
// failure per refill interval up to burst. A key whose bucket is empty has its
// token checks refused until the bucket holds one failure again. It reads the
// clock through time.Now, so tests drive it with testing/synctest.
type failLimiter struct {
	burst  float64
	refill time.Duration

	mu      sync.Mutex
	buckets map[string]*bucket
	sweepAt int
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
	return &failLimiter{burst: float64(burst), refill: refill, buckets: make(map[string]*bucket), sweepAt: 1024}
}

// level returns key's bucket brought up to now (nil when it is full: not stored).
func (l *failLimiter) level(key string, now time.Time) *bucket {
	b := l.buckets[key]
	if b == nil {
		return nil
	}
	b.tokens = math.Min(l.burst, b.tokens+float64(now.Sub(b.at))/float64(l.refill))
	b.at = now
	if b.tokens >= l.burst {
		delete(l.buckets, key)
		return nil
	}
	return b
}

// wait returns how long key stays limited; 0 when it is not.
func (l *failLimiter) wait(key string) time.Duration {
	if l == nil {
		return 0
	}
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if b := l.level(key, now); b != nil && b.tokens < 1 {
		return time.Duration((1 - b.tokens) * float64(l.refill))
	}
	return 0
}

// fail spends one failure from key's bucket.
func (l *failLimiter) fail(key string) {
	if l == nil {
		return
	}
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.level(key, now)
	if b == nil {
		b = &bucket{tokens: l.burst, at: now}
		l.buckets[key] = b
	}
	b.tokens = math.Max(0, b.tokens-1)
	if len(l.buckets) >= l.sweepAt {
		// Buckets that refilled are forgotten, so the map holds only keys that
		// failed recently.
		for k := range l.buckets {
			l.level(k, now)
		}
		l.sweepAt = max(1024, 2*len(l.buckets))
	}
}
