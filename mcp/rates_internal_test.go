package mcp

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// Buckets of principals that stopped calling are dropped once there are
// sweepAt of them; while many principals call at once (no bucket full), a
// new principal costs a sweep of every bucket only at each doubling.
func TestMemoryRatesSweeps(t *testing.T) {
	m := NewMemoryRates().(*memoryRates)
	rate := Rate{Calls: 10, Per: time.Hour}
	take := func(p string) {
		if ok, _, _ := m.Take(context.Background(), "t", p, rate); !ok {
			t.Fatalf("%s refused", p)
		}
	}
	for i := range 3 * sweepAt {
		take(fmt.Sprint("busy-", i)) // each holds a bucket that is not full
	}
	if m.sweeps > 2 || len(m.buckets) != 3*sweepAt {
		t.Fatalf("%d sweeps for %d busy principals (%d buckets), want at most 2 and every bucket kept", m.sweeps, 3*sweepAt, len(m.buckets))
	}
	// Buckets that filled again (their principals stopped) go at the next
	// sweep.
	m.mu.Lock()
	for _, e := range m.buckets {
		e.rate = Rate{Calls: 10, Per: 10 * time.Nanosecond}
	}
	m.next = len(m.buckets)
	m.mu.Unlock()
	take("new")
	if len(m.buckets) != 1 {
		t.Fatalf("%d buckets after a sweep of full ones, want the new one alone", len(m.buckets))
	}
}
