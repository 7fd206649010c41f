package http_test

import (
	"crypto/rand"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/mcp-resume/mcp-resume/internal/jstest"
	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/resume"
)

// BenchmarkHTTPDurable: what asking for durability costs end to end, over
// loopback Streamable HTTP with a resumable client: the same server with its
// requests in memory and on an embedded file-backed JetStream (serve
// --data-dir, --sync periodic and --sync always). Each iteration makes one echo
// call (timed: echo-p50-us) and one call that sends a burst of progress
// notifications (progress/s). Compare the sub-benchmarks of one run.
func BenchmarkHTTPDurable(b *testing.B) {
	for _, store := range []struct {
		name string
		open func(b *testing.B) resume.Store // nil: in memory
	}{
		{"memory", nil},
		{"data-dir-periodic", func(b *testing.B) resume.Store { st, _, _ := jstest.Start(b, false); return st }},
		{"data-dir-always", func(b *testing.B) resume.Store { st, _, _ := jstest.Start(b, true); return st }},
	} {
		b.Run("store="+store.name, func(b *testing.B) {
			opts := &mcp.Options{}
			if store.open != nil {
				opts.Store = store.open(b)
			}
			c := newBenchClient(b, benchTarget{name: store.name, caps: `{"resumableRequests":{}}`, start: func() (string, func()) { return startOursWith(opts) }})
			burst := fmt.Sprintf(`{"name":"burst","arguments":{"count":%d},"_meta":{"progressToken":"p"}}`, burstCount)
			notes := 0
			count := func(m *benchMsg) {
				if m.Method == "notifications/progress" {
					notes++
				}
			}
			c.call(b, 1, `{"name":"echo","arguments":{"text":"hello"}}`, nil, checkEcho)
			var echo []time.Duration
			var inBursts time.Duration
			id := 1
			for b.Loop() {
				id++
				t0 := time.Now()
				c.call(b, id, `{"name":"echo","arguments":{"text":"hello"}}`, nil, nil)
				echo = append(echo, time.Since(t0))
				id++
				t0 = time.Now()
				c.call(b, id, burst, count, nil)
				inBursts += time.Since(t0)
			}
			if notes != len(echo)*burstCount {
				b.Fatalf("%d progress notifications in %d bursts of %d", notes, len(echo), burstCount)
			}
			slices.Sort(echo)
			b.ReportMetric(float64(echo[len(echo)/2].Nanoseconds())/1000, "echo-p50-us")
			b.ReportMetric(float64(notes)/inBursts.Seconds(), "progress/s")
		})
	}
}

// BenchmarkHTTPKeyed: an echo call its client names with a key of its own
// (io.mcp-resume/key, as every call of our client, connect and the gateway
// is), over loopback Streamable HTTP, with the requests in memory and on an
// embedded JetStream (serve --data-dir). echo-p50-us is the call's round trip.
func BenchmarkHTTPKeyed(b *testing.B) {
	for _, store := range []struct {
		name string
		open func(b *testing.B) resume.Store // nil: in memory
	}{
		{"memory", nil},
		{"data-dir", func(b *testing.B) resume.Store { st, _, _ := jstest.Start(b, false); return st }},
	} {
		b.Run("store="+store.name, func(b *testing.B) {
			opts := &mcp.Options{}
			if store.open != nil {
				opts.Store = store.open(b)
			}
			c := newBenchClient(b, benchTarget{name: store.name, caps: `{"resumableRequests":{}}`, start: func() (string, func()) { return startOursWith(opts) }})
			var echo []time.Duration
			id := 0
			b.ReportAllocs()
			for b.Loop() {
				id++
				params := fmt.Sprintf(`{"name":"echo","arguments":{"text":"hello"},"_meta":{"io.mcp-resume/key":%q}}`, rand.Text()+rand.Text()[:17])
				t0 := time.Now()
				c.call(b, id, params, nil, checkEcho)
				echo = append(echo, time.Since(t0))
			}
			slices.Sort(echo)
			b.ReportMetric(float64(echo[len(echo)/2].Nanoseconds())/1000, "echo-p50-us")
		})
	}
}
