package resume_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-resume/mcp-resume/resume"
	"github.com/mcp-resume/mcp-resume/resume/memstore"
)

func TestStartAndLookup(t *testing.T) {
	e, _ := newEngine(t, nil)
	id := []byte(`"req-1"`)
	r, tok, err := e.Start(id, nil)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if len(tok) != 43 {
		t.Fatalf("token %d chars, want 43", len(tok))
	}
	if b, err := base64.RawURLEncoding.DecodeString(tok); err != nil || len(b) != 32 {
		t.Fatalf("token is not 32 bytes of base64url: %d bytes, %v", len(b), err)
	}
	id[1] = 'X' // Start keeps its own copy of the id
	if string(r.ID()) != `"req-1"` {
		t.Fatalf("ID() = %s after the caller changed its slice", r.ID())
	}
	r2, tok2 := start(t, e, `"req-2"`, nil)
	if tok2 == tok {
		t.Fatal("two requests got the same token")
	}

	got, err := e.Lookup(tok, []byte(`"req-1"`))
	if err != nil || got != r {
		t.Fatalf("Lookup(right token, right id) = %p, %v; want %p", got, err, r)
	}
	if got, err := e.Lookup(tok2, []byte(`"req-2"`)); err != nil || got != r2 {
		t.Fatalf("Lookup(second request) = %p, %v; want %p", got, err, r2)
	}
	wrongTok := []byte(tok)
	wrongTok[0] ^= 1
	for name, c := range map[string]struct {
		tok string
		id  string
	}{
		"wrong token":         {string(wrongTok), `"req-1"`},
		"wrong id":            {tok, `"req-2"`},
		"other request token": {tok2, `"req-1"`},
		"id as number":        {tok, `1`},
		"unknown token":       {"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", `"req-1"`},
		"empty token":         {"", `"req-1"`},
	} {
		if got, err := e.Lookup(c.tok, []byte(c.id)); !errors.Is(err, resume.ErrUnknown) || got != nil {
			t.Errorf("%s: Lookup = %p, %v; want nil, ErrUnknown", name, got, err)
		}
	}
	if n := e.Live(); n != 2 {
		t.Fatalf("Live() = %d, want 2", n)
	}
}

func TestStartValues(t *testing.T) {
	e, _ := newEngine(t, nil)
	type key struct{}
	vals, cancel := context.WithCancel(context.WithValue(context.Background(), key{}, "session-7"))
	r, _ := start(t, e, `1`, &resume.StartOptions{Values: vals})
	cancel() // a connection's context ending does not end the request
	wantAlive(t, r.Context())
	if v := r.Context().Value(key{}); v != "session-7" {
		t.Fatalf("request context value = %v, want session-7", v)
	}
}

// A request's context is made when it is first asked for: one asked for
// after the request ended is done already, with the cause the first end gave,
// as one asked for before; Cause reads it without the context. A context
// asked for while the request ends ends too, whichever comes first.
func TestRequestContextLate(t *testing.T) {
	e, _ := newEngine(t, nil)
	type key struct{}
	vals := context.WithValue(context.Background(), key{}, "v")
	early, _ := start(t, e, `1`, &resume.StartOptions{Values: vals})
	late, _ := start(t, e, `2`, &resume.StartOptions{Values: vals})
	ctx := early.Context()
	if early.Cause() != nil || late.Cause() != nil {
		t.Fatalf("Cause of running requests = %v, %v; want nil", early.Cause(), late.Cause())
	}
	for _, r := range []*resume.Request{early, late} {
		r.Cancel()
		r.Cancel() // the first cause counts
	}
	wantCause(t, ctx, resume.ErrCancelled)
	wantCause(t, late.Context(), resume.ErrCancelled)
	if v := late.Context().Value(key{}); v != "v" {
		t.Fatalf("late context value = %v, want v", v)
	}
	if !errors.Is(late.Cause(), resume.ErrCancelled) {
		t.Fatalf("Cause = %v, want ErrCancelled", late.Cause())
	}

	for i := range 200 {
		r, _ := start(t, e, strconv.Itoa(10+i), nil)
		got := make(chan context.Context)
		go func() { got <- r.Context() }()
		r.Cancel()
		wantCause(t, <-got, resume.ErrCancelled)
	}
}

func TestExpiryDetached(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const maxWait = time.Minute
		e, st := newEngine(t, &resume.Options{MaxWait: maxWait})
		r, tok := start(t, e, `1`, nil)
		s := newSink()
		attach(t, r, s, 0)

		time.Sleep(10 * maxWait) // attached: no clock
		synctest.Wait()
		wantAlive(t, r.Context())

		r.Detach(s)
		appendMsg(t, r, resume.KindNotification, "") // queued while detached
		time.Sleep(maxWait - time.Nanosecond)
		synctest.Wait()
		wantAlive(t, r.Context())
		if n := e.Live(); n != 1 {
			t.Fatalf("Live() = %d just before MaxWait, want 1", n)
		}

		time.Sleep(time.Nanosecond)
		synctest.Wait()
		wantCause(t, r.Context(), resume.ErrExpired)
		_, err := e.Lookup(tok, []byte(`1`))
		wantErr(t, "Lookup after expiry", err, resume.ErrExpired)
		_, err = e.Lookup(tok, []byte(`2`))
		wantErr(t, "Lookup after expiry, wrong id", err, resume.ErrUnknown)
		if n := e.Live(); n != 0 {
			t.Fatalf("Live() = %d after expiry, want 0", n)
		}
		if got := r.Status(); got.State != resume.StateExpired || got.HasPending || got.QueuedBytes != 0 {
			t.Fatalf("Status after expiry = %+v", got)
		}
		if _, err := st.Get(context.Background(), resume.HashToken(tok)); !errors.Is(err, resume.ErrNotFound) {
			t.Fatalf("store Get after expiry: %v, want ErrNotFound", err)
		}
		_, err = r.Append(resume.KindNotification, "", encoder("notification", ""))
		wantErr(t, "Append after expiry", err, resume.ErrEnded)
		wantErr(t, "Attach after expiry", r.Attach(newSink(), 0), resume.ErrEnded)
		wantErr(t, "Attach after expiry", r.Attach(newSink(), 0), resume.ErrExpired)
		wantErr(t, "Touch after expiry", r.Touch(0), resume.ErrEnded)
	})
}

// A request that is started and never attached is detached from the start: its
// MaxWait clock runs.
func TestExpiryNeverAttached(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, _ := newEngine(t, &resume.Options{MaxWait: time.Minute})
		r, tok := start(t, e, `1`, nil)
		time.Sleep(time.Minute)
		synctest.Wait()
		wantCause(t, r.Context(), resume.ErrExpired)
		_, err := e.Lookup(tok, []byte(`1`))
		wantErr(t, "Lookup", err, resume.ErrExpired)
	})
}

func TestMaxWaitReset(t *testing.T) {
	const maxWait = time.Minute
	for name, reset := range map[string]func(t *testing.T, r *resume.Request){
		"Touch": func(t *testing.T, r *resume.Request) {
			if err := r.Touch(0); err != nil {
				t.Fatalf("Touch: %v", err)
			}
		},
		"AttachDetach": func(t *testing.T, r *resume.Request) {
			s := newSink()
			attach(t, r, s, 0)
			r.Detach(s)
		},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e, _ := newEngine(t, &resume.Options{MaxWait: maxWait})
				r, _ := start(t, e, `1`, nil)
				s := newSink()
				attach(t, r, s, 0)
				r.Detach(s)

				time.Sleep(maxWait * 2 / 3)
				reset(t, r)
				time.Sleep(maxWait - time.Nanosecond) // past the first deadline
				synctest.Wait()
				wantAlive(t, r.Context())

				time.Sleep(time.Nanosecond)
				synctest.Wait()
				wantCause(t, r.Context(), resume.ErrExpired)
			})
		})
	}
}

// A failed write leaves the request detached, and so starts its clock.
func TestWriteFailureDetaches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, _ := newEngine(t, &resume.Options{MaxWait: time.Minute})
		r, _ := start(t, e, `1`, nil)
		s := failingSink(1)
		attach(t, r, s, 0)
		appendMsg(t, r, resume.KindNotification, "")
		appendMsg(t, r, resume.KindNotification, "") // write fails
		if r.Attached(s) {
			t.Fatal("still attached after a failed write")
		}
		if !r.Status().HasPending {
			t.Fatal("the message whose write failed is not queued")
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		wantCause(t, r.Context(), resume.ErrExpired)
		wantSeqs(t, "failing sink", s.seqs(t), 1)
	})
}

func TestRetention(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const retention = 5 * time.Minute
		// The response reaches sink A, so DeliveredRetention applies; it is set to the
		// full window here (TestDeliveredRetention covers the shorter one).
		e, _ := newEngine(t, &resume.Options{MaxWait: time.Minute, Retention: retention, DeliveredRetention: retention})
		r, tok := start(t, e, `1`, nil)
		a := newSink()
		attach(t, r, a, 0)
		appendMsg(t, r, resume.KindNotification, "")
		done := complete(t, r)
		wantSeqs(t, "sink A", a.seqs(t), 1, done)
		r.Detach(a)
		if st := r.Status(); st.State != resume.StateCompleted || !st.HasPending {
			t.Fatalf("Status after completion = %+v, want completed with the response pending", st)
		}

		// Past MaxWait (which no longer applies) but within retention: a client that
		// comes back gets the response.
		time.Sleep(retention - time.Minute)
		synctest.Wait()
		got, err := e.Lookup(tok, []byte(`1`))
		if err != nil || got != r {
			t.Fatalf("Lookup within retention = %p, %v", got, err)
		}
		b := newSink()
		attach(t, r, b, 0)
		wantSeqs(t, "sink B (resumed after completion)", b.seqs(t), done)
		if m := b.received(t); m[0].kind != "response" {
			t.Fatalf("resumed message is a %s, want the response", m[0].kind)
		}
		r.Detach(b)

		// Attach reset the retention clock.
		time.Sleep(retention - time.Nanosecond)
		synctest.Wait()
		if n := e.Live(); n != 1 {
			t.Fatalf("Live() = %d before retention ended, want 1", n)
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if n := e.Live(); n != 0 {
			t.Fatalf("Live() = %d after retention, want 0", n)
		}
		_, err = e.Lookup(tok, []byte(`1`))
		wantErr(t, "Lookup after retention", err, resume.ErrExpired)
		wantErr(t, "Attach after retention", r.Attach(newSink(), 0), resume.ErrEnded)
	})
}

// Retention runs from completion whether or not the request is attached.
func TestRetentionWhileAttached(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, _ := newEngine(t, &resume.Options{MaxWait: time.Minute, Retention: time.Hour})
		r, _ := start(t, e, `1`, nil)
		attach(t, r, newSink(), 0)
		complete(t, r)
		time.Sleep(time.Hour)
		synctest.Wait()
		if n := e.Live(); n != 0 {
			t.Fatalf("Live() = %d after retention, want 0", n)
		}
	})
}

func TestTombstoneTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = time.Hour
		e, _ := newEngine(t, &resume.Options{MaxWait: time.Minute, TombstoneTTL: ttl})
		expired, tokE := start(t, e, `1`, nil)
		cancelled, tokC := start(t, e, `2`, nil)
		s := newSink()
		attach(t, cancelled, s, 0)
		cancelled.Cancel()
		time.Sleep(time.Minute)
		synctest.Wait()
		wantCause(t, expired.Context(), resume.ErrExpired)

		time.Sleep(ttl - time.Minute - time.Nanosecond)
		_, err := e.Lookup(tokE, []byte(`1`))
		wantErr(t, "Lookup of expired before TTL", err, resume.ErrExpired)
		_, err = e.Lookup(tokC, []byte(`2`))
		wantErr(t, "Lookup of cancelled before TTL", err, resume.ErrCancelled)

		time.Sleep(time.Nanosecond) // the cancelled tombstone's TTL ends
		_, err = e.Lookup(tokC, []byte(`2`))
		wantErr(t, "Lookup of cancelled after TTL", err, resume.ErrUnknown)
		_, err = e.Lookup(tokE, []byte(`1`))
		wantErr(t, "Lookup of expired 1m before its TTL", err, resume.ErrExpired)
		time.Sleep(time.Minute)
		_, err = e.Lookup(tokE, []byte(`1`))
		wantErr(t, "Lookup of expired after TTL", err, resume.ErrUnknown)
	})
}

func TestMaxTombstones(t *testing.T) {
	e, _ := newEngine(t, &resume.Options{MaxTombstones: 2})
	var toks []string
	for _, id := range []string{`1`, `2`, `3`} {
		r, tok := start(t, e, id, nil)
		r.Cancel()
		toks = append(toks, tok)
	}
	_, err := e.Lookup(toks[0], []byte(`1`))
	wantErr(t, "oldest tombstone", err, resume.ErrUnknown)
	for i, id := range []string{`2`, `3`} {
		_, err := e.Lookup(toks[i+1], []byte(id))
		wantErr(t, "newer tombstone "+id, err, resume.ErrCancelled)
	}
}

func TestCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, st := newEngine(t, &resume.Options{MaxWait: time.Minute})
		r, tok := start(t, e, `1`, nil)
		for range 3 {
			appendMsg(t, r, resume.KindNotification, "")
		}
		appendMsg(t, r, resume.KindRequest, "")
		if st := r.Status(); !st.HasPending || st.QueuedBytes == 0 {
			t.Fatalf("Status before Cancel = %+v, want messages queued", st)
		}
		r.Cancel()
		wantCause(t, r.Context(), resume.ErrCancelled)
		_, err := e.Lookup(tok, []byte(`1`))
		wantErr(t, "Lookup after Cancel", err, resume.ErrCancelled)
		if got := r.Status(); got.State != resume.StateCancelled || got.HasPending || got.HasInput || got.QueuedBytes != 0 {
			t.Fatalf("Status after Cancel = %+v, want cancelled and empty", got)
		}
		if _, err := st.Get(context.Background(), resume.HashToken(tok)); !errors.Is(err, resume.ErrNotFound) {
			t.Fatalf("store Get after Cancel: %v, want ErrNotFound", err)
		}
		if n := e.Live(); n != 0 {
			t.Fatalf("Live() = %d after Cancel, want 0", n)
		}
		_, err = r.Append(resume.KindNotification, "", encoder("notification", ""))
		wantErr(t, "Append after Cancel", err, resume.ErrEnded)
		_, err = r.Complete(false, encoder("response", ""))
		wantErr(t, "Complete after Cancel", err, resume.ErrEnded)
		s := newSink()
		wantErr(t, "Attach after Cancel", r.Attach(s, 0), resume.ErrEnded)
		wantErr(t, "Touch after Cancel", r.Touch(0), resume.ErrCancelled)
		if len(s.seqs(t)) != 0 {
			t.Fatal("Attach after Cancel wrote messages")
		}
		r.Cancel() // twice: no effect
		time.Sleep(time.Hour)
		synctest.Wait()
		wantCause(t, r.Context(), resume.ErrCancelled)
	})
}

// Cancelling a completed request that still holds its response frees it.
func TestCancelCompleted(t *testing.T) {
	e, _ := newEngine(t, nil)
	r, tok := start(t, e, `1`, nil)
	complete(t, r)
	r.Cancel()
	if n := e.Live(); n != 0 {
		t.Fatalf("Live() = %d, want 0", n)
	}
	_, err := e.Lookup(tok, []byte(`1`))
	wantErr(t, "Lookup", err, resume.ErrCancelled)
}

func TestMaxLive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, _ := newEngine(t, &resume.Options{MaxLive: 2, MaxWait: time.Minute, Retention: time.Minute})
		a, _ := start(t, e, `1`, nil)
		b, _ := start(t, e, `2`, nil)
		attach(t, a, newSink(), 0)
		attach(t, b, newSink(), 0)
		r, tok, err := e.Start([]byte(`3`), nil)
		wantErr(t, "Start past MaxLive", err, resume.ErrLimit)
		if r != nil || tok != "" {
			t.Fatalf("Start past MaxLive returned a request (%p) or token", r)
		}

		a.Cancel()
		c, _ := start(t, e, `3`, nil)
		attach(t, c, newSink(), 0)
		_, _, err = e.Start([]byte(`4`), nil)
		wantErr(t, "Start past MaxLive again", err, resume.ErrLimit)

		// A completed request no longer runs: it counts against MaxRetained, not
		// MaxLive.
		complete(t, b)
		start(t, e, `4`, nil)
		_, _, err = e.Start([]byte(`5`), nil)
		wantErr(t, "Start past MaxLive after a completion", err, resume.ErrLimit)
	})
}

// While the process is short of memory (Options.MemoryShort), Start makes no
// request; it does again once the process is not.
func TestMemoryShort(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var short atomic.Bool
		e, _ := newEngine(t, &resume.Options{MemoryShort: short.Load, MaxWait: time.Minute, Retention: time.Minute})
		a, _ := start(t, e, `1`, nil)
		attach(t, a, newSink(), 0)
		short.Store(true)
		r, tok, err := e.Start([]byte(`2`), nil)
		wantErr(t, "Start short of memory", err, resume.ErrMemory)
		if r != nil || tok != "" || e.Live() != 1 {
			t.Fatalf("Start short of memory returned a request (%p) or token, or left one: %d live", r, e.Live())
		}
		short.Store(false)
		start(t, e, `2`, nil)
	})
}

// MaxLivePerPrincipal caps each principal's running requests; other principals,
// and requests without a principal, are unaffected; a request that completes or
// is cancelled frees its place.
func TestMaxLivePerPrincipal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, _ := newEngine(t, &resume.Options{MaxLivePerPrincipal: 2, MaxWait: time.Minute, Retention: time.Minute})
		alice := &resume.StartOptions{Principal: "alice"}
		a1, _ := start(t, e, `1`, alice)
		a2, _ := start(t, e, `2`, alice)
		_, _, err := e.Start([]byte(`3`), alice)
		wantErr(t, "alice's third", err, resume.ErrLimit)
		bob := &resume.StartOptions{Principal: "bob"}
		start(t, e, `10`, bob)
		start(t, e, `11`, bob)
		for i := range 3 { // no principal: MaxLive only
			start(t, e, fmt.Sprint(20+i), nil)
		}
		_, _, err = e.Start([]byte(`12`), bob)
		wantErr(t, "bob's third", err, resume.ErrLimit)

		a1.Cancel()
		start(t, e, `3`, alice)
		_, _, err = e.Start([]byte(`4`), alice)
		wantErr(t, "alice's third after a cancel", err, resume.ErrLimit)
		complete(t, a2)
		start(t, e, `4`, alice)

		e2, _ := newEngine(t, &resume.Options{MaxLivePerPrincipal: -1})
		for i := range 1500 {
			start(t, e2, fmt.Sprint(i), alice)
		}
	})
}

// Past MaxRetained kept results, the oldest is released early and answers expired.
func TestMaxRetained(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, _ := newEngine(t, &resume.Options{MaxRetained: 2})
		var toks []string
		for i := range 3 {
			r, tok := start(t, e, fmt.Sprint(i), nil)
			complete(t, r)
			toks = append(toks, tok)
		}
		if _, err := e.Lookup(toks[0], []byte(`0`)); !errors.Is(err, resume.ErrExpired) {
			t.Fatalf("oldest result past MaxRetained: %v, want ErrExpired", err)
		}
		for i := 1; i < 3; i++ {
			if _, err := e.Lookup(toks[i], []byte(fmt.Sprint(i))); err != nil {
				t.Fatalf("result %d: %v", i, err)
			}
		}
		if n := e.Live(); n != 2 {
			t.Fatalf("Live() = %d, want 2", n)
		}
	})
}

// A response written to an attached client is kept for DeliveredRetention only; one
// nobody received is kept for Retention.
func TestDeliveredRetention(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, _ := newEngine(t, &resume.Options{Retention: time.Hour, DeliveredRetention: time.Minute})
		delivered, tokD := start(t, e, `1`, nil)
		attach(t, delivered, newSink(), 0)
		complete(t, delivered)
		undelivered, tokU := start(t, e, `2`, nil)
		complete(t, undelivered)

		time.Sleep(time.Minute + time.Second)
		synctest.Wait()
		if _, err := e.Lookup(tokD, []byte(`1`)); !errors.Is(err, resume.ErrExpired) {
			t.Fatalf("delivered result after DeliveredRetention: %v, want ErrExpired", err)
		}
		if _, err := e.Lookup(tokU, []byte(`2`)); err != nil {
			t.Fatalf("undelivered result within Retention: %v", err)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		if _, err := e.Lookup(tokU, []byte(`2`)); !errors.Is(err, resume.ErrExpired) {
			t.Fatalf("undelivered result after Retention: %v, want ErrExpired", err)
		}
	})
}

func TestClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, _ := newEngine(t, &resume.Options{MaxWait: time.Minute})
		a, _ := start(t, e, `1`, nil)
		b, _ := start(t, e, `2`, nil)
		attach(t, b, newSink(), 0)
		e.Close()
		wantCause(t, a.Context(), resume.ErrClosed)
		wantCause(t, b.Context(), resume.ErrClosed)
		_, _, err := e.Start([]byte(`3`), nil)
		wantErr(t, "Start after Close", err, resume.ErrClosed)
		e.Close() // twice: no effect

		// No timer of a closed engine fires into a request whose context has ended.
		time.Sleep(time.Hour)
		synctest.Wait()
		wantCause(t, a.Context(), resume.ErrClosed)
	})
}

// A request is found only by its own principal; another principal's lookup is
// answered as an unknown request, before and after the request ends.
func TestLookupAsPrincipal(t *testing.T) {
	e, _ := newEngine(t, nil)
	r, tok := start(t, e, `1`, &resume.StartOptions{Principal: "alice"})
	if got, err := e.LookupAs(tok, []byte(`1`), "alice"); err != nil || got != r {
		t.Fatalf("LookupAs(alice) = %p, %v; want %p", got, err, r)
	}
	for _, p := range []string{"bob", "", "Alice"} {
		if got, err := e.LookupAs(tok, []byte(`1`), p); !errors.Is(err, resume.ErrUnknown) || got != nil {
			t.Errorf("LookupAs(%q) = %p, %v; want nil, ErrUnknown", p, got, err)
		}
	}
	if got, err := e.Lookup(tok, []byte(`1`)); !errors.Is(err, resume.ErrUnknown) || got != nil {
		t.Errorf("Lookup (no principal) = %p, %v; want nil, ErrUnknown", got, err)
	}
	r.Cancel()
	if _, err := e.LookupAs(tok, []byte(`1`), "alice"); !errors.Is(err, resume.ErrCancelled) {
		t.Errorf("LookupAs(alice) after Cancel: %v; want ErrCancelled", err)
	}
	if _, err := e.LookupAs(tok, []byte(`1`), "bob"); !errors.Is(err, resume.ErrUnknown) {
		t.Errorf("LookupAs(bob) after Cancel: %v; want ErrUnknown", err)
	}
}

// stubCluster is a Cluster that resolves nothing; bound counts its Binds.
type stubCluster struct{ bound int }

func (c *stubCluster) Self() string                                       { return "self" }
func (c *stubCluster) Bind(context.Context, resume.Host, []resume.Record) { c.bound++ }
func (c *stubCluster) Resolve(resume.Record) (resume.Handle, error)       { return nil, resume.ErrUnknown }
func (c *stubCluster) Leave()                                             {}

// A Cluster needs a Store the instances share, a Lister and a Claimer: New
// refuses the others with an error (and binds nothing), and takes one that is.
func TestNewClusterNeedsSharedStore(t *testing.T) {
	type plain struct{ resume.Store } // a Store, and no more
	for _, c := range []struct {
		name string
		st   resume.Store
	}{{"none", nil}, {"not shared", plain{memstore.New()}}} {
		cl := &stubCluster{}
		e, err := resume.New(t.Context(), c.st, &resume.Options{Cluster: cl})
		if err == nil || e != nil || cl.bound != 0 {
			t.Fatalf("%s: New = %v, %v (bound %d), want an error and nothing bound", c.name, e, err, cl.bound)
		}
	}
	cl := &stubCluster{}
	e := mustNew(t, memstore.New(), &resume.Options{Cluster: cl})
	defer e.Close()
	if cl.bound != 1 {
		t.Fatalf("a shared store: bound %d times, want 1", cl.bound)
	}
}
