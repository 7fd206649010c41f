package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/mcp-resume/mcp-resume/mcp/e2etest"
	"github.com/mcp-resume/mcp-resume/spec"
	"github.com/mcp-resume/mcp-resume/testkit/poll"
	"github.com/mcp-resume/mcp-resume/transport/ws"
)

// dialerFrom dials from loopback address ip (Linux routes all of 127/8 to lo).
func dialerFrom(ip string) *net.Dialer {
	return &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
}

// serve with --max-conns-per-address and --ws-init-timeout: one address holds
// three WebSocket connections that never initialize; its fourth handshake is
// answered 503 too_many_connections; a client on another address initializes
// and calls meanwhile; the idle three are closed with 1008 at the deadline,
// which makes room; /metrics counts the refusal and the closes.
func TestServeConnLimits(t *testing.T) {
	const initTimeout = time.Second
	l := spawnNet(t, "serve --http 127.0.0.1:0 --max-conns-per-address 3 --ws-init-timeout "+initTimeout.String(), 1)[0]
	wsURL := l.WS
	dial := func(ctx context.Context, from string) (*websocket.Conn, *http.Response, error) {
		tr := &http.Transport{DialContext: dialerFrom(from).DialContext}
		defer tr.CloseIdleConnections()
		return websocket.Dial(ctx, wsURL, &websocket.DialOptions{HTTPClient: &http.Client{Transport: tr}, Subprotocols: []string{ws.Subprotocol}})
	}
	start := time.Now()
	var idle []*websocket.Conn
	for range 3 {
		c, _, err := dial(t.Context(), "127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		defer c.CloseNow()
		idle = append(idle, c)
	}
	_, resp, err := dial(t.Context(), "127.0.0.1")
	if err == nil || resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a fourth handshake from the address: %v %v, want 503", resp, err)
	}
	if b, _ := io.ReadAll(resp.Body); !strings.Contains(string(b), string(spec.ReasonTooManyConnections)) {
		t.Fatalf("the refusal's body %s, want %s", b, spec.ReasonTooManyConnections)
	}

	// Another address is served: initialize and a call.
	conn, err := ws.Dial(t.Context(), wsURL, &ws.DialOptions{NetDial: dialerFrom("127.0.0.2").DialContext})
	if err != nil {
		t.Fatalf("a client on another address: %v", err)
	}
	c := e2etest.NewClient(t, conn)
	c.Initialize(`{}`)
	c.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`)
	if resp, _ := c.Response("1"); e2etest.Text(resp) != "hi" {
		t.Fatalf("a call from another address: %s", resp.Raw)
	}

	// The idle three are closed with 1008 at the deadline, not before.
	for _, ic := range idle {
		_, _, err := ic.Read(t.Context())
		if code := websocket.CloseStatus(err); code != websocket.StatusPolicyViolation {
			t.Fatalf("an idle connection ended with %v (code %d), want 1008", err, code)
		}
	}
	if took := time.Since(start); took < initTimeout {
		t.Fatalf("idle connections closed after %v, before the %v deadline", took, initTimeout)
	}
	// ... and the initialized one is not.
	c.Send(`{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	if resp, _ := c.Response("2"); resp.Error != nil {
		t.Fatalf("ping on the initialized connection: %s", resp.Raw)
	}
	c.Close()

	// The address has room again, once the server has closed its ends of the
	// idle three (a moment after ours saw the close frame).
	poll.Until(t, 10*time.Second, "room for a connection from the address", func() bool {
		c, _, err := dial(t.Context(), "127.0.0.1")
		if err != nil {
			return false
		}
		c.CloseNow()
		return true
	})

	m := scrapeFrom(t, "127.0.0.2", strings.TrimSuffix(l.URL, "/mcp")+"/metrics")
	for _, want := range []string{`mcp_resume_connections_refused_total{bound="address"} 1`, `mcp_resume_ws_init_timeouts_total 3`} {
		if !strings.Contains(m, "\n"+want+"\n") {
			t.Errorf("/metrics has no %s:\n%s", want, m)
		}
	}
}

// scrapeUntil scrapes url from loopback address ip until it has want, and
// returns it; the test fails if it does not within 10 s. For what is observed a
// moment after the client saw it happen: a server's operation is observed once
// its response is delivered, which may follow the client's read of it.
func scrapeUntil(t *testing.T, ip, url, want string) string {
	t.Helper()
	var m string
	poll.Until(t, 10*time.Second, "/metrics with "+want, func() bool {
		m = scrapeFrom(t, ip, url)
		return strings.Contains(m, want)
	})
	return m
}

// scrapeFrom gets url from loopback address ip, without keep-alive.
func scrapeFrom(t *testing.T, ip, url string) string {
	t.Helper()
	tr := &http.Transport{DialContext: dialerFrom(ip).DialContext, DisableKeepAlives: true}
	resp, err := (&http.Client{Transport: tr}).Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	return string(b)
}
