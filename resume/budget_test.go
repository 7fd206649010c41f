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
// ProgressHistory ago goes as the request's next progress is queued: a client
// back after a long absence gets every other message, and of each token the
// values of the last ProgressHistory and the newest. With a negative
// ProgressHistory every value stays (the budget's to drop).
func TestProgressHistory(t *testing.T) {
	for _, c := range []struct {
		name    string
		history time.Duration
		kept    []int // the "p" values the client gets (0-14: one every 2 s)
	}{
		// At 28 s, the values superseded before 18 s (0-7, superseded at 2-16 s) are gone.
		{"default 10 s", 0, []int{8, 9, 10, 11, 12, 13, 14}},
		{"every value", -1, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14}},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e, _ := newEngine(t, &resume.Options{ProgressHistory: c.history})
				r, _ := start(t, e, `1`, nil)
				note := appendMsg(t, r, resume.KindNotification, "")
				var p []uint64
				for i := range 15 {
					if i > 0 {
						time.Sleep(2 * time.Second)
					}
					p = append(p, appendMsg(t, r, resume.KindProgress, "p"))
				}
				q := appendMsg(t, r, resume.KindProgress, "q") // another token: never superseded by p's
				want := []uint64{note}
				for _, i := range c.kept {
					want = append(want, p[i])
				}
				want = append(want, q)
				s := newSink()
				attach(t, r, s, 0)
				wantSeqs(t, "the client back at 28 s", s.seqs(t), want...)
			})
		})
	}
}
