package oauth_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mcp-resume/mcp-resume/oauth"
	"github.com/mcp-resume/mcp-resume/transport"
)

// pipeNet is HTTP over in-memory pipes: a real http.Server and real clients,
// whose connections are net.Pipes, so that a test runs them inside a
// synctest bubble (virtual time), where loopback sockets cannot go.
type pipeNet struct {
	srv   *http.Server
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
	wg    sync.WaitGroup
}

// servePipes serves h on a pipeNet until the test ends.
func servePipes(t *testing.T, h http.Handler) *pipeNet {
	n := &pipeNet{srv: &http.Server{Handler: h}, conns: make(chan net.Conn), done: make(chan struct{})}
	n.wg.Go(func() { _ = n.srv.Serve(n) })
	t.Cleanup(func() {
		_ = n.srv.Close()
		n.wg.Wait()
	})
	return n
}

// Dial opens a connection to the server (any network and address).
func (n *pipeNet) Dial(ctx context.Context, _, _ string) (net.Conn, error) {
	c, s := net.Pipe()
	select {
	case n.conns <- s:
		return c, nil
	case <-n.done:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Client returns an HTTP client whose connections go to the server.
func (n *pipeNet) Client(t *testing.T) *http.Client {
	tr := &http.Transport{DialContext: n.Dial}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func (n *pipeNet) Accept() (net.Conn, error) {
	select {
	case c := <-n.conns:
		return c, nil
	case <-n.done:
		return nil, net.ErrClosed
	}
}

func (n *pipeNet) Close() error {
	n.once.Do(func() { close(n.done) })
	return nil
}

func (n *pipeNet) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 80} }

// introspectionAS is a hostile or plain authorization server's RFC 7662
// endpoint: answer says what it answers for a token (nil: inactive).
// Introspections counts what it was asked.
type introspectionAS struct {
	URL            string
	Introspections atomic.Int64
}

func newIntrospectionAS(t *testing.T, answer func(token string) map[string]any) *introspectionAS {
	as := &introspectionAS{}
	srv := httptest.NewServer(as.handler(answer))
	t.Cleanup(srv.Close)
	as.URL = srv.URL + "/introspect"
	return as
}

func (as *introspectionAS) handler(answer func(token string) map[string]any) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		as.Introspections.Add(1)
		_ = r.ParseForm()
		v := answer(r.PostForm.Get("token"))
		if v == nil {
			v = map[string]any{"active": false}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	})
}

// authenticate runs rs.Authenticate on a request from remote (host:port)
// with token and, when given, X-Forwarded-For: the Identity, or the refusal
// (its status and body).
func authenticate(rs *oauth.ResourceServer, remote, token, xff string) (transport.Identity, int, string) {
	r := httptest.NewRequest(http.MethodPost, resource, nil)
	r.RemoteAddr = remote
	r.Header.Set("Authorization", "Bearer "+token)
	if xff != "" {
		r.Header.Set("X-Forwarded-For", xff)
	}
	w := httptest.NewRecorder()
	id, ok := rs.Authenticate(w, r)
	if ok {
		return id, http.StatusOK, ""
	}
	return id, w.Code, w.Body.String()
}
