// Package backoff holds the waits of retry loops: a sleep that a context cuts
// short, the doubling pauses of a loop that tries again, and the delay of an
// attempt counted from zero.
package backoff

import (
	"context"
	"time"
)

// Sleep waits d, or until ctx ends; it reports whether d passed.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Doubling is the pauses of a loop that tries again: the first, then each
// twice the one before, up to a most. Next changes it: one goroutine uses it.
type Doubling struct{ pause, most time.Duration }

// Double returns the pauses first, 2×first, … up to most.
func Double(first, most time.Duration) Doubling { return Doubling{pause: first, most: most} }

// Next returns the next pause.
func (d *Doubling) Next() time.Duration {
	p := d.pause
	d.pause = min(2*d.pause, d.most)
	return p
}

// Delay is the delay before attempt (0 for the first retry): first doubled
// attempt times, up to most.
func Delay(first, most time.Duration, attempt int) time.Duration {
	return min(first<<min(attempt, 20), most)
}
