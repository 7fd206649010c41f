package warngate

import (
	"testing"
	"time"
)

// The first warning goes, the next within the interval are held back and
// counted, and the first after it goes with their count.
func TestGate(t *testing.T) {
	var g Gate
	t0 := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	if ok, held := g.Due(t0, time.Second); !ok || held != 0 {
		t.Fatalf("first: %v, %d held; want it through", ok, held)
	}
	for i := range 3 {
		if ok, _ := g.Due(t0.Add(time.Duration(i+1)*100*time.Millisecond), time.Second); ok {
			t.Fatalf("within the interval (%d): let through", i)
		}
	}
	if ok, held := g.Due(t0.Add(time.Second), time.Second); !ok || held != 3 {
		t.Fatalf("after the interval: %v, %d held; want it through with 3", ok, held)
	}
	if ok, held := g.Due(t0.Add(2100*time.Millisecond), time.Second); !ok || held != 0 {
		t.Fatalf("the next interval: %v, %d held; want it through with none", ok, held)
	}
}
