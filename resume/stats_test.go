package resume_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-resume/mcp-resume/resume"
)

// Stats follows requests through their life: by state, attached or not, queued
// bytes, resumes, token failures and expiries.
func TestStats(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const maxWait = time.Minute
		e, _ := newEngine(t, &resume.Options{MaxWait: maxWait})
		want := func(what string, w resume.Stats) {
			t.Helper()
			synctest.Wait()
			if got := e.Stats(); got != w {
				t.Fatalf("%s: Stats = %+v\nwant %+v", what, got, w)
			}
		}
		want("new engine", resume.Stats{})
		s := newSink()
		a, tokA := start(t, e, `1`, &resume.StartOptions{Sink: s})
		b, tokB := start(t, e, `2`, nil)
		want("started", resume.Stats{Processing: 2, Attached: 1, Detached: 1})

		appendMsg(t, b, resume.KindNotification, "")
		queued := b.Status().QueuedBytes
		if queued == 0 {
			t.Fatal("no queued bytes after Append on a detached request")
		}
		want("queued", resume.Stats{Processing: 2, Attached: 1, Detached: 1, QueuedBytes: queued})

		if _, err := e.Lookup(tokA, []byte(`2`)); err == nil {
			t.Fatal("Lookup with another request's id succeeded")
		}
		if _, err := e.LookupAs(tokB, []byte(`2`), "mallory"); err == nil {
			t.Fatal("LookupAs of another principal succeeded")
		}
		want("token failures", resume.Stats{Processing: 2, Attached: 1, Detached: 1, QueuedBytes: queued, TokenFailures: 2})

		sb := newSink()
		attach(t, b, sb, 0)
		complete(t, a)
		st := e.Stats()
		// a's response was written to s: its result is kept with no sink.
		if st.Attaches != 1 || st.Completed != 1 || st.Processing != 1 || st.Attached != 1 || st.Detached != 1 {
			t.Fatalf("after a resume and a completion: %+v", st)
		}

		b.Detach(sb)
		a.Detach(s)
		time.Sleep(10 * maxWait) // b expires (maxWait); a's result is released after its retention
		synctest.Wait()
		st = e.Stats()
		if st.Expired != 2 || st.Processing+st.Completed+st.Attached+st.Detached != 0 || st.QueuedBytes != 0 || st.Tombstones != 2 {
			t.Fatalf("after expiry: %+v", st)
		}
	})
}
