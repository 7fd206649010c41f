// Package storetest is the contract of resume.Store as a test suite. Every store runs
// it: memstore in its own tests, and any other store the same way.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/mcp-resume/mcp-resume/resume"
)

// Run runs the contract against stores made by newStore, one fresh store per subtest.
func Run(t *testing.T, newStore func(t *testing.T) resume.Store) {
	ctx := context.Background()
	hash := func(s string) resume.TokenHash { return resume.HashToken(s) }
	msg := func(seq uint64) resume.Message {
		return resume.Message{Seq: seq, Kind: resume.KindProgress, Key: "p", Data: fmt.Appendf(nil, `{"n":%d}`, seq)}
	}
	seqs := func(t *testing.T, s resume.Store, h resume.TokenHash, after uint64) []uint64 {
		t.Helper()
		var out []uint64
		for m, err := range s.Replay(ctx, h, after) {
			if err != nil {
				t.Fatalf("Replay: %v", err)
			}
			if want := msg(m.Seq).Data; !bytes.Equal(m.Data, want) {
				t.Fatalf("message %d: data %q, want %q", m.Seq, m.Data, want)
			}
			out = append(out, m.Seq)
		}
		return out
	}
	put := func(t *testing.T, s resume.Store, name string) resume.TokenHash {
		t.Helper()
		h := hash(name)
		if err := s.Put(ctx, resume.Record{Hash: h, ID: []byte(`"` + name + `"`), State: resume.StateProcessing, Created: time.Unix(1, 0)}); err != nil {
			t.Fatalf("Put: %v", err)
		}
		return h
	}
	equal := func(t *testing.T, got, want []uint64) {
		t.Helper()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("got %v, want %v", got, want)
		}
	}

	t.Run("PutGet", func(t *testing.T) {
		s := newStore(t)
		h := put(t, s, "a")
		rec, err := s.Get(ctx, h)
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		if string(rec.ID) != `"a"` || rec.State != resume.StateProcessing || !rec.Created.Equal(time.Unix(1, 0)) {
			t.Fatalf("Get = %+v", rec)
		}
		rec.ID[0] = 'X' // a copy: changing it changes nothing stored
		rec2 := *rec
		rec2.ID = []byte(`"a"`)
		rec2.State = resume.StateCompleted
		if err := s.Put(ctx, rec2); err != nil {
			t.Fatalf("Put (replace): %v", err)
		}
		if rec, _ = s.Get(ctx, h); rec.State != resume.StateCompleted || string(rec.ID) != `"a"` {
			t.Fatalf("after replace, Get = %+v", rec)
		}
	})
	t.Run("UnknownRequest", func(t *testing.T) {
		s := newStore(t)
		h := hash("nobody")
		if _, err := s.Get(ctx, h); !errors.Is(err, resume.ErrNotFound) {
			t.Fatalf("Get: %v, want ErrNotFound", err)
		}
		if err := s.Append(ctx, h, msg(1)); !errors.Is(err, resume.ErrNotFound) {
			t.Fatalf("Append: %v, want ErrNotFound", err)
		}
		n := 0
		for _, err := range s.Replay(ctx, h, 0) {
			n++
			if !errors.Is(err, resume.ErrNotFound) {
				t.Fatalf("Replay: %v, want ErrNotFound", err)
			}
		}
		if n != 1 {
			t.Fatalf("Replay yielded %d values, want one ErrNotFound", n)
		}
		if err := s.Discard(ctx, h, 1); err != nil {
			t.Fatalf("Discard: %v", err)
		}
		if err := s.Delete(ctx, h); err != nil {
			t.Fatalf("Delete: %v", err)
		}
	})
	t.Run("ReplayOrderAndCursor", func(t *testing.T) {
		s := newStore(t)
		h := put(t, s, "a")
		for i := uint64(1); i <= 5; i++ {
			if err := s.Append(ctx, h, msg(i)); err != nil {
				t.Fatalf("Append: %v", err)
			}
		}
		equal(t, seqs(t, s, h, 0), []uint64{1, 2, 3, 4, 5})
		equal(t, seqs(t, s, h, 3), []uint64{4, 5})
		equal(t, seqs(t, s, h, 5), nil)
	})
	t.Run("Discard", func(t *testing.T) {
		s := newStore(t)
		h := put(t, s, "a")
		for i := uint64(1); i <= 6; i++ {
			_ = s.Append(ctx, h, msg(i))
		}
		if err := s.Discard(ctx, h, 2, 4, 99); err != nil {
			t.Fatalf("Discard: %v", err)
		}
		equal(t, seqs(t, s, h, 0), []uint64{1, 3, 5, 6})
		_ = s.Discard(ctx, h, 1, 3, 5, 6)
		equal(t, seqs(t, s, h, 0), nil)
		_ = s.Append(ctx, h, msg(7)) // appending after everything was discarded
		equal(t, seqs(t, s, h, 0), []uint64{7})
	})
	t.Run("StopEarly", func(t *testing.T) {
		s := newStore(t)
		h := put(t, s, "a")
		for i := uint64(1); i <= 3; i++ {
			_ = s.Append(ctx, h, msg(i))
		}
		n := 0
		for range s.Replay(ctx, h, 0) {
			n++
			break
		}
		if n != 1 {
			t.Fatalf("yielded %d after break", n)
		}
	})
	t.Run("Isolation", func(t *testing.T) {
		s := newStore(t)
		a, b := put(t, s, "a"), put(t, s, "b")
		_ = s.Append(ctx, a, msg(1))
		_ = s.Append(ctx, b, msg(1))
		_ = s.Append(ctx, b, msg(2))
		equal(t, seqs(t, s, a, 0), []uint64{1})
		equal(t, seqs(t, s, b, 0), []uint64{1, 2})
		if err := s.Delete(ctx, b); err != nil {
			t.Fatalf("Delete: %v", err)
		}
		equal(t, seqs(t, s, a, 0), []uint64{1})
	})
	t.Run("Delete", func(t *testing.T) {
		s := newStore(t)
		h := put(t, s, "a")
		_ = s.Append(ctx, h, msg(1))
		if err := s.Delete(ctx, h); err != nil {
			t.Fatalf("Delete: %v", err)
		}
		if _, err := s.Get(ctx, h); !errors.Is(err, resume.ErrNotFound) {
			t.Fatalf("Get after Delete: %v", err)
		}
		for _, err := range s.Replay(ctx, h, 0) {
			if !errors.Is(err, resume.ErrNotFound) {
				t.Fatalf("Replay after Delete: %v", err)
			}
		}
		if err := s.Delete(ctx, h); err != nil {
			t.Fatalf("second Delete: %v", err)
		}
	})
	t.Run("Records", func(t *testing.T) {
		s := newStore(t)
		for r, err := range lister(t, s).Records(ctx) {
			t.Fatalf("empty store yielded %+v, %v", r, err)
		}
		a, b, c := put(t, s, "a"), put(t, s, "b"), put(t, s, "c")
		done := resume.Record{Hash: b, ID: []byte(`"b"`), State: resume.StateFailed, Created: time.Unix(2, 0), Payload: []byte(`{"p":1}`), Principal: "bob"}
		if err := s.Put(ctx, done); err != nil {
			t.Fatalf("Put: %v", err)
		}
		d := put(t, s, "d")
		owned := resume.Record{Hash: d, ID: []byte(`"d"`), State: resume.StateCompleted, Created: time.Unix(3, 0), Principal: "alice"}
		if err := s.Put(ctx, owned); err != nil {
			t.Fatalf("Put: %v", err)
		}
		_ = s.Append(ctx, a, msg(1))
		if err := s.Delete(ctx, c); err != nil {
			t.Fatalf("Delete: %v", err)
		}
		got := map[resume.TokenHash]resume.Record{}
		for r, err := range lister(t, s).Records(ctx) {
			if err != nil {
				t.Fatalf("Records: %v", err)
			}
			if _, dup := got[r.Hash]; dup {
				t.Fatalf("Records yielded %x twice", r.Hash[:4])
			}
			got[r.Hash] = r
		}
		if len(got) != 3 {
			t.Fatalf("Records yielded %d records, want 3 (a, b and d)", len(got))
		}
		if r := got[a]; string(r.ID) != `"a"` || r.State != resume.StateProcessing || !r.Created.Equal(time.Unix(1, 0)) || r.Payload != nil || r.Principal != "" {
			t.Fatalf("record a = %+v", r)
		}
		if r := got[b]; string(r.ID) != `"b"` || r.State != resume.StateFailed || !r.Created.Equal(time.Unix(2, 0)) || string(r.Payload) != `{"p":1}` || r.Principal != "bob" {
			t.Fatalf("record b = %+v", r)
		}
		if r := got[d]; string(r.ID) != `"d"` || r.State != resume.StateCompleted || !r.Created.Equal(time.Unix(3, 0)) || r.Payload != nil || r.Principal != "alice" {
			t.Fatalf("record d = %+v", r)
		}
		n := 0
		for range lister(t, s).Records(ctx) {
			n++
			break
		}
		if n != 1 {
			t.Fatalf("Records yielded %d after break", n)
		}
	})
	t.Run("RecordFields", func(t *testing.T) {
		// Every field of a Record comes back from Get and Records as it was Put,
		// in each combination a store may encode differently.
		s := newStore(t)
		recs := []resume.Record{
			{ID: []byte(`1`), State: resume.StateProcessing, Created: time.Unix(1, 5)},
			{ID: []byte(`"p"`), State: resume.StateProcessing, Created: time.Unix(2, 0), Payload: []byte(`{"p":1}`)},
			{ID: []byte(`"alice"`), State: resume.StateCompleted, Created: time.Unix(3, 0), Principal: "alice"},
			{ID: []byte(`"owned"`), State: resume.StateFailed, Created: time.Unix(4, 0), Owner: "A", Payload: []byte(`{}`)},
			{ID: []byte(`"ack"`), State: resume.StateProcessing, Created: time.Unix(5, 0), AckMode: true},
			{ID: []byte(`"all"`), State: resume.StateProcessing, Created: time.Unix(6, 0), Principal: "bob", Owner: "B", Payload: []byte(`{"p":2}`), AckMode: true, Epoch: 1<<32 - 1},
			{ID: []byte(`"epoch"`), State: resume.StateFailed, Created: time.Unix(7, 0), Epoch: 1},
			{ID: []byte(`"task"`), State: resume.StateProcessing, Created: time.Unix(8, 0), Task: true, TTL: time.Hour, Payload: []byte(`{"t":1}`)},
			{ID: []byte(`"tomb"`), State: resume.StateExpired, Created: time.Unix(9, 0), Acknowledged: true},
			{ID: []byte(`"traced"`), State: resume.StateProcessing, Created: time.Unix(10, 0),
				Trace: resume.TraceContext{Parent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}},
			{ID: []byte(`"traced all"`), State: resume.StateCompleted, Created: time.Unix(11, 0), Principal: "carol", Owner: "C", AckMode: true, Task: true, TTL: time.Minute,
				Trace: resume.TraceContext{Parent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", State: "vendor=opaque,other=1"}},
		}
		want := map[resume.TokenHash]resume.Record{}
		for i := range recs {
			recs[i].Hash = hash(string(recs[i].ID))
			if err := s.Put(ctx, recs[i]); err != nil {
				t.Fatalf("Put(%s): %v", recs[i].ID, err)
			}
			want[recs[i].Hash] = recs[i]
		}
		same := func(got, want resume.Record) bool {
			return got.Hash == want.Hash && bytes.Equal(got.ID, want.ID) && got.State == want.State && got.Created.Equal(want.Created) &&
				bytes.Equal(got.Payload, want.Payload) && (got.Payload == nil) == (want.Payload == nil) &&
				got.Principal == want.Principal && got.Owner == want.Owner && got.AckMode == want.AckMode && got.Epoch == want.Epoch &&
				got.Task == want.Task && got.TTL == want.TTL && got.Acknowledged == want.Acknowledged && got.Trace == want.Trace
		}
		for _, rec := range recs {
			if got, err := s.Get(ctx, rec.Hash); err != nil || !same(*got, rec) {
				t.Fatalf("Get(%s) = %+v, %v; want %+v", rec.ID, got, err, rec)
			}
		}
		n := 0
		for got, err := range lister(t, s).Records(ctx) {
			if err != nil {
				t.Fatalf("Records: %v", err)
			}
			if !same(got, want[got.Hash]) {
				t.Fatalf("Records yielded %+v, want %+v", got, want[got.Hash])
			}
			n++
		}
		if n != len(recs) {
			t.Fatalf("Records yielded %d records, want %d", n, len(recs))
		}
	})
	t.Run("Claim", func(t *testing.T) {
		s := newStore(t)
		h := hash("a")
		tc := resume.TraceContext{Parent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", State: "k=v"}
		rec := resume.Record{Hash: h, ID: []byte(`"a"`), State: resume.StateProcessing, Created: time.Unix(1, 0), Principal: "alice", Payload: []byte(`{"p":1}`), Owner: "A", AckMode: true, Epoch: 2, Trace: tc}
		if _, err := claimer(t, s).Claim(ctx, h, "A", "B"); !errors.Is(err, resume.ErrNotFound) {
			t.Fatalf("Claim of an unknown request: %v, want ErrNotFound", err)
		}
		if err := s.Put(ctx, rec); err != nil {
			t.Fatalf("Put: %v", err)
		}
		if got, err := s.Get(ctx, h); err != nil || got.Owner != "A" {
			t.Fatalf("Get = %+v, %v; want owner A", got, err)
		}
		if _, err := claimer(t, s).Claim(ctx, h, "C", "B"); !errors.Is(err, resume.ErrClaimed) {
			t.Fatalf("Claim from the wrong owner: %v, want ErrClaimed", err)
		}
		// Racing claims from the owner all saw: exactly one wins.
		const racers = 8
		var wg sync.WaitGroup
		wins := make(chan string, racers)
		for i := range racers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				to := fmt.Sprint("B", i)
				got, err := claimer(t, s).Claim(ctx, h, "A", to)
				switch {
				case err == nil:
					if got.Owner != to || string(got.ID) != `"a"` || got.Principal != "alice" || string(got.Payload) != `{"p":1}` || got.State != resume.StateProcessing || !got.AckMode || got.Epoch != 2 || got.Trace != tc {
						t.Errorf("Claim returned %+v", got)
					}
					wins <- to
				case !errors.Is(err, resume.ErrClaimed):
					t.Errorf("Claim: %v", err)
				}
			}()
		}
		wg.Wait()
		close(wins)
		var won []string
		for w := range wins {
			won = append(won, w)
		}
		if len(won) != 1 {
			t.Fatalf("%d claims won, want 1: %v", len(won), won)
		}
		if got, err := s.Get(ctx, h); err != nil || got.Owner != won[0] || string(got.Payload) != `{"p":1}` {
			t.Fatalf("Get after Claim = %+v, %v; want owner %s", got, err, won[0])
		}
		for r, err := range lister(t, s).Records(ctx) {
			if err != nil || r.Owner != won[0] {
				t.Fatalf("Records after Claim: %+v, %v", r, err)
			}
		}
		// The old owner, cut off while the lease lapsed, is fenced out: its
		// writes fail and change nothing. The new owner's go through.
		old := rec
		old.State = resume.StateCompleted
		if err := s.Put(ctx, old); !errors.Is(err, resume.ErrClaimed) {
			t.Fatalf("Put by the owner claimed from: %v, want ErrClaimed", err)
		}
		if got, err := s.Get(ctx, h); err != nil || got.Owner != won[0] || got.State != resume.StateProcessing {
			t.Fatalf("Get after the old owner's Put = %+v, %v; want it unchanged", got, err)
		}
		cur := rec
		cur.Owner, cur.State = won[0], resume.StateCompleted
		for range 2 {
			if err := s.Put(ctx, cur); err != nil {
				t.Fatalf("Put by the new owner: %v", err)
			}
		}
		if got, err := s.Get(ctx, h); err != nil || got.Owner != won[0] || got.State != resume.StateCompleted {
			t.Fatalf("Get after the new owner's Put = %+v, %v", got, err)
		}
	})
	t.Run("MessageFields", func(t *testing.T) {
		s := newStore(t)
		h := put(t, s, "a")
		want := []resume.Message{
			{Seq: 1, Kind: resume.KindNotification, Data: []byte(`{"log":1}`)},
			{Seq: 2, Kind: resume.KindProgress, Key: `"tok-7"`, Data: []byte(`{"p":2}`)},
			{Seq: 3, Kind: resume.KindRequest, Data: []byte(`{"ask":3}`)},
			{Seq: 1 << 40, Kind: resume.KindResponse, Data: []byte(`{"error":{}}`), Failed: true},
		}
		for _, m := range want {
			if err := s.Append(ctx, h, m); err != nil {
				t.Fatalf("Append: %v", err)
			}
		}
		i := 0
		for m, err := range s.Replay(ctx, h, 0) {
			if err != nil {
				t.Fatalf("Replay: %v", err)
			}
			if i >= len(want) {
				t.Fatalf("Replay yielded more than %d messages", len(want))
			}
			w := want[i]
			if m.Seq != w.Seq || m.Kind != w.Kind || m.Key != w.Key || !bytes.Equal(m.Data, w.Data) || m.Failed != w.Failed {
				t.Fatalf("message %d = %+v (data %q), want %+v (data %q)", i, m, m.Data, w, w.Data)
			}
			i++
		}
		if i != len(want) {
			t.Fatalf("Replay yielded %d messages, want %d", i, len(want))
		}
	})
	t.Run("Concurrent", func(t *testing.T) {
		s := newStore(t)
		const reqs, per = 8, 200
		var wg sync.WaitGroup
		for r := range reqs {
			h := put(t, s, fmt.Sprint("r", r))
			wg.Add(2)
			go func() { // writer
				defer wg.Done()
				for i := uint64(1); i <= per; i++ {
					if err := s.Append(ctx, h, msg(i)); err != nil {
						t.Errorf("Append: %v", err)
						return
					}
					if i%2 == 0 {
						_ = s.Discard(ctx, h, i-1)
					}
				}
			}()
			go func() { // reader: every replay is ascending
				defer wg.Done()
				for range 50 {
					var last uint64
					for m, err := range s.Replay(ctx, h, 0) {
						if err != nil || m.Seq <= last {
							t.Errorf("replay: seq %d after %d, err %v", m.Seq, last, err)
							return
						}
						last = m.Seq
					}
				}
			}()
		}
		wg.Wait()
		for r := range reqs {
			got := seqs(t, s, hash(fmt.Sprint("r", r)), 0)
			if len(got) != per/2 || got[0] != 2 || got[len(got)-1] != per {
				t.Fatalf("request %d: %d messages left (%v...)", r, len(got), got[:min(3, len(got))])
			}
		}
	})
}

// lister is s as a resume.Lister; a store that is not one skips the test.
func lister(t *testing.T, s resume.Store) resume.Lister {
	t.Helper()
	ls, ok := s.(resume.Lister)
	if !ok {
		t.Skip("not a resume.Lister")
	}
	return ls
}

// claimer is s as a resume.Claimer; a store that is not one skips the test.
func claimer(t *testing.T, s resume.Store) resume.Claimer {
	t.Helper()
	cs, ok := s.(resume.Claimer)
	if !ok {
		t.Skip("not a resume.Claimer")
	}
	return cs
}
