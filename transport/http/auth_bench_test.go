package http_test

import (
	"math/rand/v2"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/oauth"
	"github.com/mcp-resume/mcp-resume/testkit/oauthtest"
	"github.com/mcp-resume/mcp-resume/transport"
	httptransport "github.com/mcp-resume/mcp-resume/transport/http"
)

// BenchmarkHTTPAuth: what checking an OAuth access token costs an echo call
// over loopback Streamable HTTP, against an API key on the same server (serve
// --oauth-issuer with --api-keys): one client presents a JWT of the in-process
// OpenID provider on every request, the other a key. Each iteration makes one
// call of each, in a random order; it reports each one's median round trip
// (<auth>-p50-us) and their ratio (jwt/api-key).
func BenchmarkHTTPAuth(b *testing.B) {
	op := oauthtest.Start(b)
	keys, err := transport.ParseKeys("ops:k-ops-0123456789abcdef")
	if err != nil {
		b.Fatal(err)
	}
	var url string
	start := func() (string, func()) {
		core, err := mcp.New(mcpgoToolServer(), nil)
		if err != nil {
			b.Fatal(err)
		}
		srv := httptest.NewUnstartedServer(nil)
		url = "http://" + srv.Listener.Addr().String() + "/mcp"
		rs, err := oauth.New(&oauth.Options{Resource: url, Issuers: []string{op.Issuer}, Keys: keys})
		if err != nil {
			b.Fatal(err)
		}
		h := httptransport.NewHandler(core, &httptransport.Options{Auth: rs})
		srv.Config.Handler = h
		srv.Start()
		return url, func() {
			h.Close()
			srv.Close()
			core.Close()
		}
	}
	shared := shared(start)
	key := newBenchClient(b, benchTarget{name: "api-key", caps: `{}`, start: shared, authorization: "Bearer k-ops-0123456789abcdef"})
	jwt := newBenchClient(b, benchTarget{name: "jwt", caps: `{}`, start: shared, authorization: "Bearer " + op.Token(b, "alice", url)})
	clients := []*benchClient{key, jwt}
	lat := make([][]time.Duration, len(clients))
	for _, c := range clients {
		c.call(b, 1, `{"name":"echo","arguments":{"text":"hello"}}`, nil, checkEcho)
	}
	id := 1
	rng := rand.New(rand.NewPCG(1, 2))
	b.ReportAllocs()
	for b.Loop() {
		id++
		for _, i := range rng.Perm(len(clients)) {
			t0 := time.Now()
			clients[i].call(b, id, `{"name":"echo","arguments":{"text":"hello"}}`, nil, nil)
			lat[i] = append(lat[i], time.Since(t0))
		}
	}
	p50 := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2].Nanoseconds()) / 1000
	}
	k, j := p50(lat[0]), p50(lat[1])
	b.ReportMetric(k, "api-key-p50-us")
	b.ReportMetric(j, "jwt-p50-us")
	b.ReportMetric(j/k, "jwt/api-key")
}
