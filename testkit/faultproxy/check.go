package faultproxy

import (
	"slices"
	"testing"
)

// MinReconnects is how many times, at least, each call of a fault test must have
// lost its connection and come back: the test's claim is exactly-once delivery
// across several cuts of every call, not of the run as a whole. The HTTP and
// WebSocket fault tests meet it by construction: a connection carries under
// 1,500 bytes from the server, and a countdown call of 20 steps with its
// session's set-up needs more than three times that (at 10 steps, about twice
// that, a call whose connections were cut late twice could finish after one
// reconnect: seen once in CI).
const MinReconnects = 2

// CheckReconnects reports, for a fault test's calls, the proxy's cuts and each
// call's reconnects (attempts after its first), and fails t when a call was
// reconnected fewer than MinReconnects times: it would test less than it claims.
func CheckReconnects(t testing.TB, p *Proxy, reconnects []int) {
	t.Helper()
	if len(reconnects) == 0 {
		return
	}
	sorted := slices.Sorted(slices.Values(reconnects))
	total := 0
	for _, n := range sorted {
		total += n
	}
	t.Logf("%d calls, %d connections cut, %d reconnects (per call: min %d, median %d, max %d)",
		len(sorted), p.Cuts(), total, sorted[0], sorted[len(sorted)/2], sorted[len(sorted)-1])
	for i, n := range reconnects {
		if n < MinReconnects {
			t.Errorf("call %d was reconnected %d times, want at least %d: the proxy did not cut it enough to test anything", i, n, MinReconnects)
		}
	}
}
