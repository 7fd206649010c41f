package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-resume/mcp-resume/mcp/client"
	"github.com/mcp-resume/mcp-resume/resume/jsstore/embedded"
	"github.com/mcp-resume/mcp-resume/spec"
	"github.com/mcp-resume/mcp-resume/testkit/faultproxy"
	"github.com/mcp-resume/mcp-resume/transport"
	httptransport "github.com/mcp-resume/mcp-resume/transport/http"
)

// natsProcess is the test binary run as a NATS server of its own (JetStream on
// a data directory, a client port on loopback): with MCP_RESUME_TEST_NATS=DIR it
// serves until SIGTERM, printing its address on stdout.
func natsProcess(dir string) {
	srv, err := embedded.Start(&embedded.Options{Dir: dir, Listen: "127.0.0.1:0"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Println(srv.Addr())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	<-sig
	srv.Shutdown()
	os.Exit(0)
}

// startNATS starts a NATS server in a process of its own (natsProcess) and
// returns its address; it is stopped when the test ends.
func startNATS(t *testing.T) string {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "MCP_RESUME_TEST_NATS="+t.TempDir())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	read := make(chan struct{}) // the reader of its stdout has ended
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		<-read
		_ = cmd.Wait()
	})
	addr := make(chan string, 1)
	go func() {
		defer close(read)
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			addr <- sc.Text()
		}
		close(addr)
		for sc.Scan() {
		}
	}()
	select {
	case a, ok := <-addr:
		if !ok {
			t.Fatal("the NATS process exited before it served")
		}
		return a
	case <-time.After(20 * time.Second):
		t.Fatal("the NATS process did not start in 20 s")
	}
	return ""
}

// TestStoreOutageSoak: serve --nats-url against a NATS server in a process of
// its own, through a proxy that takes the network to NATS away for 1 to 3
// seconds every MR_OUTAGE_EVERY, while clients call countdown (3 s, 10 steps)
// without pause for MR_OUTAGE_SOAK. Every call must end with its result
// (progress 1..10 once each, in order) or an error that states a reason, none
// may take longer than stallBound, and the server must answer an echo after
// every outage.
//
// Short form (in go test ./..., and so in .ci/run): 12 s, a cut every 4 s.
// Long form: MR_OUTAGE_SOAK=10m MR_OUTAGE_EVERY=30s go test -run TestStoreOutageSoak -v -timeout 20m ./cmd/mcp-resume/
func TestStoreOutageSoak(t *testing.T) {
	t.Parallel() // a subprocess's test, mostly waiting: beside the package's others
	if testing.Short() {
		t.Skip("slow")
	}
	const (
		clients    = 8
		steps      = 10
		stallBound = time.Minute
	)
	soak, every := envDuration("MR_OUTAGE_SOAK", 12*time.Second), envDuration("MR_OUTAGE_EVERY", 4*time.Second)
	px := faultproxy.New(t, startNATS(t), faultproxy.NoCut, faultproxy.NoCut)
	l := spawnNet(t, "serve --http 127.0.0.1:0 --nats-url nats://"+px.Addr(), 1)[0]

	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	dial := func(context.Context) (transport.Conn, error) {
		return httptransport.Dial(l.URL, &httptransport.ClientOptions{Client: hc, FailOnStreamLoss: true}), nil
	}
	ctx, cancel := context.WithTimeout(t.Context(), soak+2*stallBound)
	defer cancel()
	c, err := client.Connect(ctx, dial, &client.Options{MinBackoff: 5 * time.Millisecond, MaxBackoff: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	var (
		mu       sync.Mutex // guards the fields below
		results  int
		reasons  = map[string]int{}
		took     []time.Duration
		problems []string
	)
	end := time.Now().Add(soak)
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() {
			for n := 0; time.Now().Before(end); n++ {
				var (
					pmu      sync.Mutex
					progress []int
				)
				began := time.Now()
				res, err := c.CallTool(ctx, "countdown", map[string]any{"seconds": 3, "steps": steps}, &client.CallOptions{
					Progress: func(p client.Progress) {
						pmu.Lock()
						progress = append(progress, int(p.Progress))
						pmu.Unlock()
					},
				})
				d := time.Since(began)
				pmu.Lock()
				got := slices.Clone(progress)
				pmu.Unlock()
				mu.Lock()
				took = append(took, d)
				switch reason := reasonOf(err); {
				case d > stallBound:
					problems = append(problems, fmt.Sprintf("client %d call %d took %v (%v)", i, n, d, err))
				case err == nil && resultText(res) == fmt.Sprintf("countdown done: %d of %d steps", steps, steps) && slices.Equal(got, countTo(steps)):
					results++
				case err == nil:
					problems = append(problems, fmt.Sprintf("client %d call %d: result %q, progress %v", i, n, resultText(res), got))
				case reason != "":
					reasons[string(reason)]++
				default:
					problems = append(problems, fmt.Sprintf("client %d call %d: %v, no stated reason", i, n, err))
				}
				mu.Unlock()
			}
		})
	}

	cuts := 0
	var down time.Duration
	for next := time.Now().Add(every); next.Before(end); next = next.Add(every) {
		time.Sleep(time.Until(next)) // the pace of the outages
		d := time.Second + time.Duration(cuts%3)*time.Second
		px.Down()
		time.Sleep(d)
		px.Up()
		cuts++
		down += d
		at := time.Now()
		res, err := c.CallTool(ctx, "echo", map[string]any{"text": "after"}, nil)
		if err != nil || resultText(res) != "after" {
			t.Errorf("echo after outage %d: %v %q", cuts, err, resultText(res))
		} else {
			t.Logf("outage %d (%v): an echo answered %v after it", cuts, d, time.Since(at).Round(time.Millisecond))
		}
	}
	wg.Wait()

	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	var longest, p50 time.Duration
	if len(took) > 0 {
		longest, p50 = took[len(took)-1], took[len(took)/2]
	}
	t.Logf("%v, %d outages (%v without NATS): %d calls, %d results, ended with a reason: %v; call p50 %v, longest %v; warnings logged: %d",
		soak, cuts, down, len(took), results, reasons, p50.Round(time.Millisecond), longest.Round(time.Millisecond), strings.Count(l.Warnings(), "\n"))
	if w := l.Warnings(); w != "" {
		lines := strings.SplitN(w, "\n", 6)
		t.Logf("the first warnings:\n%s", strings.Join(lines[:min(5, len(lines))], "\n"))
	}
	for _, p := range problems {
		t.Error(p)
	}
	if results == 0 {
		t.Error("no call returned its result")
	}
}

// reasonOf returns the error.data.reason an error carries, "" when none.
func reasonOf(err error) spec.Reason {
	var e *spec.Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ""
}
