package oauth

import (
	"fmt"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

// The limit keeps a bucket for at most maxSources sources, forgetting the
// least recently seen (in constant time: no scan of the others); a source
// seen again is kept, with what it has spent.
func TestIntrospectLimitForgetsLeastRecent(t *testing.T) {
	var l introspectLimit
	now := time.Now()
	l.allow("flooder", now)
	l.global = rate.NewLimiter(rate.Inf, 0) // the global allowance is not what this test is about
	for range introspectBurst {
		l.allow("flooder", now)
	}
	if l.allow("flooder", now) {
		t.Fatal("the flooder's bucket is not empty after its burst")
	}
	// Twice as many sources as are kept, each spending one token (none of
	// their buckets full), the flooder seen again now and then.
	for i := range 2 * maxSources {
		if !l.allow(fmt.Sprint("source-", i), now) {
			t.Fatalf("source %d refused its first token", i)
		}
		if i%1000 == 0 {
			l.allow("flooder", now)
		}
	}
	if n := l.sources(); n != maxSources {
		t.Fatalf("%d sources kept, want %d", n, maxSources)
	}
	if l.allow("flooder", now) {
		t.Fatal("the flooder, seen recently, came back with a full bucket")
	}
	if _, kept := l.byKey["source-0"]; kept {
		t.Fatal("the least recently seen source is kept")
	}
}
