package oauth_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/coder/websocket"

	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/oauth"
	"github.com/mcp-resume/mcp-resume/servers/demo"
	"github.com/mcp-resume/mcp-resume/transport"
	httptransport "github.com/mcp-resume/mcp-resume/transport/http"
	"github.com/mcp-resume/mcp-resume/transport/ws"
)

// recheck is Options.Recheck's default, which these tests rely on.
const recheck = 5 * time.Minute

// revocable is an authorization server whose one token, "good-user",
// answers active, with no exp, until it is revoked.
type revocable struct {
	introspectionAS
	revoked atomic.Bool
	down    atomic.Bool // it answers 503
}

func (a *revocable) answer(token string) map[string]any {
	if token != "good-user" || a.revoked.Load() {
		return nil
	}
	return map[string]any{"active": true, "sub": "user", "aud": resource}
}

// newRevocable starts a revocable authorization server on pipes, and a
// resource server that introspects at it.
func newRevocable(t *testing.T) (*revocable, *oauth.ResourceServer) {
	as := &revocable{introspectionAS: introspectionAS{URL: "http://as.pipe/introspect"}}
	answer := as.handler(as.answer)
	asNet := servePipes(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if as.down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		answer.ServeHTTP(w, r)
	}))
	rs, err := oauth.New(&oauth.Options{Resource: resource, Issuers: []string{"https://as.example.test"},
		Introspection: as.URL, Client: asNet.Client(t)})
	if err != nil {
		t.Fatal(err)
	}
	return as, rs
}

// protectedPipes serves the demo tools behind rs (Streamable HTTP at /mcp,
// through bound when given, WebSocket at /ws) over in-memory pipes.
func protectedPipes(t *testing.T, rs *oauth.ResourceServer, bound func(http.Handler) http.Handler) *pipeNet {
	core, err := mcp.New(demo.Server("test"), nil)
	if err != nil {
		t.Fatal(err)
	}
	hh := httptransport.NewHandler(core, &httptransport.Options{Auth: rs})
	var h http.Handler = hh
	if bound != nil {
		h = bound(h)
	}
	wh := ws.NewHandler(core, &ws.AcceptOptions{Auth: rs})
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	mux.Handle("/ws", wh)
	n := servePipes(t, mux)
	t.Cleanup(func() {
		hh.Close()
		wh.Close()
		core.Close()
	})
	return n
}

// dialGood opens a WebSocket to n's /ws with the token "good-user"; a refused
// handshake's error carries its status and body.
func dialGood(t *testing.T, n *pipeNet) (*websocket.Conn, error) {
	c, resp, err := websocket.Dial(t.Context(), "ws://127.0.0.1/ws", &websocket.DialOptions{
		HTTPClient: n.Client(t), Subprotocols: []string{ws.Subprotocol},
		HTTPHeader: http.Header{"Authorization": {"Bearer good-user"}},
	})
	if err != nil && resp != nil {
		b, _ := io.ReadAll(resp.Body)
		err = errors.New(resp.Status + " " + string(b))
	}
	return c, err
}

// openSession initializes a 2025 session on c's WebSocket and returns a
// channel that gets the error that ends it.
func openSession(t *testing.T, c *websocket.Conn) <-chan error {
	closed := make(chan error, 1)
	go func() {
		for {
			if _, _, err := c.Read(context.Background()); err != nil {
				closed <- err
				return
			}
		}
	}()
	_ = c.Write(t.Context(), websocket.MessageText, []byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
	_ = c.Write(t.Context(), websocket.MessageText, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	return closed
}

// httpSession is a 2025 session over Streamable HTTP on n, with the token
// "good-user".
type httpSession struct {
	t       *testing.T
	client  *http.Client
	session string
}

// newHTTPSession opens a session on n: initialize, initialized.
func newHTTPSession(t *testing.T, n *pipeNet) *httpSession {
	h := &httpSession{t: t, client: n.Client(t)}
	resp := h.send(http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	h.session = resp.Header.Get(httptransport.HeaderSessionID)
	if resp.StatusCode != http.StatusOK || h.session == "" {
		t.Fatalf("initialize: %s", resp.Status)
	}
	h.send(http.MethodPost, `{"jsonrpc":"2.0","method":"notifications/initialized"}`).Body.Close()
	return h
}

// send sends method (POST with body, or GET) in the session.
func (h *httpSession) send(method, body string) *http.Response {
	req, _ := http.NewRequest(method, "http://127.0.0.1/mcp", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer good-user")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if h.session != "" {
		req.Header.Set(httptransport.HeaderSessionID, h.session)
		req.Header.Set(httptransport.HeaderProtocolVersion, "2025-11-25")
	}
	resp, err := h.client.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	return resp
}

// stream opens the session's GET stream and returns it with a channel that
// gets the error that ends it.
func (h *httpSession) stream() (*http.Response, <-chan error) {
	stream := h.send(http.MethodGet, "")
	if stream.StatusCode != http.StatusOK {
		h.t.Fatalf("GET stream: %s", stream.Status)
	}
	ended := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, stream.Body)
		ended <- err
	}()
	return stream, ended
}

// A WebSocket opened with an introspected token that names no expiry is
// closed Options.Recheck after the token's introspection, not before, with
// 1008 and a reason: its token is checked again at the client's next
// handshake, which is refused once the token is revoked (and accepted while
// it is not).
func TestRecheckClosesWebSocket(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		as, rs := newRevocable(t)
		n := protectedPipes(t, rs, nil)
		start := time.Now()
		c, err := dialGood(t, n)
		if err != nil {
			t.Fatal(err)
		}
		closed := openSession(t, c)

		time.Sleep(recheck - time.Second)
		synctest.Wait()
		select {
		case err := <-closed:
			t.Fatalf("the WebSocket closed %v after its token's introspection, before the recheck: %v", time.Since(start), err)
		default:
		}
		as.revoked.Store(true)
		select {
		case err := <-closed:
			var ce websocket.CloseError
			if !errors.As(err, &ce) || ce.Code != websocket.StatusPolicyViolation || ce.Reason == "" {
				t.Errorf("the WebSocket ended with %v, want 1008 with a reason", err)
			}
			if took := time.Since(start); took > recheck+time.Second {
				t.Errorf("the WebSocket closed %v after its token's introspection, want %v", took, recheck)
			}
		case <-time.After(time.Hour):
			t.Fatal("the WebSocket of a token that names no expiry is open an hour later")
		}
		_ = c.CloseNow()

		if _, err := dialGood(t, n); err == nil || !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), string(oauth.ReasonInactive)) {
			t.Fatalf("a handshake with the revoked token: %v, want 401 inactive_token", err)
		}
		as.revoked.Store(false)
		time.Sleep(time.Minute) // what was kept of the refusal ends
		c, err = dialGood(t, n)
		if err != nil {
			t.Fatalf("a handshake with the token active again: %v", err)
		}
		_ = c.CloseNow()
	})
}

// Served through Bound, a 2025 session's GET event stream open on an
// introspected token ends Options.Recheck after the introspection; the
// client's GET again is checked, and refused once the token is revoked.
func TestRecheckEndsEventStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		as, rs := newRevocable(t)
		n := protectedPipes(t, rs, transport.Bound)
		h := newHTTPSession(t, n)
		start := time.Now()
		stream, ended := h.stream()
		time.Sleep(recheck - time.Second)
		synctest.Wait()
		select {
		case err := <-ended:
			t.Fatalf("the stream ended %v after its token's introspection, before the recheck: %v", time.Since(start), err)
		default:
		}
		as.revoked.Store(true)
		select {
		case <-ended:
			if took := time.Since(start); took > recheck+time.Second {
				t.Errorf("the stream ended %v after its token's introspection, want %v", took, recheck)
			}
		case <-time.After(time.Hour):
			t.Fatal("the event stream of a token that names no expiry is open an hour later")
		}
		stream.Body.Close()
		again := h.send(http.MethodGet, "")
		b, _ := io.ReadAll(again.Body)
		again.Body.Close()
		if again.StatusCode != http.StatusUnauthorized || !strings.Contains(string(b), string(oauth.ReasonInactive)) {
			t.Fatalf("GET again with the revoked token: %s %s, want 401 inactive_token", again.Status, b)
		}
	})
}

// A WebSocket and a 2025 session's event stream, both opened with an
// introspected token that stays active, stay open across rechecks: the token
// is introspected again at each (one introspection per connection every
// Options.Recheck); while the authorization server is down they stay open
// too, asked again each minute; revoked, they end at the next recheck.
func TestRecheckKeepsActive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		as, rs := newRevocable(t)
		n := protectedPipes(t, rs, transport.Bound)
		c, err := dialGood(t, n)
		if err != nil {
			t.Fatal(err)
		}
		defer c.CloseNow()
		closed := openSession(t, c)
		h := newHTTPSession(t, n)
		stream, ended := h.stream()
		defer stream.Body.Close()
		open := func(what string) {
			t.Helper()
			synctest.Wait()
			select {
			case err := <-closed:
				t.Fatalf("%s: the WebSocket closed: %v", what, err)
			case err := <-ended:
				t.Fatalf("%s: the event stream ended: %v", what, err)
			default:
			}
		}
		before := as.Introspections.Load()
		for range 3 {
			time.Sleep(recheck)
			// The session's client says something (a session whose only stream
			// is its GET stream ends after SessionIdle without a word).
			h.send(http.MethodPost, `{"jsonrpc":"2.0","method":"notifications/initialized"}`).Body.Close()
		}
		time.Sleep(time.Second)
		open("three rechecks of an active token")
		if asked := as.Introspections.Load() - before; asked < 3 {
			t.Fatalf("the token was introspected %d times in three rechecks, want one per connection each", asked)
		}
		as.down.Store(true)
		time.Sleep(recheck + 3*time.Minute)
		open("the authorization server down")
		as.down.Store(false)
		as.revoked.Store(true)
		time.Sleep(recheck)
		synctest.Wait()
		for _, ch := range []<-chan error{closed, ended} {
			select {
			case <-ch:
			default:
				t.Fatal("revoked, a connection is still open a recheck later")
			}
		}
	})
}
