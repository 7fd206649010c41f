package resume_test

import (
	"context"
	"errors"
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
		e := mustNew(t, memstore.New(), &resume.Options{MaxWait: time.Minute})
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
	e := mustNew(t, nil, &resume.Options{MaxWait: 10 * time.Minute})
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

// A request with a TTL has that one deadline from its start, whatever happens
// to it: polls (Touch) and attachments do not move it; a request still running
// then expires (its context ends), one ended is freed though its retention
// would keep it longer; one ended before has no shorter deadline either.
func TestTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, _ := newEngine(t, &resume.Options{MaxWait: time.Minute, Retention: time.Minute, DeliveredRetention: time.Second})
		polled, tok := start(t, e, `1`, &resume.StartOptions{TTL: time.Hour, Task: true})
		attached, _ := start(t, e, `2`, &resume.StartOptions{TTL: time.Hour, Sink: newSink()})
		ended, _ := start(t, e, `3`, &resume.StartOptions{TTL: time.Hour})
		complete(t, ended)
		plain, _ := start(t, e, `4`, nil)
		for i := range 5 { // polled every 10 minutes: MaxWait would have ended it
			time.Sleep(10 * time.Minute)
			if err := polled.Touch(0); err != nil {
				t.Fatalf("Touch %d: %v", i+1, err)
			}
		}
		synctest.Wait()
		if !plain.Gone() {
			t.Fatal("a request without a TTL outlived its MaxWait")
		}
		if polled.Gone() || attached.Gone() || ended.Gone() {
			t.Fatalf("before the TTL: gone polled %v, attached %v, ended %v", polled.Gone(), attached.Gone(), ended.Gone())
		}
		time.Sleep(10*time.Minute - time.Nanosecond)
		synctest.Wait()
		if polled.Gone() || ended.Gone() {
			t.Fatal("gone before the TTL")
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		for name, r := range map[string]*resume.Request{"polled": polled, "attached": attached, "ended": ended} {
			if !r.Gone() {
				t.Errorf("%s: still there at its TTL", name)
			}
		}
		wantCause(t, attached.Context(), resume.ErrExpired)
		_, err := e.Lookup(tok, []byte(`1`))
		wantErr(t, "Lookup of the polled request", err, resume.ErrExpired)
	})
}

// A cancelled task answers cancelled to the end of its ttl, though that is
// longer than TombstoneTTL; a cancelled request without one, for TombstoneTTL.
func TestTaskTombstoneLastsItsTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, _ := newEngine(t, &resume.Options{TombstoneTTL: time.Hour})
		task, taskTok := start(t, e, `1`, &resume.StartOptions{Task: true, TTL: 2 * time.Hour})
		plain, plainTok := start(t, e, `2`, nil)
		task.Cancel()
		plain.Cancel()
		time.Sleep(90 * time.Minute)
		r3, _ := start(t, e, `3`, nil)
		r3.Cancel() // a request that ends ages the old tombstones out
		_, err := e.Lookup(taskTok, []byte(`1`))
		wantErr(t, "the task after 90 minutes", err, resume.ErrCancelled)
		if _, err := e.Lookup(plainTok, []byte(`2`)); errors.Is(err, resume.ErrCancelled) {
			t.Errorf("the request without a ttl after 90 minutes: %v, want its tombstone gone", err)
		}
		time.Sleep(31 * time.Minute)
		r4, _ := start(t, e, `4`, nil)
		r4.Cancel()
		if _, err := e.Lookup(taskTok, []byte(`1`)); errors.Is(err, resume.ErrCancelled) {
			t.Errorf("the task past its ttl: %v, want its tombstone gone", err)
		}
	})
}

// A task's tombstone, and its stored record, go when its ttl is over, though no
// other request ends to age it out; so does a plain request's at TombstoneTTL.
func TestTombstonesAgeOnTheirOwn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, st := newEngine(t, &resume.Options{TombstoneTTL: time.Hour})
		if st == nil {
			t.Skip("the stored record needs a store")
		}
		task, taskTok := start(t, e, `1`, &resume.StartOptions{Task: true, TTL: 2 * time.Hour})
		plain, _ := start(t, e, `2`, nil)
		task.Cancel()
		plain.Cancel()
		synctest.Wait()
		h := resume.HashToken(taskTok)
		if rec, err := st.Get(context.Background(), h); err != nil || rec == nil {
			t.Fatalf("the task's stored tombstone: %v %v, want its record", rec, err)
		}
		if n := e.Stats().Tombstones; n != 2 {
			t.Fatalf("%d tombstones, want 2", n)
		}
		time.Sleep(time.Hour + time.Second)
		synctest.Wait()
		_, err := e.Lookup(taskTok, []byte(`1`))
		wantErr(t, "the task after an hour", err, resume.ErrCancelled)
		time.Sleep(time.Hour)
		synctest.Wait()
		if n := e.Stats().Tombstones; n != 0 {
			t.Errorf("%d tombstones past their time, want 0", n)
		}
		if rec, err := st.Get(context.Background(), h); err == nil && rec != nil {
			t.Errorf("the task's stored tombstone past its ttl: %+v, want it deleted", rec)
		}
	})
}
