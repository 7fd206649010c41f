package mcp

import (
	"fmt"
	"testing"
	"testing/synctest"

	"github.com/mcp-resume/mcp-resume/resume"
)

// An await call's sink refuses what comes after the call has answered: a
// write the request has under way as the await's time comes fails, and the
// request keeps its message for the next await. Accepted, it would count as
// delivered to an await that had answered, and no later await would see it
// (the shared deferral cases lost a progress notification that way under
// load).
func TestAwaitSinkAfterItsAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, err := resume.New(t.Context(), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		r, _, err := e.Start([]byte("1"), &resume.StartOptions{})
		if err != nil {
			t.Fatal(err)
		}
		progress := func(n int) {
			if _, err := r.Append(KindProgress, "p", func(seq uint64) []byte { return fmt.Appendf(nil, `{"progress":%d,"seq":%d}`, n, seq) }); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
		}
		first := newAwaitSink()
		if err := r.Attach(first, 0); err != nil {
			t.Fatal(err)
		}
		progress(1)
		first.close() // its time came; the request is still attached to it
		progress(2)   // the write under way as it came
		r.Detach(first)
		if got := first.take(); len(got) != 1 || string(got[0].Data) != `{"progress":1,"seq":1}` {
			t.Fatalf("the first await took %v, want the first progress alone", got)
		}
		next := newAwaitSink()
		if err := r.Attach(next, 0); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if got := next.take(); len(got) != 1 || string(got[0].Data) != `{"progress":2,"seq":2}` {
			t.Fatalf("the next await took %v, want the second progress", got)
		}
	})
}
