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
