package resume_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-resume/mcp-resume/resume"
)

// windowed returns a request of a client without acks that was delivered
// messages 1-5 (2 a question, kept until answered; the others progress) on a
// connection that then died, and queued 6 and 7 while detached.
func windowed(t *testing.T, opts *resume.Options) *resume.Request {
	t.Helper()
	e, _ := newEngine(t, opts)
	r, _ := start(t, e, `1`, nil)
	first := newSink()
	attach(t, r, first, 0)
	appendMsg(t, r, resume.KindProgress, "p")
	appendMsg(t, r, resume.KindRequest, "")
	for range 3 {
		appendMsg(t, r, resume.KindProgress, "p")
	}
	wantSeqs(t, "first connection", first.seqs(t), 1, 2, 3, 4, 5)
	r.Detach(first)
	appendMsg(t, r, resume.KindProgress, "p")
	appendMsg(t, r, resume.KindProgress, "p")
	return r
}

// A client without acks whose connection died with messages in its buffers
// acknowledges for the first time when it resumes: it gets again what came after
// its ack, in order, with what was kept all along (the question).
func TestReplayWindowFirstAck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := windowed(t, nil)
		s := newSink()
		attach(t, r, s, 1)
		wantSeqs(t, "resume with ack 1", s.seqs(t), 2, 3, 4, 5, 6, 7)
		// Now in ack mode: a second resume gets what was not acknowledged.
		r.Detach(s)
		again := newSink()
		attach(t, r, again, 4)
		wantSeqs(t, "second resume with ack 4", again.seqs(t), 5, 6, 7)
	})
}

// Without an ack a resume gets what was never written, and nothing twice; a
// retried call (AttachAll) gets everything.
func TestReplayWindowNoAck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := windowed(t, nil)
		s := newSink()
		attach(t, r, s, 0)
		wantSeqs(t, "resume without ack", s.seqs(t), 2, 6, 7)
		r.Detach(s)
		all := newSink()
		if err := r.AttachAll(all); err != nil {
			t.Fatal(err)
		}
		wantSeqs(t, "retried call", all.seqs(t), 1, 2, 3, 4, 5, 6, 7)
	})
}

// The window keeps the newest ReplayWindowBytes, for ReplayWindow after the last
// delivery.
func TestReplayWindowBounds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := size("progress", "p")
		r := windowed(t, &resume.Options{ReplayWindowBytes: 2 * p})
		s := newSink()
		attach(t, r, s, 1)
		wantSeqs(t, "resume past the window's bytes", s.seqs(t), 2, 4, 5, 6, 7)

		r = windowed(t, &resume.Options{ReplayWindow: time.Minute})
		time.Sleep(time.Minute + time.Second)
		s = newSink()
		attach(t, r, s, 1)
		wantSeqs(t, "resume past the window's time", s.seqs(t), 2, 6, 7)
	})
}
