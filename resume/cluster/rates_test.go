package cluster_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Two instances taking from one rate at once take from one bucket: of 40
// calls, 10 (the rate's) are allowed in all, not 10 each; the refused are told
// how long until the next, which another tool or principal does not share.
func TestRatesShared(t *testing.T) {
	a, b := pair(t)
	ra, err := a.Rates(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	rb, err := b.Rates(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var allowed atomic.Int32
	var wg sync.WaitGroup
	for i := range 4 {
		r := ra
		if i%2 == 1 {
			r = rb
		}
		wg.Go(func() {
			for range 10 {
				ok, wait, err := r.Take(t.Context(), "deploy", "alice", 10, time.Hour)
				switch {
				case err != nil:
					t.Error(err)
				case ok:
					allowed.Add(1)
				case wait <= 5*time.Minute || wait > 6*time.Minute:
					t.Errorf("refused with a wait of %v, want about 6m (an hour / 10)", wait)
				}
			}
		})
	}
	wg.Wait()
	if n := allowed.Load(); n != 10 {
		t.Fatalf("%d calls allowed by two instances, want 10", n)
	}
	for _, who := range [][2]string{{"deploy", "bob"}, {"echo", "alice"}} {
		if ok, _, err := rb.Take(t.Context(), who[0], who[1], 10, time.Hour); err != nil || !ok {
			t.Fatalf("%v: %v %v, want its own bucket", who, ok, err)
		}
	}
}

// The cost of a tool's rate in a cluster: a Take is two round trips to the
// KV bucket (a read, then a compare-and-set), on one embedded NATS here:
// go test -run '^$' -bench RatesTake ./resume/cluster/
func BenchmarkRatesTake(b *testing.B) {
	a, _ := pair(b)
	r, err := a.Rates(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, _, err := r.Take(b.Context(), "echo", "alice", 1<<30, time.Second); err != nil {
			b.Fatal(err)
		}
	}
}
