// Package bucket is the arithmetic of a token bucket: how many tokens it holds
// as of a time, refilled at one per interval up to its capacity. The tools'
// rates keep them in memory (mcp) and in a cluster's KV bucket
// (resume/cluster) with the same arithmetic.
package bucket

import (
	"math"
	"time"
)

// Bucket holds Tokens as of At. The zero Bucket is one never used: full.
type Bucket struct {
	Tokens float64
	At     time.Time
}

// Take refills b to now (one token each every, up to capacity) and spends one
// token when it holds one; else it reports how long until it will.
func (b *Bucket) Take(now time.Time, capacity float64, every time.Duration) (bool, time.Duration) {
	b.refill(now, capacity, every)
	if b.Tokens >= 1 {
		b.Tokens--
		return true, 0
	}
	return false, time.Duration((1 - b.Tokens) * float64(every))
}

// Full reports whether b, refilled to now, holds capacity tokens: it is then
// as good as none.
func (b Bucket) Full(now time.Time, capacity float64, every time.Duration) bool {
	b.refill(now, capacity, every)
	return b.Tokens >= capacity
}

func (b *Bucket) refill(now time.Time, capacity float64, every time.Duration) {
	switch d := now.Sub(b.At); {
	case b.At.IsZero():
		b.Tokens = capacity
	case d > 0:
		b.Tokens = math.Min(capacity, b.Tokens+float64(d)/float64(every))
	}
	b.At = now
}
