package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcp-resume/mcp-resume/mcp/client"
	"github.com/mcp-resume/mcp-resume/testkit/faultproxy"
	"github.com/mcp-resume/mcp-resume/testkit/jstest"
	"github.com/mcp-resume/mcp-resume/testkit/poll"
	"github.com/mcp-resume/mcp-resume/transport"
	httptransport "github.com/mcp-resume/mcp-resume/transport/http"
)

// The streams an instance with --nats-url creates: queued messages, records,
// leases.
var clusterStreams = []string{"MCP_RESUME", "KV_mcp-resume", "KV_mcp-resume-leases"}

// A NATS server lost under a running cluster (issue 24): three serve processes
// with --replicas 3 on a JetStream cluster of three servers embedded in the test,
// each connected through every server's URL. The server that one or more
// instances are connected to is made the leader of the three streams, then shut
// down while clients run on every instance:
//   - countdowns (progress every 100 ms) on each instance, over a connection of
//     their own;
//   - hoppers: countdowns through proxies that cut each connection after
//     300-900 ms, each connection to the next instance, so that the calls are
//     resumed through instances that do not own them (NATS carries the
//     attachment) before, during and after the loss;
//   - echo calls one after another on each instance;
//   - getStatus of a running countdown of each instance, through another
//     instance, every 50 ms.
//
// Every call returns its result, every countdown its progress 1..steps once and
// in order (countdown is not restartable: a call taken over by another instance
// would fail owner_lost, one run again would repeat its progress), every
// instance answers echoes after the loss, every getStatus is answered processing
// (completed, or an error once the call's own client has its result) within
// statusBound, the instances cut off reconnect to the servers left, and every
// instance keeps its lease (it exits 0 on SIGTERM at the end).
//
// A read or call in flight through the server as it goes is lost, and waits out
// its timeout: a getStatus through a non-owner waits for the store (a try of
// the lookup, 1 s) and for its call to the owner (--lease/2, at most 5 s); an
// echo for its record's first write (the client's 5 s), the call running
// without a resume policy when that fails.
func TestClusterNATSServerLoss(t *testing.T) {
	t.Parallel() // a subprocess's test, mostly waiting: beside the package's others
	const (
		steps       = 40
		seconds     = 4.0
		perInstance = 4 // countdowns per instance on a connection of their own
		hoppers     = 3 // clients whose connections hop between instances
		perHopper   = 3
		statusBound = 8 * time.Second // a getStatus answered slower fails the test (see above)
	)
	start := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // a call that hangs fails the test
	defer cancel()
	nc := jstest.StartCluster(t, 3)
	var ins []startLine
	for i, name := range []string{"a", "b", "c"} {
		// The pool of URLs begins with a different server for each; nats.go
		// shuffles it, so which server each instance is on is up to chance.
		ins = append(ins, spawnNet(t, fmt.Sprintf("serve --http 127.0.0.1:0 --nats-url %s --replicas 3 --instance %s", nc.URLs(i), name), 1)[0])
	}
	t.Logf("cluster and instances up in %v", time.Since(start).Round(time.Millisecond))

	adm, err := nats.Connect(nc.URLs(0), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	js, err := jetstream.New(adm)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range clusterStreams {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if info := s.CachedInfo(); info.Config.Replicas != 3 || info.Cluster == nil || len(info.Cluster.Replicas) != 2 {
			t.Fatalf("stream %s: %d replicas, cluster %+v; want 3 (a leader and 2 followers)", name, info.Config.Replicas, info.Cluster)
		}
	}

	// The victim: a server with an instance on it, leading every stream.
	victim := -1
	for i := range nc.Len() {
		if n := nc.Clients(t, i, "mcp-resume"); n > 0 && (victim < 0 || i == nc.StreamLeader("MCP_RESUME")) {
			victim = i
		}
	}
	if victim < 0 {
		t.Fatal("no server has an instance connected")
	}
	for _, name := range clusterStreams {
		nc.MoveStreamLeader(t, adm, name, victim)
	}
	cutOff := nc.Clients(t, victim, "mcp-resume")

	dialer := func(u string) client.Dialer {
		tr := &http.Transport{}
		t.Cleanup(tr.CloseIdleConnections)
		hc := &http.Client{Transport: tr}
		return func(context.Context) (transport.Conn, error) {
			return httptransport.Dial(u, &httptransport.ClientOptions{Client: hc, FailOnStreamLoss: true}), nil
		}
	}
	connect := func(dial client.Dialer) *client.Client {
		c, err := client.Connect(t.Context(), dial, &client.Options{MinBackoff: 5 * time.Millisecond, MaxBackoff: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	direct := make([]*client.Client, len(ins))
	var hops []client.Dialer // to each instance through a proxy that cuts
	for i, l := range ins {
		direct[i] = connect(dialer(l.URL))
		u, err := url.Parse(l.URL)
		if err != nil {
			t.Fatal(err)
		}
		p := faultproxy.NewTimed(t, u.Host, 300*time.Millisecond, 900*time.Millisecond)
		hops = append(hops, dialer("http://"+p.Addr()+u.Path))
	}

	var (
		wg        sync.WaitGroup
		started   sync.WaitGroup // every countdown has its policy and a few steps
		calls     atomic.Int64   // countdowns that returned their result
		resumes   atomic.Int64
		watchedMu sync.Mutex // guards watched
		watched   = make([]client.Policy, len(ins))
		ended     = make([]chan struct{}, len(ins)) // closed when watched[i]'s call returns
		callsDone = make(chan struct{})
	)
	for i := range ended {
		ended[i] = make(chan struct{})
	}
	countdown := func(who string, c *client.Client, watch int) {
		started.Add(1)
		wg.Go(func() {
			var (
				mu       sync.Mutex // guards progress (Progress runs on the client's reader)
				progress []int
				once     sync.Once
			)
			res, err := c.CallTool(ctx, "countdown", map[string]any{"seconds": seconds, "steps": steps}, &client.CallOptions{
				Policy: func(p client.Policy) {
					if watch >= 0 {
						watchedMu.Lock()
						watched[watch] = p
						watchedMu.Unlock()
					}
				},
				Progress: func(p client.Progress) {
					mu.Lock()
					progress = append(progress, int(p.Progress))
					if len(progress) == 3 {
						once.Do(started.Done)
					}
					mu.Unlock()
				},
				Resumed: func() { resumes.Add(1) },
			})
			once.Do(started.Done)
			if watch >= 0 {
				close(ended[watch])
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.Errorf("%s: %v (progress %v)", who, err, progress)
				return
			}
			if got := resultText(res); got != fmt.Sprintf("countdown done: %d of %d steps", steps, steps) {
				t.Errorf("%s: result %q", who, got)
			}
			if !slices.Equal(progress, countTo(steps)) {
				t.Errorf("%s: progress %v, want 1..%d once each in order", who, progress, steps)
			}
			calls.Add(1)
		})
	}
	for i, c := range direct {
		for j := range perInstance {
			watch := -1
			if j == 0 {
				watch = i
			}
			countdown(fmt.Sprintf("countdown %d on %s", j, ins[i].URL), c, watch)
		}
	}
	for h := range hoppers {
		var next atomic.Int64
		next.Store(int64(h))
		c := connect(func(ctx context.Context) (transport.Conn, error) {
			return hops[next.Add(1)%int64(len(hops))](ctx)
		})
		for j := range perHopper {
			countdown(fmt.Sprintf("hopper %d, countdown %d", h, j), c, -1)
		}
	}

	// Echo calls, one after another on each instance, until the countdowns end.
	var (
		echoes   atomic.Int64
		killedAt atomic.Int64 // when the server was shut down, UnixNano; 0 before
	)
	echoGap := make([]time.Duration, len(ins)) // the longest an echo took
	echoAfter := make([]int, len(ins))         // echoes begun after the shutdown
	var echoWG sync.WaitGroup
	for i, c := range direct {
		echoWG.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-callsDone:
					if echoAfter[i] > 0 {
						return
					}
				default:
				}
				text := fmt.Sprintf("echo %d on %d", n, i)
				at := time.Now()
				res, err := c.CallTool(ctx, "echo", map[string]any{"text": text}, nil)
				echoGap[i] = max(echoGap[i], time.Since(at))
				if err != nil || resultText(res) != text {
					t.Errorf("%s: %v %q", text, err, resultText(res))
					return
				}
				echoes.Add(1)
				if k := killedAt.Load(); k != 0 && at.UnixNano() > k {
					echoAfter[i]++
				}
			}
		})
	}

	started.Wait()
	// getStatus of instance i's watched countdown through instance i+1, every
	// 50 ms, until the countdowns end.
	statusMax := make([]time.Duration, len(ins))
	var statuses atomic.Int64
	var statusWG sync.WaitGroup
	for i := range ins {
		watchedMu.Lock()
		p := watched[i]
		watchedMu.Unlock()
		c := connect(dialer(ins[(i+1)%len(ins)].URL))
		statusWG.Go(func() {
			tick := time.NewTicker(50 * time.Millisecond)
			defer tick.Stop()
			for {
				at := time.Now()
				st, err := c.Status(ctx, p.RequestID, p.Token)
				took := time.Since(at)
				statusMax[i] = max(statusMax[i], took)
				switch {
				case err == nil && st.Status == "completed":
					return // its client has the result
				case err != nil || st.Status != "processing":
					select {
					case <-ended[i]: // acknowledged by its client, which has the result
					case <-time.After(statusBound):
						t.Errorf("getStatus of %s's countdown through %s: %+v, %v", ins[i].URL, ins[(i+1)%len(ins)].URL, st, err)
					}
					return
				case took > statusBound:
					t.Errorf("getStatus of %s's countdown through %s took %v", ins[i].URL, ins[(i+1)%len(ins)].URL, took)
				}
				statuses.Add(1)
				select {
				case <-tick.C:
				case <-callsDone:
					return
				}
			}
		})
	}

	killed := time.Now()
	killedAt.Store(killed.UnixNano())
	nc.Shutdown(victim)
	t.Logf("shut down %s (leader of %s, %d of the instances connected to it; meta leader now %d)",
		nc.Name(victim), strings.Join(clusterStreams, ", "), cutOff, nc.MetaLeader())
	var reconnected time.Duration
	led := make([]time.Duration, len(clusterStreams)) // when each stream had a leader again
	poll.Until(t, 20*time.Second, "every instance connected to a server left, and a leader of every stream", func() bool {
		if reconnected == 0 {
			n := 0
			for i := range nc.Len() {
				if i != victim {
					n += nc.Clients(t, i, "mcp-resume")
				}
			}
			if n == len(ins) {
				reconnected = time.Since(killed)
			}
		}
		ok := reconnected > 0
		for k, name := range clusterStreams {
			if led[k] == 0 && nc.StreamLeader(name) >= 0 {
				led[k] = time.Since(killed).Round(time.Millisecond)
			}
			ok = ok && led[k] > 0
		}
		return ok
	})
	wg.Wait()
	close(callsDone)
	echoWG.Wait()
	statusWG.Wait()
	for i, l := range ins {
		if w := l.Warnings(); w != "" {
			t.Logf("instance %d's warnings:\n%s", i, w)
		}
	}
	t.Logf("after the shutdown: instances reconnected in %v, streams %v led again in %v; %d countdowns done (%d resumes), %d echoes (slowest %v), %d getStatus (slowest %v); %v in all",
		reconnected.Round(time.Millisecond), clusterStreams, led, calls.Load(), resumes.Load(), echoes.Load(), slices.Max(echoGap).Round(time.Millisecond),
		statuses.Load(), slices.Max(statusMax).Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	if want := int64(len(ins)*perInstance + hoppers*perHopper); calls.Load() != want {
		t.Errorf("%d countdowns returned their result, want %d", calls.Load(), want)
	}
	for i, n := range echoAfter {
		if n == 0 {
			t.Errorf("%s answered no echo begun after the shutdown", ins[i].URL)
		}
	}
	if resumes.Load() == 0 {
		t.Error("no call was resumed: the hoppers' connections were never cut")
	}
}

// countTo returns 1..n.
func countTo(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i + 1
	}
	return s
}

// resultText is a result's text, "" for none.
func resultText(res *mcpgo.CallToolResult) string {
	if res == nil || len(res.Content) != 1 {
		return ""
	}
	tc, _ := res.Content[0].(mcpgo.TextContent)
	return tc.Text
}
