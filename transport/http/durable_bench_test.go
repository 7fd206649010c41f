package http_test

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/resume"
	"github.com/mcp-resume/mcp-resume/servers/demo"
	"github.com/mcp-resume/mcp-resume/spec"
	"github.com/mcp-resume/mcp-resume/testkit/jstest"
	httptransport "github.com/mcp-resume/mcp-resume/transport/http"
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

// BenchmarkHTTPDeferral: deferred answers (mcp.Options.AnswerWithin) over
// loopback Streamable HTTP, a plain client. await: the await tool's answer
// once the deferred call's result exists (a 30 ms countdown deferred after 10
// ms, its result waited for outside the timing): await-p50-us. echo: what
// deferral costs a call that answers in time, an echo to a server that defers
// and to one that does not, paired call by call: echo-ns/call for each and
// their ratio (defer/off).
func BenchmarkHTTPDeferral(b *testing.B) {
	b.Run("await", func(b *testing.B) {
		c := newBenchClient(b, benchTarget{name: "defer", caps: `{}`, start: func() (string, func()) {
			core, err := mcp.New(demo.Server("bench"), &mcp.Options{AnswerWithin: 10 * time.Millisecond})
			if err != nil {
				b.Fatal(err)
			}
			h := httptransport.NewHandler(core, nil)
			srv := httptest.NewServer(h)
			return srv.URL + "/mcp", func() {
				h.Close()
				srv.Close()
				core.Close()
			}
		}})
		var lat []time.Duration
		id := 0
		var handle string
		grab := func(m *benchMsg) {
			var r struct {
				Meta map[string]struct {
					Arguments struct {
						Handle string `json:"handle"`
					} `json:"arguments"`
				} `json:"_meta"`
			}
			if json.Unmarshal(m.Result, &r) == nil {
				handle = r.Meta[spec.MetaDeferred].Arguments.Handle
			}
		}
		for b.Loop() {
			b.StopTimer()
			id++
			handle = ""
			c.call(b, id, `{"name":"countdown","arguments":{"seconds":0.03,"steps":1}}`, nil, func(_ *testing.B, m *benchMsg) { grab(m) })
			if handle == "" {
				b.Fatal("no deferred answer")
			}
			time.Sleep(40 * time.Millisecond) // the result exists
			id++
			b.StartTimer()
			t0 := time.Now()
			c.call(b, id, fmt.Sprintf(`{"name":%q,"arguments":{"handle":%q}}`, mcp.DefaultAwaitTool, handle), nil, func(b *testing.B, m *benchMsg) {
				if !strings.Contains(string(m.Result), "countdown done") {
					b.Fatalf("await: %s", m.Result)
				}
			})
			lat = append(lat, time.Since(t0))
		}
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1000, "await-p50-us")
	})
	b.Run("echo", func(b *testing.B) {
		on := newBenchClient(b, benchTarget{name: "defer", caps: `{}`, start: func() (string, func()) {
			return startOursWith(&mcp.Options{AnswerWithin: 45 * time.Second})
		}})
		off := newBenchClient(b, benchTarget{name: "off", caps: `{}`, start: func() (string, func()) { return startOursWith(nil) }})
		var spent [2]time.Duration
		id := 0
		for b.Loop() {
			id++
			for k, c := range []*benchClient{on, off} {
				t0 := time.Now()
				c.call(b, id, `{"name":"echo","arguments":{"text":"hello"}}`, nil, checkEcho)
				spent[k] += time.Since(t0)
			}
		}
		b.ReportMetric(float64(spent[0].Nanoseconds())/float64(id), "defer-ns/call")
		b.ReportMetric(float64(spent[1].Nanoseconds())/float64(id), "off-ns/call")
		b.ReportMetric(float64(spent[0])/float64(spent[1]), "defer/off")
	})
}
