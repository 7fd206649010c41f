package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/mcp-resume/mcp-resume/testkit/reservoir"
)

// The detached scene (-detached N) measures what running requests without a
// client cost a server process: N countdowns of 600 s with a progress token
// each, started over WebSocket by clients of -per-client calls each (500 by
// default; 1 for a connection per call) that go once their calls' resume
// policies came; then, -settle later (progress
// queued meanwhile), the server's resident memory, and the latency of
// getStatus of 1,000 random ones from a new connection. Calls a server at one
// of its bounds runs plain (no resume policy within policyWait) are counted,
// not waited for; so are calls it refuses for want of memory (-32023
// overloaded).

// policyWait is how long a client waits for the next of its calls' resume
// policies: the calls whose policies have not come by then run plain (a
// server at one of its bounds: --max-live, its byte budget, short of memory),
// and are counted so instead of waited for.
const policyWait = 15 * time.Second

// detachedResult is one target's detached scene.
type detachedResult struct {
	Name          string        `json:"name"`
	Calls         int           `json:"calls"`
	PerClient     int           `json:"per_client"` // calls each client started before it went
	Plain         int           `json:"plain"`      // calls that got no resume policy (policyWait)
	Refused       int           `json:"refused"`    // calls answered overloaded (the server short of memory)
	Started       time.Duration `json:"started_ns"`
	RSSBefore     int64         `json:"rss_before_bytes"`
	RSS           int64         `json:"rss_bytes"`
	StatusP50     time.Duration `json:"getstatus_p50_ns"`
	StatusP99     time.Duration `json:"getstatus_p99_ns"`
	StatusAnswers int           `json:"getstatus_processing"`
}

func (r detachedResult) String() string {
	plain := ""
	if r.Plain > 0 {
		plain = fmt.Sprintf(" (%d of them plain: no resume policy within %v)", r.Plain, policyWait)
	}
	if r.Refused > 0 {
		plain += fmt.Sprintf(" (%d refused: overloaded)", r.Refused)
	}
	detached := max(r.Calls-r.Plain-r.Refused, 1)
	clients := ""
	if r.PerClient == 1 {
		clients = ", a client each"
	} else if r.PerClient > 1 {
		clients = fmt.Sprintf(", %d a client", r.PerClient)
	}
	return fmt.Sprintf("%-14s %d detached countdowns%s%s, started in %v: RSS %.0f MiB (%.0f MiB before; %.1f KB a request), getStatus p50 %v p99 %v (%d of 1000 processing)",
		r.Name, r.Calls, clients, plain, r.Started.Round(time.Millisecond), float64(r.RSS)/(1<<20), float64(r.RSSBefore)/(1<<20),
		float64(r.RSS-r.RSSBefore)/float64(detached)/1024, r.StatusP50.Round(time.Microsecond), r.StatusP99.Round(time.Microsecond), r.StatusAnswers)
}

// detachedTargets are the default targets of the detached scene: the binary
// serving its demo tools with room for n running requests, and a gateway in
// front of another with as much room.
func detachedTargets(bin string, n int) []string {
	room := fmt.Sprintf(" --max-live %d --max-concurrent-per-principal -1", n+1000)
	return []string{"memory=serve:" + bin + room, "gateway=gateway:" + bin + room + " --" + room}
}

// detached runs the detached scene against t.
func (t *target) detached(n, perClient int, settle time.Duration) (detachedResult, error) {
	res := detachedResult{Name: t.name, Calls: n, PerClient: perClient}
	ws := strings.Replace(strings.TrimSuffix(t.url, "/mcp"), "http://", "ws://", 1) + "/ws"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	// The server's own start (its runtime, the embedded NATS) is not the
	// requests': one session first.
	first, err := wsSession(ctx, ws)
	if err != nil {
		return res, err
	}
	_ = first.CloseNow()
	res.RSSBefore = t.rss()

	sample := &reservoir.Sample[string]{Size: 1000}
	start := time.Now()
	batches := make(chan int)
	errs := make(chan error, 4)
	var wg sync.WaitGroup
	var plain, refused atomic.Int64
	for range 4 { // four clients at a time
		wg.Go(func() {
			for first := range batches {
				p, r, err := detachBatch(ctx, ws, first, min(perClient, n-first+1), sample)
				if err != nil {
					errs <- err
					cancel()
					return
				}
				plain.Add(int64(p))
				refused.Add(int64(r))
			}
		})
	}
	for first := 1; first <= n; first += perClient {
		select {
		case batches <- first:
		case <-ctx.Done():
		}
	}
	close(batches)
	wg.Wait()
	select {
	case err := <-errs:
		return res, err
	default:
	}
	res.Started = time.Since(start)
	res.Plain, res.Refused = int(plain.Load()), int(refused.Load())
	time.Sleep(settle) // each countdown queues progress meanwhile, its client gone
	res.RSS = t.rss()

	c, err := wsSession(ctx, ws)
	if err != nil {
		return res, err
	}
	defer c.CloseNow()
	lat := make([]time.Duration, 0, 1000)
	for i := range cap(lat) {
		tok := sample.Random()
		t0 := time.Now()
		if err := c.Write(ctx, websocket.MessageText, fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"requests/getStatus","params":{%s}}`, i+1, tok)); err != nil {
			return res, err
		}
		for {
			_, m, err := c.Read(ctx)
			if err != nil {
				return res, err
			}
			if bytes.HasPrefix(m, []byte(`{"jsonrpc":"2.0","id":`)) {
				lat = append(lat, time.Since(t0))
				if bytes.Contains(m, []byte(`"processing"`)) {
					res.StatusAnswers++
				}
				break
			}
		}
	}
	slices.Sort(lat)
	res.StatusP50, res.StatusP99 = lat[len(lat)/2], lat[len(lat)*99/100]
	return res, nil
}

// wsSession opens a WebSocket session that declared resumable requests.
func wsSession(ctx context.Context, url string) (*websocket.Conn, error) {
	c, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{Subprotocols: []string{"mcp"}})
	if err != nil {
		return nil, err
	}
	c.SetReadLimit(1 << 20)
	err = c.Write(ctx, websocket.MessageText, []byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"resumableRequests":{}},"clientInfo":{"name":"loadbench","version":"1"}}}`))
	if err == nil {
		_, _, err = c.Read(ctx)
	}
	if err == nil {
		err = c.Write(ctx, websocket.MessageText, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	}
	if err != nil {
		_ = c.CloseNow()
		return nil, err
	}
	return c, nil
}

// detachBatch starts countdowns first to first+k-1 on a session of their
// own, and closes it once every call's resume policy came, or none came for
// policyWait: it returns how many calls got none (they run plain, and end as
// the session does), and how many were refused (overloaded).
func detachBatch(ctx context.Context, url string, first, k int, sample *reservoir.Sample[string]) (plain, refused int, _ error) {
	c, err := wsSession(ctx, url)
	if err != nil {
		return 0, 0, err
	}
	defer c.CloseNow()
	for i := first; i < first+k; i++ {
		if err := c.Write(ctx, websocket.MessageText, fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"countdown","arguments":{"seconds":600,"steps":300},"_meta":{"progressToken":%d}}}`, i, i)); err != nil {
			return 0, 0, err
		}
	}
	deadline := time.Now().Add(policyWait) // for the next policy: a plain call's progress comes meanwhile
	for policies := 0; policies+refused < k; {
		rctx, stop := context.WithDeadline(ctx, deadline)
		_, m, err := c.Read(rctx)
		stop()
		if err != nil && ctx.Err() == nil && rctx.Err() != nil {
			return k - policies - refused, refused, nil // the rest run plain; closing the session ends them
		}
		if err != nil {
			return 0, 0, fmt.Errorf("calls %d to %d: %d of %d policies: %w", first, first+k-1, policies, k, err)
		}
		switch {
		case bytes.Contains(m, []byte(`"notifications/requests/resumePolicy"`)):
			var p struct {
				Params struct {
					RequestID   json.RawMessage `json:"requestId"`
					ResumeToken string          `json:"resumeToken"`
				} `json:"params"`
			}
			if err := json.Unmarshal(m, &p); err != nil {
				return 0, 0, err
			}
			sample.Add(fmt.Sprintf(`"requestId":%s,"resumeToken":%q`, p.Params.RequestID, p.Params.ResumeToken))
			policies++
			deadline = time.Now().Add(policyWait)
		case bytes.HasPrefix(m, []byte(`{"jsonrpc":"2.0","id":`)) && bytes.Contains(m, []byte(`"reason":"overloaded"`)):
			refused++
			deadline = time.Now().Add(policyWait)
		case bytes.HasPrefix(m, []byte(`{"jsonrpc":"2.0","id":`)):
			return 0, 0, fmt.Errorf("a countdown answered before its client went: %s", m)
		}
	}
	return 0, refused, c.CloseNow() // gone, as a client whose machine sleeps: no closing handshake
}

// runDetached runs the detached scene against each target in turn.
func runDetached(targets []*target, n, perClient int, settle time.Duration, asJSON bool) error {
	var all []detachedResult
	for _, t := range targets {
		r, err := t.detached(n, perClient, settle)
		if err != nil {
			return fmt.Errorf("%s: %w", t.name, err)
		}
		fmt.Println(r)
		all = append(all, r)
		t.stop() // its countdowns go with it, before the next target's start
	}
	if asJSON {
		b, _ := json.MarshalIndent(all, "", "  ")
		fmt.Println(string(b))
	}
	return nil
}
