package resume_test

import (
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
