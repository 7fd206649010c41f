package backoff_test

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-resume/mcp-resume/internal/backoff"
)

func TestDouble(t *testing.T) {
	var got []time.Duration
	pauses := backoff.Double(10*time.Millisecond, 50*time.Millisecond)
	for range 5 {
		got = append(got, pauses.Next())
	}
	want := []time.Duration{10, 20, 40, 50, 50}
	for i := range want {
		want[i] *= time.Millisecond
	}
	if !slices.Equal(got, want) {
		t.Fatalf("pauses %v, want %v", got, want)
	}
}

func TestDelay(t *testing.T) {
	for attempt, want := range map[int]time.Duration{0: 100 * time.Millisecond, 1: 200 * time.Millisecond, 5: 3200 * time.Millisecond, 6: 5 * time.Second, 1000: 5 * time.Second} {
		if got := backoff.Delay(100*time.Millisecond, 5*time.Second, attempt); got != want {
			t.Errorf("Delay(attempt %d) = %v, want %v", attempt, got, want)
		}
	}
}

func TestSleep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		if !backoff.Sleep(t.Context(), time.Minute) || time.Since(start) != time.Minute {
			t.Fatalf("Sleep of a minute: false or %v", time.Since(start))
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		start = time.Now()
		if backoff.Sleep(ctx, time.Minute) || time.Since(start) != time.Second {
			t.Fatalf("Sleep cut short by its context after a second: true or %v", time.Since(start))
		}
	})
}

// A loop's pauses double, jittered between half and all of each; it gives up
// before a pause that would end past its deadline; each try is bounded by
// its own bound within the deadline.
func TestLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		l := backoff.Start(100*time.Millisecond, 400*time.Millisecond, time.Second, 300*time.Millisecond)
		for i := 0; ; i++ {
			ctx, cancel := l.Try(t.Context())
			dl, _ := ctx.Deadline()
			cancel()
			if bound := min(300*time.Millisecond, time.Until(l.End())); time.Until(dl) != bound {
				t.Fatalf("try %d: deadline in %v, want %v", i, time.Until(dl), bound)
			}
			before := time.Now()
			if !l.Pause(t.Context()) {
				if time.Since(start) > time.Second || i < 2 {
					t.Fatalf("gave up after %v and %d pauses", time.Since(start), i)
				}
				return
			}
			p := time.Since(before)
			if w := min(100*time.Millisecond<<i, 400*time.Millisecond); p < w/2 || p > w {
				t.Fatalf("pause %d: %v, want between %v and %v", i, p, w/2, w)
			}
		}
	})
}

func TestJitter(t *testing.T) {
	seen := map[time.Duration]bool{}
	for range 100 {
		d := backoff.Jitter(time.Second)
		if d < time.Second/2 || d > time.Second {
			t.Fatalf("Jitter(1s) = %v", d)
		}
		seen[d] = true
	}
	if len(seen) < 50 {
		t.Fatalf("%d distinct pauses in 100", len(seen))
	}
}
