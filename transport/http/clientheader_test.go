package http_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	httptransport "github.com/mcp-resume/mcp-resume/transport/http"
)

// idleCounter is a round tripper that counts CloseIdleConnections.
type idleCounter struct {
	http.RoundTripper
	closes atomic.Int32
}

func (c *idleCounter) CloseIdleConnections() { c.closes.Add(1) }

// A ClientConn with ClientOptions.Header sends it with every request, and its
// silence detection still reaches the caller's transport's idle connections.
func TestClientHeader(t *testing.T) {
	got := make(chan http.Header, 1)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		got <- r.Header.Clone()
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(hs.Close)
	base := &idleCounter{RoundTripper: http.DefaultTransport}
	c := httptransport.Dial(hs.URL, &httptransport.ClientOptions{
		Client: &http.Client{Transport: base},
		Header: http.Header{"X-Api-Key": {"k"}, "Authorization": {"Bearer header"}},
	})
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Write(t.Context(), []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)); err != nil {
		t.Fatal(err)
	}
	h := <-got
	if h.Get("X-Api-Key") != "k" || h.Get("Authorization") != "Bearer header" {
		t.Fatalf("headers %v", h)
	}
	httptransport.CloseIdle(c)
	if n := base.closes.Load(); n != 1 {
		t.Fatalf("CloseIdleConnections reached the base %d times, want once", n)
	}
}
