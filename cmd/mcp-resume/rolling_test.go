package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-resume/mcp-resume/mcp/client"
	"github.com/mcp-resume/mcp-resume/spec"
	"github.com/mcp-resume/mcp-resume/testkit/balancer"
	"github.com/mcp-resume/mcp-resume/testkit/freeport"
	"github.com/mcp-resume/mcp-resume/testkit/jstest"
	"github.com/mcp-resume/mcp-resume/testkit/poll"
	"github.com/mcp-resume/mcp-resume/transport"
	httptransport "github.com/mcp-resume/mcp-resume/transport/http"
)

// replicaSet is three serve processes on one JetStream cluster of three
// servers, each at a port of its own, behind a balancer that sends each new
// connection to an instance whose /readyz answers 200, picked at random: one
// client's connections, and so its HTTP session, land on every instance.
type replicaSet struct {
	t     *testing.T
	args  []string // each instance's command line
	mu    sync.Mutex
	lines []startLine // guarded by mu: each instance's current process
	lb    *balancer.Balancer
}

func startReplicas(t *testing.T, extra func(i int) string) *replicaSet {
	nc := jstest.StartCluster(t, 3)
	ports, err := freeport.Ports(3)
	if err != nil {
		t.Fatal(err)
	}
	rs := &replicaSet{t: t}
	var backends []balancer.Backend
	for i, name := range []string{"a", "b", "c"} {
		addr := fmt.Sprintf("127.0.0.1:%d", ports[i])
		rs.args = append(rs.args, fmt.Sprintf("serve --http %s --nats-url %s --replicas 3 --instance %s %s", addr, nc.URLs(i), name, extra(i)))
		rs.lines = append(rs.lines, spawnNet(t, rs.args[i], 1)[0])
		backends = append(backends, balancer.Backend{Addr: addr, Ready: "http://" + addr + "/readyz"})
	}
	rs.lb = balancer.Start(t, backends)
	return rs
}

// url is the balancer's MCP endpoint.
func (rs *replicaSet) url() string { return "http://" + rs.lb.Addr() + "/mcp" }

// line is instance i's current process.
func (rs *replicaSet) line(i int) startLine {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.lines[i]
}

// processing is instance i's count of requests running
// (mcp_resume_requests{state="processing"} on its /metrics).
func (rs *replicaSet) processing(i int) int {
	text, err := metricsText(rs.line(i).URL)
	if err != nil {
		rs.t.Errorf("instance %d's metrics: %v", i, err)
		return 0
	}
	return processingIn(text)
}

// restart stops instance i with sig (waiting for it to exit 0 after its drain)
// and starts it again, as a rolling update does; it returns how long the stop took.
func (rs *replicaSet) restart(i int, sig os.Signal) time.Duration {
	start := time.Now()
	if err := rs.line(i).Stop(sig); err != nil {
		rs.t.Errorf("instance %d after %v: %v", i, sig, err)
	}
	took := time.Since(start)
	l := spawnNet(rs.t, rs.args[i], 1)[0]
	rs.mu.Lock()
	rs.lines[i] = l
	rs.mu.Unlock()
	return took
}

// A rolling update that loses no call (issue 59): three replicas on a
// JetStream cluster behind a round-robin balancer, 100 keyed countdowns of 30 s
// (a progress value a second) started through the balancer one every 300 ms,
// and meanwhile each replica in turn stopped with SIGTERM (its drain: /readyz
// 503, new calls refused shutting_down and sent again by the client on a new
// connection, running calls finishing there), waited for and started again.
// Every call returns its result with every progress value once and in order, at
// the client's defaults.
func TestRollingUpdate(t *testing.T) {
	t.Parallel()
	const (
		calls   = 100
		seconds = 30
		every   = 900 * time.Millisecond
	)
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute) // a call that hangs fails the test
	defer cancel()
	rs := startReplicas(t, func(int) string { return "--drain-grace 2m" })

	var (
		wg      sync.WaitGroup
		results atomic.Int64
	)
	for i := range calls {
		wg.Go(func() {
			wait := time.NewTimer(time.Duration(i) * every)
			defer wait.Stop()
			select {
			case <-wait.C:
			case <-ctx.Done():
				return
			}
			c, err := client.Connect(ctx, httpDialer(rs.url()), nil)
			if err != nil {
				t.Errorf("call %d: connecting: %v", i, err)
				return
			}
			defer c.Close()
			var (
				mu       sync.Mutex // guards progress
				progress []int
			)
			res, err := c.CallTool(ctx, "countdown", map[string]any{"seconds": seconds, "steps": seconds}, &client.CallOptions{
				Progress: func(p client.Progress) {
					mu.Lock()
					progress = append(progress, int(p.Progress))
					mu.Unlock()
				},
			})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				t.Errorf("call %d: %v (progress %v)", i, err, progress)
			case resultText(res) != fmt.Sprintf("countdown done: %d of %d steps", seconds, seconds):
				t.Errorf("call %d: result %q", i, resultText(res))
			case !slices.Equal(progress, countTo(seconds)):
				t.Errorf("call %d: progress %v, want 1..%d once each in order", i, progress, seconds)
			default:
				results.Add(1)
			}
		})
	}

	// The update: each instance in turn, while the calls start and run.
	pause := time.NewTimer(3 * time.Second)
	select {
	case <-pause.C:
	case <-ctx.Done():
	}
	for i := range 3 {
		// Each instance is stopped while it runs calls: a drain with nothing to
		// wait for would prove nothing.
		n := 0
		poll.Until(t, time.Minute, fmt.Sprintf("instance %d to run a call", i), func() bool { n = rs.processing(i); return n > 0 })
		t.Logf("instance %d runs %d calls", i, n)
		took := rs.restart(i, syscall.SIGTERM)
		t.Logf("instance %d drained and stopped in %v, started again", i, took.Round(time.Millisecond))
	}
	wg.Wait()
	if n := results.Load(); n != calls {
		t.Fatalf("%d of %d calls returned their result with every progress value once", n, calls)
	}
}

// The hand-off at the end of a drain, and a crash (issue 59): countdowns
// (restartable) and asks (a tool that waits 8 s, then asks its client; not
// restartable) started on each of three replicas, each client on its instance
// first and through the balancer after a lost connection. Then instance a is
// killed (SIGKILL) and instance b stopped with SIGTERM and a drain grace of 2 s,
// shorter than its calls. Every countdown returns its result (those of a and b
// run again on c); an ask of a ends owner_lost, one of b server_stopped, one of c
// returns its answer; no call hangs.
func TestDrainHandsOn(t *testing.T) {
	t.Parallel()
	const perInstance = 3
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	rs := startReplicas(t, func(i int) string {
		grace := "1m"
		if i == 1 {
			grace = "2s"
		}
		// A lease long enough for a cluster short of CPU under go test -race
		// ./... (3 s lapsed there once), short enough to take over soon.
		return "--restartable countdown --lease 6s --drain-grace " + grace
	})

	type outcome struct {
		instance int
		tool     string
		res      *mcpgo.CallToolResult
		err      error
	}
	var (
		wg       sync.WaitGroup
		started  sync.WaitGroup // each call has its resume policy
		outcomes = make(chan outcome, 3*2*perInstance)
	)
	call := func(instance int, tool string, args map[string]any) {
		started.Add(1)
		wg.Go(func() {
			// The first connection goes to the instance; the next ones, once
			// it is gone, through the balancer.
			first := rs.line(instance).URL
			var dials atomic.Int64
			dial := func(ctx context.Context) (transport.Conn, error) {
				if dials.Add(1) == 1 {
					return httpDialer(first)(ctx)
				}
				return httpDialer(rs.url())(ctx)
			}
			c, err := client.Connect(ctx, dial, &client.Options{
				Elicitation: func(context.Context, mcpgo.ElicitationRequest) (*mcpgo.ElicitationResult, error) {
					return &mcpgo.ElicitationResult{ElicitationResponse: mcpgo.ElicitationResponse{
						Action: mcpgo.ElicitationResponseActionAccept, Content: map[string]any{"answer": "c"}}}, nil
				},
			})
			if err != nil {
				started.Done()
				outcomes <- outcome{instance, tool, nil, err}
				return
			}
			defer c.Close()
			var once sync.Once
			res, err := c.CallTool(ctx, tool, args, &client.CallOptions{Policy: func(client.Policy) { once.Do(started.Done) }})
			once.Do(started.Done)
			outcomes <- outcome{instance, tool, res, err}
		})
	}
	for i := range 3 {
		for range perInstance {
			call(i, "countdown", map[string]any{"seconds": 10, "steps": 10})
			call(i, "ask", map[string]any{"delay": 8})
		}
	}
	started.Wait()
	var stops sync.WaitGroup
	stops.Go(rs.line(0).Kill)
	stops.Go(func() {
		if err := rs.line(1).Stop(syscall.SIGTERM); err != nil {
			t.Errorf("instance b after SIGTERM: %v", err)
		}
	})
	stops.Wait()
	wg.Wait()
	close(outcomes)

	want := map[int]spec.Reason{0: spec.ReasonOwnerLost, 1: spec.ReasonServerStopped}
	for o := range outcomes {
		switch {
		case o.tool == "countdown" && (o.err != nil || resultText(o.res) != "countdown done: 10 of 10 steps"):
			t.Errorf("a countdown of instance %d: %v, %v; want its result", o.instance, o.err, o.res)
		case o.tool == "countdown":
		case o.instance == 2 && (o.err != nil || resultText(o.res) != "answer: c"):
			t.Errorf("an ask of instance c: %v, %v; want its answer", o.err, o.res)
		case o.instance < 2 && reasonOf(o.err) != want[o.instance]:
			t.Errorf("an ask of instance %d: %v, %v; want an error with reason %s", o.instance, o.err, o.res, want[o.instance])
		}
	}
}

// httpDialer dials url over Streamable HTTP with a transport of its own, as
// the call command does: a request's event stream that ends before its answer
// ends the connection, and the client connects again.
func httpDialer(url string) client.Dialer {
	hc := &http.Client{Transport: &http.Transport{}}
	return func(context.Context) (transport.Conn, error) {
		return httptransport.Dial(url, &httptransport.ClientOptions{Client: hc, FailOnStreamLoss: true}), nil
	}
}
