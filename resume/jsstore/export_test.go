package jsstore

import (
	"testing"
	"time"
)

// SetFlushDelay makes the stores made from now on wait d before they send what
// waits, until t ends.
func SetFlushDelay(t testing.TB, d time.Duration) {
	old := flushDelay
	flushDelay = d
	t.Cleanup(func() { flushDelay = old })
}
