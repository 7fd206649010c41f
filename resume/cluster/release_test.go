package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/mcp-resume/mcp-resume/resume"
	"github.com/mcp-resume/mcp-resume/resume/memstore"
	"github.com/mcp-resume/mcp-resume/testkit/poll"
)

// responseSink reports each message's kind, as a client's connection would
// take it.
type responseSink chan resume.Kind

func (s responseSink) Write(_ context.Context, m resume.Message) error {
	s <- m.Kind
	return nil
}

// newEngine returns an engine over st, an instance of opts.Cluster, closed when
// the test ends.
func newEngine(t *testing.T, st resume.Store, opts *resume.Options) *resume.Engine {
	t.Helper()
	e, err := resume.New(t.Context(), st, opts)
	if err != nil {
		t.Fatalf("resume.New: %v", err)
	}
	t.Cleanup(e.Close)
	return e
}

// A client that calls through another instance than the owner, one call after
// another on a connection that stays open and never detaches, leaves nothing
// held on either instance once its results came: no inbox or watch of the
// proxies, no watch of their sinks at the owner. Then calls that are cancelled,
// and calls whose clients move to a new sink, leave nothing behind either.
func TestProxyReleasesWhatItHeld(t *testing.T) {
	a, b := pair(t)
	st := memstore.New()
	ea := newEngine(t, st, &resume.Options{Cluster: a})
	eb := newEngine(t, st, &resume.Options{Cluster: b})
	response := func(uint64) []byte { return []byte(`{}`) }

	const calls = 100
	for i := range calls {
		id := []byte(fmt.Sprint(i))
		r, tok, err := ea.Start(id, nil)
		if err != nil {
			t.Fatal(err)
		}
		h, err := eb.Lookup(tok, id)
		if err != nil {
			t.Fatal(err)
		}
		s := make(responseSink, 1)
		if err := h.Attach(s, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Complete(false, response); err != nil {
			t.Fatal(err)
		}
		if k := receive(t, s, "the response through the proxy"); k != resume.KindResponse {
			t.Fatalf("call %d: got kind %v, want the response", i, k)
		}
	}
	nothingHeld := func() bool {
		bi, bw, _ := b.Held()
		_, _, as := a.Held()
		return bi == 0 && bw == 0 && as == 0
	}
	poll.Until(t, patience, "the proxies and the owner to let go of what they held", nothingHeld)

	// Cancelled through the proxy, or taken over by another sink: the owner
	// forgets the sinks its requests no longer have.
	for i := range calls {
		id := []byte(fmt.Sprint("c", i))
		_, tok, err := ea.Start(id, nil)
		if err != nil {
			t.Fatal(err)
		}
		h, err := eb.Lookup(tok, id)
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Attach(make(responseSink, 8), 0); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			h.Cancel()
		} else if err := h.Attach(make(responseSink, 8), 0); err != nil {
			t.Fatal(err)
		}
	}
	// Half the requests are attached, each to one sink: the proxies hold an
	// inbox and a watch each; the owner's stale watches go in sweeps, so that
	// it holds about twice what it needs at most (it held all 150).
	live := calls / 2
	if bi, bw, _ := b.Held(); bi != live || bw != live {
		t.Errorf("the proxies hold %d inboxes and %d watches for %d attached requests", bi, bw, live)
	}
	if _, _, as := a.Held(); as < live || as > 2*live+10 {
		t.Errorf("the owner watches %d remote sinks for %d attached requests", as, live)
	}
}

// In a cluster an ended request leaves a tombstone in the store for the other
// instances; it goes from the store when the owner's tombstone ages out (on the
// next request that ends after TombstoneTTL), off that request's path.
func TestTombstoneRecordsAgeOut(t *testing.T) {
	a, _ := pair(t)
	st := memstore.New()
	const ttl = 100 * time.Millisecond
	ea := newEngine(t, st, &resume.Options{Cluster: a, TombstoneTTL: ttl})
	var hashes []resume.TokenHash
	for i := range 50 {
		r, tok, err := ea.Start([]byte(fmt.Sprint(i)), nil)
		if err != nil {
			t.Fatal(err)
		}
		r.Cancel()
		hashes = append(hashes, resume.HashToken(tok))
	}
	for _, h := range hashes {
		if rec, err := st.Get(context.Background(), h); err != nil || rec.State != resume.StateCancelled {
			t.Fatalf("a cancelled request's tombstone in the store: %+v, %v", rec, err)
		}
	}
	time.Sleep(2 * ttl) // the tombstones age out: the next request that ends takes them
	r, _, err := ea.Start([]byte(`last`), nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Cancel()
	poll.Until(t, patience, "the aged tombstones to leave the store", func() bool {
		for _, h := range hashes {
			if _, err := st.Get(context.Background(), h); !errors.Is(err, resume.ErrNotFound) {
				return false
			}
		}
		return true
	})
}
