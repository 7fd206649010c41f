package resume_test

import (
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-resume/mcp-resume/resume"
)

// size is the size of a message encoder makes (with a one-digit seq).
func size(kind, key string) int { return len(encoder(kind, key)(1)) }

// Past MaxBytes the oldest kept results go first, and answer ErrEvicted (an
// ErrExpired); the newer ones stay.
func TestMaxBytesEvictsOldestResults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		resp := size("response", "")
		e, _ := newEngine(t, &resume.Options{MaxBytes: int64(3*resp + resp/2)})
		var toks []string
		for i := range 5 {
			r, tok := start(t, e, fmt.Sprint(i), nil)
			complete(t, r)
			toks = append(toks, tok)
		}
		for i, tok := range toks {
			_, err := e.Lookup(tok, []byte(fmt.Sprint(i)))
			switch {
			case i < 2 && (!errors.Is(err, resume.ErrEvicted) || !errors.Is(err, resume.ErrExpired)):
				t.Errorf("result %d, among the oldest past the byte budget: %v, want ErrEvicted (an ErrExpired)", i, err)
			case i >= 2 && err != nil:
				t.Errorf("result %d, within the byte budget: %v", i, err)
			}
		}
		st := e.Stats()
		if st.Evicted != 2 || st.QueuedBytes != 3*resp {
			t.Errorf("Stats: %d evicted, %d bytes queued; want 2 and %d", st.Evicted, st.QueuedBytes, 3*resp)
		}
	})
}

// A running request's messages that cannot go (server-to-client requests) use the
// budget up: Start refuses new requests with ErrFull until some are freed.
// Meanwhile a running request that queues more keeps only what cannot go.
func TestMaxBytesFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		req := size("request", "")
		e, _ := newEngine(t, &resume.Options{MaxBytes: int64(4 * req)})
		a, _ := start(t, e, `1`, nil)
		for range 4 {
			appendMsg(t, a, resume.KindRequest, "")
		}
		if _, _, err := e.Start([]byte(`2`), nil); !errors.Is(err, resume.ErrFull) {
			t.Fatalf("Start with the budget used up: %v, want ErrFull", err)
		}
		appendMsg(t, a, resume.KindProgress, "p")
		appendMsg(t, a, resume.KindProgress, "p")
		appendMsg(t, a, resume.KindNotification, "")
		if want := 4*req + size("progress", "p"); a.Status().QueuedBytes != want {
			t.Errorf("over the budget, the request holds %d bytes, want %d: its requests and its newest progress", a.Status().QueuedBytes, want)
		}
		a.Cancel()
		if _, _, err := e.Start([]byte(`2`), nil); err != nil {
			t.Fatalf("Start once the budget has room: %v", err)
		}
	})
}

// A principal past MaxBytesPerPrincipal loses its own oldest results and gets
// ErrFull; another principal's results and new requests are untouched.
func TestMaxBytesPerPrincipal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		resp := size("response", "")
		e, _ := newEngine(t, &resume.Options{MaxBytes: int64(100 * resp), MaxBytesPerPrincipal: int64(2*resp + resp/2)})
		bob, bobTok := start(t, e, `b`, &resume.StartOptions{Principal: "bob"})
		complete(t, bob)
		var toks []string
		for i := range 3 {
			r, tok := start(t, e, fmt.Sprint(i), &resume.StartOptions{Principal: "alice"})
			complete(t, r)
			toks = append(toks, tok)
		}
		if _, err := e.LookupAs(toks[0], []byte(`0`), "alice"); !errors.Is(err, resume.ErrEvicted) {
			t.Errorf("alice's oldest result past her budget: %v, want ErrEvicted", err)
		}
		for i := 1; i < 3; i++ {
			if _, err := e.LookupAs(toks[i], []byte(fmt.Sprint(i)), "alice"); err != nil {
				t.Errorf("alice's result %d: %v", i, err)
			}
		}
		if _, err := e.LookupAs(bobTok, []byte(`b`), "bob"); err != nil {
			t.Errorf("bob's result, older than all of alice's: %v", err)
		}
		// Her running request's questions, which cannot go, pass her budget even
		// with all her results released.
		a, _ := start(t, e, `r`, &resume.StartOptions{Principal: "alice"})
		for range 3 {
			appendMsg(t, a, resume.KindRequest, "")
		}
		if _, _, err := e.Start([]byte(`x`), &resume.StartOptions{Principal: "alice"}); !errors.Is(err, resume.ErrFull) {
			t.Errorf("alice's Start past her budget: %v, want ErrFull", err)
		}
		if _, _, err := e.Start([]byte(`y`), &resume.StartOptions{Principal: "bob"}); err != nil {
			t.Errorf("bob's Start: %v", err)
		}
	})
}

// A result passed over while another principal's were released stays the
// oldest: the next release for MaxRetained takes it first.
func TestEvictionKeepsOrderOfPassedOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		resp := size("response", "")
		e, _ := newEngine(t, &resume.Options{MaxRetained: 4, MaxBytesPerPrincipal: int64(2*resp + resp/2)})
		bob, bobTok := start(t, e, `b`, &resume.StartOptions{Principal: "bob"})
		complete(t, bob)
		var toks []string
		for i := range 3 { // alice's first goes; bob's, older, is passed over
			r, tok := start(t, e, fmt.Sprint(i), &resume.StartOptions{Principal: "alice"})
			complete(t, r)
			toks = append(toks, tok)
		}
		if _, err := e.LookupAs(bobTok, []byte(`b`), "bob"); err != nil {
			t.Fatalf("bob's result within his budget: %v", err)
		}
		carol, carolTok := start(t, e, `c`, &resume.StartOptions{Principal: "carol"})
		complete(t, carol)
		dave, _ := start(t, e, `d`, &resume.StartOptions{Principal: "dave"})
		complete(t, dave) // a fifth kept result: the oldest goes
		if _, err := e.LookupAs(bobTok, []byte(`b`), "bob"); !errors.Is(err, resume.ErrEvicted) {
			t.Errorf("bob's result, the oldest past MaxRetained: %v, want ErrEvicted", err)
		}
		for i := 1; i < 3; i++ {
			if _, err := e.LookupAs(toks[i], []byte(fmt.Sprint(i)), "alice"); err != nil {
				t.Errorf("alice's result %d: %v", i, err)
			}
		}
		if _, err := e.LookupAs(carolTok, []byte(`c`), "carol"); err != nil {
			t.Errorf("carol's result: %v", err)
		}
	})
}

// Progress that a newer value of its token superseded more than
// ProgressHistory ago goes as the request's next progress is queued, and once
// the request has had no client for longer than ProgressHistory, superseded
// progress goes at once: a client back within the history gets every value
// queued while it was away, one away longer every other message and, of each
// token, the newest value. With a negative ProgressHistory every value stays
// (the budget's to drop).
func TestProgressHistory(t *testing.T) {
	for _, c := range []struct {
		name    string
		history time.Duration
		leave   time.Duration // when the client attached from the start leaves; 0: none ever was
		tight   bool          // the process is tight on memory (Options.MemoryTight)
		kept    []int         // the "p" values the client gets back at 28 s (0-14: one every 2 s)
	}{
		{"away all along", 0, 0, false, []int{14}},
		// Away 13 s: at 26 s (p13), past the history, p8-p12 go.
		{"away longer than the history", 0, 15 * time.Second, false, []int{14}},
		// Away 9 s: every value from p10 (20 s) on.
		{"back within the history", 0, 19 * time.Second, false, []int{10, 11, 12, 13, 14}},
		{"a history longer than the absence", 30 * time.Second, 0, false, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14}},
		{"every value", -1, 0, false, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14}},
		// Tight on memory, a request holds the newest of each token alone,
		// whatever its history and its client.
		{"back within the history, tight on memory", 0, 19 * time.Second, true, []int{14}},
		{"every value, tight on memory", -1, 0, true, []int{14}},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				opts := &resume.Options{ProgressHistory: c.history}
				if c.tight {
					opts.MemoryTight = func() bool { return true }
				}
				e, _ := newEngine(t, opts)
				first := newSink()
				so := &resume.StartOptions{}
				if c.leave > 0 {
					so.Sink = first
				}
				r, _ := start(t, e, `1`, so)
				began := time.Now()
				note := appendMsg(t, r, resume.KindNotification, "")
				var p []uint64
				left := began.Add(c.leave)
				for i := range 15 {
					at := began.Add(time.Duration(i) * 2 * time.Second)
					if c.leave > 0 && time.Now().Before(left) && !at.Before(left) {
						time.Sleep(time.Until(left))
						synctest.Wait() // what was queued reached it
						r.Detach(first)
					}
					time.Sleep(time.Until(at))
					p = append(p, appendMsg(t, r, resume.KindProgress, "p"))
				}
				q := appendMsg(t, r, resume.KindProgress, "q") // another token: never superseded by p's
				var want []uint64
				if c.leave == 0 {
					want = append(want, note)
				}
				for _, i := range c.kept {
					want = append(want, p[i])
				}
				want = append(want, q)
				s := newSink()
				attach(t, r, s, first.top(t))
				synctest.Wait()
				wantSeqs(t, "the client back at 28 s", s.seqs(t), want...)
			})
		})
	}
}
