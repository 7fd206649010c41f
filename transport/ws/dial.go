package ws

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/mcp-resume/mcp-resume/transport"
)

// DialOptions configure Dial. Nil means defaults; a zero PingInterval is
// ClientPing, a zero PingTimeout half of it.
type DialOptions struct {
	Options
	// Header is sent with the handshake (Origin, Authorization, ...).
	Header http.Header
	// TLS configures wss:// connections. Default: the system's roots.
	TLS *tls.Config
	// NetDial opens the TCP connection. Default: a net.Dialer.
	NetDial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Wrap, when set, wraps the round tripper of the handshake (an OAuth
	// client's, which adds the token and renews it on a 401).
	Wrap func(http.RoundTripper) http.RoundTripper
}

// Dial opens a WebSocket connection to url (ws:// or wss://) with subprotocol
// "mcp". A refused handshake gives an error with the HTTP status and the start of
// the server's answer (a JSON-RPC error from a Handler). The handshake follows a
// redirect only within url's origin: Header and what Wrap adds go nowhere else
// (a redirect to another origin is a *transport.RedirectError).
func Dial(ctx context.Context, url string, opts *DialOptions) (*Conn, error) {
	var o DialOptions
	if opts != nil {
		o = *opts
	}
	netDial := o.NetDial
	if netDial == nil {
		netDial = (&net.Dialer{}).DialContext
	}
	var (
		mu  sync.Mutex // guards raw
		raw *rawConn
	)
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := netDial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			mu.Lock()
			defer mu.Unlock()
			raw = newRawConn(c)
			return raw, nil
		},
		TLSClientConfig:   o.TLS,
		ForceAttemptHTTP2: false,
	}
	defer tr.CloseIdleConnections()
	var rt http.RoundTripper = tr
	if o.Wrap != nil {
		rt = o.Wrap(tr)
	}
	c, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{
		HTTPClient:      &http.Client{Transport: rt, CheckRedirect: transport.CheckRedirect},
		HTTPHeader:      o.Header,
		Subprotocols:    []string{Subprotocol},
		CompressionMode: websocket.CompressionDisabled,
	})
	if err != nil {
		if resp != nil && resp.Body != nil {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
			return nil, fmt.Errorf("ws: dial: %w", &transport.RefusedError{Method: "WebSocket handshake", URL: url, Code: resp.StatusCode, Status: resp.Status, Body: bytes.TrimSpace(b)})
		}
		var redirect *transport.RedirectError
		if errors.As(err, &redirect) {
			return nil, fmt.Errorf("ws: dial: %w", redirect)
		}
		return nil, fmt.Errorf("ws: dial %s: %w", url, err)
	}
	if c.Subprotocol() != Subprotocol {
		_ = c.CloseNow()
		return nil, fmt.Errorf("ws: dial %s: the server did not agree to subprotocol %q", url, Subprotocol)
	}
	if o.PingInterval == 0 {
		o.PingInterval = ClientPing
	}
	if o.PingTimeout == 0 {
		o.PingTimeout = max(o.PingInterval/2, time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	return newConn(c, raw, o.Options.withDefaults(), 0), nil
}

// ClientPing is a dialled connection's PingInterval by default: a ping after
// 8 s without a byte from the server, its pong due within 4 s, so that a
// silent connection (a laptop's sleep, a NAT that forgot the flow) is taken
// for dead within 12 s and its calls resumed within 15 s of the silence. A
// connection that carries messages pings not at all, and the server's own
// pings (every 20 s of quiet) give way to the client's.
const ClientPing = 8 * time.Second
