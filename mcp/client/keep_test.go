package client_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/mcp-resume/mcp-resume/mcp/client"
	"github.com/mcp-resume/mcp-resume/testkit/faultproxy"
	"github.com/mcp-resume/mcp-resume/transport"
	httptransport "github.com/mcp-resume/mcp-resume/transport/http"
)

// A client whose ClientConns share a KeptSession holds one session on the server
// however often its connections are cut and it reconnects; when the server has
// forgotten that session, the next request opens a new one and goes on.
func TestHTTPKeepsSession(t *testing.T) {
	s := newNetServer(t, nil)
	p := faultproxy.New(t, s.addr(), 600, 1500)
	tr := &http.Transport{MaxIdleConnsPerHost: 16}
	t.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: tr}
	keep := &httptransport.KeptSession{}
	url := "http://" + p.Addr() + "/mcp"
	dial := func(context.Context) (transport.Conn, error) {
		return httptransport.Dial(url, &httptransport.ClientOptions{Client: hc, FailOnStreamLoss: true, Keep: keep}), nil
	}
	c := connect(t, dial, nil)
	call := func() {
		t.Helper()
		for attempt := 0; ; attempt++ {
			res, err := c.CallTool(t.Context(), "countdown", map[string]any{"seconds": 0.5, "steps": 10}, nil)
			if errors.Is(err, client.ErrNotResumable) && attempt < 20 {
				continue // cut before its resume policy came (the abuse issue's edge): call again
			}
			if err != nil || len(res.Content) == 0 {
				t.Fatalf("countdown: %v %+v", err, res)
			}
			return
		}
	}
	for range 3 {
		call()
	}
	if c.Reconnects() < 2 {
		t.Fatalf("%d reconnects: the proxy did not cut enough to test anything", c.Reconnects())
	}
	if n := s.h.Sessions(); n != 1 {
		t.Fatalf("%d sessions after %d reconnects, want 1", n, c.Reconnects())
	}

	// The server forgets the session (here: DELETE); the next calls open a new one.
	old := keep.ID()
	req, _ := http.NewRequest(http.MethodDelete, s.srv.URL+"/mcp", nil)
	req.Header.Set(httptransport.HeaderSessionID, old)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for range 2 {
		call()
	}
	if keep.ID() == old || keep.ID() == "" {
		t.Fatalf("kept session %q after the old one %q was deleted", keep.ID(), old)
	}
	// A new session whose opening the proxy cut before its id came back is left
	// to expire (it holds no goroutine); one whose id came back is deleted.
	t.Logf("sessions after renewal: %d", s.h.Sessions())
	if n := s.h.Sessions(); n > 2 {
		t.Fatalf("%d sessions after the session was renewed, want 1 (2 when an opening was cut)", n)
	}
}
