package resume_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-resume/mcp-resume/resume"
)

// A follower (AttachFollow) of a request in ack mode is delivered what is
// written to it: the next follower gets only what came after, the questions
// still unanswered and the final response, never what an earlier one took.
func TestFollowersShareDelivery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, _ := newEngine(t, nil)
		r, _ := start(t, e, `1`, &resume.StartOptions{AckMode: true})
		c := newSink()
		attach(t, r, c, 0)
		appendMsg(t, r, resume.KindProgress, `"p"`)  // 1: the client's own connection
		appendMsg(t, r, resume.KindNotification, "") // 2
		written := r.DetachWritten(c)
		if written != 2 {
			t.Fatalf("DetachWritten = %d, want 2", written)
		}
		appendMsg(t, r, resume.KindProgress, `"q"`) // 3: detached
		a := newSink()
		if err := r.AttachFollow(a, written); err != nil {
			t.Fatal(err)
		}
		q := appendMsg(t, r, resume.KindRequest, "") // 4: a question
		appendMsg(t, r, resume.KindNotification, "") // 5
		wantSeqs(t, "first follower", a.seqs(t), 3, 4, 5)
		r.Detach(a)

		b := newSink()
		if err := r.AttachFollow(b, written); err != nil {
			t.Fatal(err)
		}
		wantSeqs(t, "second follower: the question, unanswered", b.seqs(t), 4)
		r.Resolve(q)
		appendMsg(t, r, resume.KindNotification, "") // 6
		complete(t, r)                               // 7
		wantSeqs(t, "second follower", b.seqs(t), 4, 6, 7)
		r.Detach(b)

		f := newSink()
		if err := r.AttachFollow(f, 0); err != nil {
			t.Fatal(err)
		}
		wantSeqs(t, "a follower after the end: the response again", f.seqs(t), 7)
	})
}

// A follower that takes over from another while that one's write is in
// flight waits for its outcome, in ack mode too, and longer than a resume
// would (a write through another instance): the message goes to one of them.
func TestFollowerTakeoverWaitsForWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, _ := newEngine(t, nil)
		r, _ := start(t, e, `1`, &resume.StartOptions{AckMode: true})
		a := &gateSink{gate: make(chan struct{}), written: make(chan []byte, 2)}
		if err := r.AttachFollow(a, 0); err != nil {
			t.Fatal(err)
		}
		go appendAsync(t, r) // written to a: blocks there
		synctest.Wait()
		b := newSink()
		attached := make(chan struct{})
		go func() {
			defer close(attached)
			if err := r.AttachFollow(b, 0); err != nil {
				t.Error(err)
			}
		}()
		time.Sleep(time.Second) // far past takeoverWait
		synctest.Wait()
		wantSeqs(t, "the new follower while the old one writes", b.seqs(t))
		close(a.gate)
		<-attached
		synctest.Wait()
		if got := decode(t, <-a.written); got.seq != 1 {
			t.Fatalf("the old follower got seq %d, want 1", got.seq)
		}
		wantSeqs(t, "the new follower after the old one's write", b.seqs(t))
	})
}
