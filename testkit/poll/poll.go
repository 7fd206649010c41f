// Package poll waits in tests for a state that another party reaches on its own
// time: another process, a server's real timers (net/http and NATS cannot run in a
// synctest bubble), a notification with no answer. It checks cond at a short
// interval until it holds, and fails the test at the deadline: a test that polls
// never passes by luck, it only waits longer or shorter.
package poll

import (
	"testing"
	"time"
)

// Interval is how long Until sleeps between checks.
const Interval = 5 * time.Millisecond

// Until calls cond until it returns true, and fails t (naming what it waited for)
// when it has not within d.
func Until(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(Interval)
	}
}
