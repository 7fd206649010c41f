package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Loop paces a loop that tries again: the deadline of the whole loop, each
// try's own bound within it, and the pauses between tries, doubling from a
// first one up to a most, each jittered (Jitter). One rule for every retry
// loop of the project. A Loop belongs to the goroutine that loops: Next
// changes it, unguarded.
type Loop struct {
	end    time.Time // zero: none
	try    time.Duration
	pauses Doubling
}

// Start starts a loop whose pauses double from first up to most, that gives
// up wait from now (0: never) and bounds each try by try (0: only by the
// loop's deadline).
func Start(first, most, wait, try time.Duration) *Loop {
	l := &Loop{try: try, pauses: Double(first, most)}
	if wait > 0 {
		l.end = time.Now().Add(wait)
	}
	return l
}

// End is the loop's deadline (zero: none).
func (l *Loop) End() time.Time { return l.end }

// Try returns the context of one try: ctx, bounded by the try's bound and the
// loop's deadline.
func (l *Loop) Try(ctx context.Context) (context.Context, context.CancelFunc) {
	deadline := l.end
	if l.try > 0 {
		if d := time.Now().Add(l.try); deadline.IsZero() || d.Before(deadline) {
			deadline = d
		}
	}
	if deadline.IsZero() {
		return context.WithCancel(ctx)
	}
	return context.WithDeadline(ctx, deadline)
}

// Next returns the next pause, jittered: for a loop that waits otherwise
// than with Pause (for a connection to come back, say).
func (l *Loop) Next() time.Duration { return Jitter(l.pauses.Next()) }

// Pause waits the next pause; it reports false, at once, when the pause
// would end past the loop's deadline, and when ctx ends meanwhile.
func (l *Loop) Pause(ctx context.Context) bool { return l.Wait(ctx, l.Next()) }

// Wait waits d (a pause the peer asked for, say), as Pause does.
func (l *Loop) Wait(ctx context.Context, d time.Duration) bool {
	if !l.end.IsZero() && time.Until(l.end) < d {
		return false
	}
	return Sleep(ctx, d)
}

// Jitter returns a random duration between d/2 and d: peers that failed at
// once do not all try again at once.
func Jitter(d time.Duration) time.Duration {
	if d <= 1 {
		return d
	}
	return d/2 + rand.N(d/2+1)
}
