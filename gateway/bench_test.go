package gateway_test

import (
	"context"
	"math/rand/v2"
	"net/http/httptest"
	"os/exec"
	"testing"
	"time"

	"github.com/mcp-resume/mcp-resume/gateway"
	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/mcp/client"
	"github.com/mcp-resume/mcp-resume/servers/demo"
	"github.com/mcp-resume/mcp-resume/testkit/everything"
	"github.com/mcp-resume/mcp-resume/transport"
	httptransport "github.com/mcp-resume/mcp-resume/transport/http"
	"github.com/mcp-resume/mcp-resume/transport/stdio"
	"github.com/mcp-resume/mcp-resume/transport/ws"
)

// BenchmarkEcho: server-everything's echo tool called by one Go client
// (mcp/client), one call at a time: directly over the server's stdio
// ("direct") and its own Streamable HTTP transport ("direct-http"), and through
// the gateway (the server its stdio child) over Streamable HTTP and WebSocket on
// loopback.
//
//	go test -run XXX -bench BenchmarkEcho -benchtime 2000x ./gateway/
func BenchmarkEcho(b *testing.B) {
	path := everything.Path(b)
	b.Run("direct", func(b *testing.B) {
		benchEcho(b, func(context.Context) (transport.Conn, error) {
			return stdio.Command(exec.Command("node", path, "stdio"), nil)
		})
	})
	url := everything.StartHTTP(b)
	b.Run("direct-http", func(b *testing.B) {
		benchEcho(b, func(context.Context) (transport.Conn, error) {
			return httptransport.Dial(url, nil), nil
		})
	})
	r := newRig(b, stdioUpstream(b, ""))
	b.Run("gateway-http", func(b *testing.B) {
		benchEcho(b, func(context.Context) (transport.Conn, error) {
			return httptransport.Dial(r.srv.URL+"/mcp", nil), nil
		})
	})
	b.Run("gateway-ws", func(b *testing.B) {
		benchEcho(b, func(ctx context.Context) (transport.Conn, error) {
			return ws.Dial(ctx, "ws"+r.srv.URL[len("http"):]+"/ws", nil)
		})
	})
}

func benchEcho(b *testing.B, dial client.Dialer) {
	ctx := context.Background()
	c, err := client.Connect(ctx, dial, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	args := map[string]any{"message": "hello"}
	for range 20 { // warm up: the JIT on the server's side
		if _, err := c.CallTool(ctx, "echo", args, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		res, err := c.CallTool(ctx, "echo", args, nil)
		if err != nil || res.IsError {
			b.Fatalf("echo: %v %+v", err, res)
		}
	}
}

// BenchmarkAggregatePaired: the demo's echo (an upstream of ours over
// Streamable HTTP on loopback, in process) called by one Go client through a
// gateway of that one upstream and through the aggregate of a gateway of two
// (that upstream and a second one), each over Streamable HTTP, one call at a
// time, the two in random order in each iteration: their ns per call and the
// ratio aggregate/single.
//
//	go test -run XXX -bench AggregatePaired -benchtime 5000x ./gateway/
func BenchmarkAggregatePaired(b *testing.B) {
	up, other := benchUpstream(b), benchUpstream(b)
	single := newRig(b, gateway.Options{URL: up})
	agg, err := gateway.Start([]gateway.Upstream{{Name: "a", Options: gateway.Options{URL: up}}, {Name: "b", Options: gateway.Options{URL: other}}}, &gateway.AggregateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	core, err := mcp.New(agg.Server(), &mcp.Options{DefaultPolicy: mcp.Policy{Mode: mcp.Always, Task: mcp.AsTask},
		PolicyOf: agg.PolicyOf(nil), LimitName: agg.LimitName})
	if err != nil {
		b.Fatal(err)
	}
	h := httptransport.NewHandler(core, nil)
	hs := httptest.NewServer(h)
	defer func() {
		h.Close()
		hs.Close()
		core.Close()
		_ = agg.Close()
	}()
	ctx := context.Background()
	dial := func(url string) *client.Client {
		c, err := client.Connect(ctx, func(context.Context) (transport.Conn, error) { return httptransport.Dial(url, nil), nil }, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = c.Close() })
		return c
	}
	targets := []struct {
		name, tool string
		c          *client.Client
	}{{"single", "echo", dial(single.srv.URL + "/mcp")}, {"aggregate", "a__echo", dial(hs.URL)}}
	args := map[string]any{"text": "hello"}
	for _, tg := range targets {
		for range 50 { // warm up; the aggregate lists its upstreams' tools meanwhile
			if _, err := tg.c.CallTool(ctx, tg.tool, args, nil); err != nil && tg.name == "single" {
				b.Fatal(err)
			}
		}
		if _, err := tg.c.CallTool(ctx, tg.tool, args, nil); err != nil {
			b.Fatalf("%s: %v", tg.name, err)
		}
	}
	spent := make([]time.Duration, len(targets))
	rng := rand.New(rand.NewPCG(1, 2))
	n := 0
	for b.Loop() {
		n++
		for _, i := range rng.Perm(len(targets)) {
			t := time.Now()
			res, err := targets[i].c.CallTool(ctx, targets[i].tool, args, nil)
			spent[i] += time.Since(t)
			if err != nil || res.IsError {
				b.Fatalf("%s: %v %+v", targets[i].name, err, res)
			}
		}
	}
	for i, tg := range targets {
		b.ReportMetric(float64(spent[i].Nanoseconds())/float64(n), tg.name+"-ns/call")
	}
	b.ReportMetric(float64(spent[1])/float64(spent[0]), "aggregate/single")
}

// benchUpstream serves the demo tools over Streamable HTTP on loopback and
// returns its endpoint's URL.
func benchUpstream(b *testing.B) string {
	core, err := mcp.New(demo.Server("up"), nil)
	if err != nil {
		b.Fatal(err)
	}
	h := httptransport.NewHandler(core, nil)
	hs := httptest.NewServer(h)
	b.Cleanup(func() {
		h.Close()
		hs.Close()
		core.Close()
	})
	return hs.URL
}
