package resume_test

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-resume/mcp-resume/resume"
	"github.com/mcp-resume/mcp-resume/resume/memstore"
)

// Re-arming a request's deadline leaves stale entries in the engine's queues; they
// are swept out, so the queues stay bounded, and only the newest deadline acts.
func TestDeadlinesStayBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := resume.New(memstore.New(), &resume.Options{MaxWait: time.Minute})
		defer e.Close()
		r, _, err := e.Start([]byte(`1`), nil) // detached: its maxWait clock runs
		if err != nil {
			t.Fatal(err)
		}
		for range 10_000 {
			time.Sleep(time.Millisecond)
			if err := r.Touch(0); err != nil {
				t.Fatal(err)
			}
		}
		if n := resume.QueuedDeadlines(e); n > 128 {
			t.Errorf("%d deadlines queued for one request", n)
		}
		time.Sleep(time.Minute - time.Nanosecond)
		synctest.Wait()
		if r.Gone() {
			t.Fatal("expired before MaxWait since the last Touch")
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if !r.Gone() {
			t.Fatal("not expired at MaxWait since the last Touch")
		}
		if n := resume.QueuedDeadlines(e); n != 0 {
			t.Errorf("%d deadlines queued after the request expired", n)
		}
	})
}

// A request freed long before its deadline would come due (cancelled, or its
// result acknowledged) leaves the queues at the next sweep, not at that deadline:
// a stale entry still points to its request, which would keep its memory.
func TestFreedRequestsLeaveTheQueues(t *testing.T) {
	e := resume.New(nil, &resume.Options{MaxWait: 10 * time.Minute})
	defer e.Close()
	const n = 1000
	var freed atomic.Int64
	rs := make([]*resume.Request, n)
	for i := range rs {
		r, _, err := e.Start(fmt.Appendf(nil, "%d", i), nil) // detached: maxWait runs
		if err != nil {
			t.Fatal(err)
		}
		runtime.AddCleanup(r, func(c *atomic.Int64) { c.Add(1) }, &freed)
		rs[i] = r
	}
	for i, r := range rs {
		r.Cancel()
		rs[i] = nil
	}
	if q := resume.QueuedDeadlines(e); q > 64 {
		t.Errorf("%d deadlines queued after all %d requests were cancelled; want at most 64", q, n)
	}
	// Cleanups run on a goroutine of their own after a collection.
	for i := 0; i < 100 && freed.Load() < n-64; i++ {
		runtime.GC()
		runtime.Gosched()
	}
	if got := freed.Load(); got < n-64 {
		t.Errorf("%d of %d cancelled requests were collected; want all but at most 64", got, n)
	}
}
