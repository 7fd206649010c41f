package mcp

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"
)

// The limiter keeps a bucket only while it is not full: after a flood of
// failures, each from a session and an address of its own, a failure a minute
// later sweeps out every bucket that has refilled since, so memory follows the
// failures of the last refill intervals, not every key that ever failed.
func TestFailLimiterForgetsRefilledBuckets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newFailLimiter(2, time.Second)
		for i := range 5000 {
			l.fail(fmt.Sprint("s", i), fmt.Sprint("a", i))
		}
		if n := l.size(); n < 2*minBucketSweep {
			t.Fatalf("%d buckets after 5,000 failures at one instant, want them all kept (none refilled yet)", n)
		}
		// Drained, an address is remembered as long as it takes to refill (its
		// allowance is 200: 200 seconds).
		for range 300 {
			l.fail("deep", "deep")
		}
		time.Sleep(sweepEvery)
		l.fail("s", "a")
		if n := l.size(); n != 3 {
			t.Fatalf("%d buckets a minute later, want 3 (the last failure's two and the drained address)", n)
		}
		if w := l.wait("other", "deep"); w != 0 {
			t.Fatalf("the drained address is limited a minute later (wait %v), want 60 failures allowed again", w)
		}
	})
}
