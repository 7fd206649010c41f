package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-resume/mcp-resume/testkit/faultproxy"
	"github.com/mcp-resume/mcp-resume/testkit/poll"
	"github.com/mcp-resume/mcp-resume/transport"
	httptransport "github.com/mcp-resume/mcp-resume/transport/http"
)

// TestChurnSoak is the churn of issue 26 against the binary with default
// flags: rounds of 100 concurrent 2-second countdown calls whose connections
// are cut at random points, each reconnect a new session resuming with the
// token and the ack (the worst client for the server: one that keeps no
// session), then a quiet period. Every interval it prints the server's
// goroutines, RSS and sessions (from /metrics) and the calls and progress
// lost; at the end the server must be back under 500 goroutines and 400 MiB,
// with every result received and no progress lost.
//
// Short form (in go test ./..., and so in .ci/run): 15 s of churn, 5 s quiet.
// Long form: MR_SOAK=4m MR_SOAK_IDLE=2m MR_SOAK_EVERY=1m go test -run TestChurnSoak -v ./cmd/mcp-resume/
func TestChurnSoak(t *testing.T) {
	t.Parallel() // a subprocess's test, mostly waiting: beside the package's others
	if testing.Short() {
		t.Skip("slow")
	}
	churn, idle, every := envDuration("MR_SOAK", 15*time.Second), envDuration("MR_SOAK_IDLE", 5*time.Second), envDuration("MR_SOAK_EVERY", 5*time.Second)
	l := spawnNet(t, "serve --http 127.0.0.1:0", 1)[0]
	host := strings.TrimSuffix(strings.TrimPrefix(l.URL, "http://"), "/mcp")
	p := faultproxy.New(t, host, 400, 1800)
	tr := &http.Transport{MaxIdleConnsPerHost: 100}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	dial := func(context.Context) (transport.Conn, error) {
		return httptransport.Dial("http://"+p.Addr()+"/mcp", &httptransport.ClientOptions{Client: hc, FailOnStreamLoss: true}), nil
	}

	var calls, results, lost, failed atomic.Int64
	report := func(phase string) (goroutines, rss, sessions float64) {
		m := scrape(t, "http://"+host+"/metrics")
		goroutines, rss, sessions = m["go_goroutines"], m["process_resident_memory_bytes"], m["mcp_resume_http_sessions"]
		t.Logf("%-6s goroutines %5.0f  RSS %6.1f MiB  sessions %5.0f  calls %6d  results %6d  failed %d  progress lost %d",
			phase, goroutines, rss/(1<<20), sessions, calls.Load(), results.Load(), failed.Load(), lost.Load())
		return
	}
	stop := time.Now().Add(churn)
	tick := time.NewTicker(every)
	defer tick.Stop()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for n := 0; time.Now().Before(stop); n++ {
			var wg sync.WaitGroup
			for i := range 100 {
				wg.Go(func() {
					calls.Add(1)
					call := &faultproxy.Call{N: n*100 + i, Steps: 20, Tool: "countdown", Args: `{"seconds":2,"steps":20}`, Want: "countdown done: 20 of 20 steps"}
					var reconnects int
					if err := faultproxy.Drive(dial, call, &reconnects, 200); err != nil {
						failed.Add(1)
						t.Errorf("call %d: %v", call.N, err)
						return
					}
					results.Add(1)
					lost.Add(int64(call.Steps - len(call.Progress())))
				})
			}
			wg.Wait()
		}
	}()
	start := time.Now()
churning:
	for {
		select {
		case <-done:
			break churning
		case <-tick.C:
			report(fmt.Sprintf("%.0fs", time.Since(start).Seconds()))
		}
	}
	report("churned")
	tr.CloseIdleConnections()
	quiet := time.NewTimer(idle)
	defer quiet.Stop()
quieting:
	for {
		select {
		case <-quiet.C:
			break quieting
		case <-tick.C:
			report(fmt.Sprintf("%.0fs", time.Since(start).Seconds()))
		}
	}
	goroutines, rss, _ := report("idle")
	if goroutines > 500 || rss > 400<<20 || results.Load() != calls.Load() || lost.Load() != 0 {
		t.Fatalf("after the churn and %v quiet: %.0f goroutines (want <= 500), %.1f MiB RSS (<= 400), %d of %d results, %d progress lost",
			idle, goroutines, rss/(1<<20), results.Load(), calls.Load(), lost.Load())
	}
}

func envDuration(name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil && d > 0 {
		return d
	}
	return def
}

// scrape reads the unlabelled samples of a Prometheus text exposition.
func scrape(t testing.TB, url string) map[string]float64 {
	t.Helper()
	// No keep-alive: a scrape leaves no connection (and goroutine) behind on
	// the server it measures.
	resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if !ok || strings.HasPrefix(name, "#") || strings.Contains(name, "{") {
			continue
		}
		if v, err := strconv.ParseFloat(val, 64); err == nil {
			out[name] = v
		}
	}
	return out
}

// Five `mcp-resume call countdown seconds=4 steps=16` at once through a proxy
// that cuts their connections every few hundred bytes (after the call's
// set-up): each keeps one session on the server however often it reconnects,
// and when they are done the server is back within 10 goroutines of where it
// was.
func TestCLIChurnLeavesNothing(t *testing.T) {
	l := spawnNet(t, "serve --http 127.0.0.1:0", 1)[0]
	host := strings.TrimSuffix(strings.TrimPrefix(l.URL, "http://"), "/mcp")
	metricsURL := "http://" + host + "/metrics"
	base := scrape(t, metricsURL)["go_goroutines"]
	// Enough for initialize, tools/list (call checks its arguments), the call
	// and its resume policy on one connection; then cut mid-progress.
	p := faultproxy.New(t, host, 3000, 3800)
	var wg sync.WaitGroup
	var maxSessions atomic.Int64
	stop := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Go(func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if n := int64(scrape(t, metricsURL)["mcp_resume_http_sessions"]); n > maxSessions.Load() {
					maxSessions.Store(n)
				}
			}
		}
	})
	for i := range 5 {
		wg.Go(func() {
			var stdout, stderr strings.Builder
			if err := run([]string{"call", "--url", "http://" + p.Addr() + "/mcp", "countdown", "seconds=4", "steps=16"}, strings.NewReader(""), &stdout, &stderr); err != nil ||
				!strings.Contains(stdout.String(), "countdown done: 16 of 16 steps") {
				t.Errorf("call %d: %v; stdout %q; stderr %q", i, err, stdout.String(), stderr.String())
			}
		})
	}
	wg.Wait()
	close(stop)
	sampler.Wait()
	if p.Cuts() < 5 {
		t.Fatalf("%d cuts: the proxy did not cut the calls", p.Cuts())
	}
	if n := maxSessions.Load(); n > 5 {
		t.Fatalf("%d sessions at once, want one per call at most", n)
	}
	p.Close()
	var g float64
	poll.Until(t, 20*time.Second, "the server's goroutines back within 10 of where they were", func() bool {
		g = scrape(t, metricsURL)["go_goroutines"]
		return g <= base+10
	})
	t.Logf("goroutines %v before, %v after; %d connections cut; at most %d sessions", base, g, p.Cuts(), maxSessions.Load())
}
