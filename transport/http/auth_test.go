package http_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/mcp-resume/mcp-resume/mcp/e2etest"
	"github.com/mcp-resume/mcp-resume/spec"
	"github.com/mcp-resume/mcp-resume/transport"
	httptransport "github.com/mcp-resume/mcp-resume/transport/http"
)

const testKeys = "alice:key-alice\nbob:key-bob"

func keys(t testing.TB) *transport.KeySet {
	t.Helper()
	ks, err := transport.ParseKeys(testKeys)
	if err != nil {
		t.Fatal(err)
	}
	return ks
}

// Without a known key every method gets 401, with WWW-Authenticate: Bearer and a
// JSON-RPC error whose reason is unauthorized; the key is checked before the
// session, so a valid session id does not help.
func TestAuthRequired(t *testing.T) {
	s := newServer(t, nil, &httptransport.Options{Keys: keys(t)})
	alice := s.raw(t)
	alice.client = &http.Client{Transport: transport.BearerTransport("key-alice", s.srv.Client().Transport)}
	alice.initialize(`{}`)
	for _, auth := range []string{"", "Bearer wrong", "Bearer key-alice2", "Basic key-alice", "key-alice"} {
		for _, method := range []string{http.MethodPost, http.MethodGet, http.MethodDelete} {
			c := s.raw(t)
			c.session = alice.session
			body := ""
			if method == http.MethodPost {
				body = `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
			}
			resp := c.do(context.Background(), method, body, "Authorization: "+auth)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") ||
				!strings.Contains(string(b), `"reason":"`+string(spec.ReasonUnauthorized)+`"`) || !strings.Contains(string(b), `"code":-32600`) {
				t.Errorf("%s with Authorization %q: %s, WWW-Authenticate %q, %s; want 401 unauthorized", method, auth, resp.Status,
					resp.Header.Get("WWW-Authenticate"), b)
			}
		}
	}
	// The client reports a 401 as the Write's error (the error body has no id to
	// route by).
	c := httptransport.Dial(s.url, &httptransport.ClientOptions{Client: s.srv.Client()})
	defer c.Close()
	if err := c.Write(context.Background(), []byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}`)); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("ClientConn.Write without a key: %v; want a 401 error", err)
	}
	// Alice's session still works for her.
	if resp, body := alice.post(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); resp.StatusCode != http.StatusOK || !strings.Contains(body, "countdown") {
		t.Errorf("alice's tools/list: %s %s", resp.Status, body)
	}
}

// A token of alice's presented by bob gets exactly the answer an unknown request
// gets (same bytes) for getStatus and resume, and bob's cancel with it does
// nothing; bob cannot use alice's session either. Alice's own getStatus works.
func TestAuthPrincipalIsolation(t *testing.T) {
	s := newServer(t, nil, &httptransport.Options{Keys: keys(t)})
	tr := s.srv.Client().Transport
	alice, bob := s.raw(t), s.raw(t)
	alice.client = &http.Client{Transport: transport.BearerTransport("key-alice", tr)}
	bob.client = &http.Client{Transport: transport.BearerTransport("key-bob", tr)}
	caps := `{"resumableRequests":{}}`
	alice.initialize(caps)
	bob.initialize(caps)

	call := alice.do(context.Background(), http.MethodPost, countdown("7", 5, 50))
	defer call.Body.Close()
	ch := events(call.Body)
	next(t, ch) // priming
	token, _ := next(t, ch).msg()["params"].(map[string]any)["resumeToken"].(string)
	if token == "" {
		t.Fatal("no resume token")
	}
	unknown := "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"

	getStatus := func(tok string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":9,"method":"requests/getStatus","params":{"requestId":7,"resumeToken":%q}}`, tok)
	}
	resumeMsg := func(tok string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":7,"method":"requests/resume","params":{"resumeToken":%q}}`, tok)
	}
	for name, msg := range map[string]func(string) string{"getStatus": getStatus, "resume": resumeMsg} {
		r1, stolen := bob.post(msg(token))
		r2, none := bob.post(msg(unknown))
		if stolen != none || r1.StatusCode != r2.StatusCode || !strings.Contains(none, string(spec.ReasonNotFound)) {
			t.Errorf("%s: alice's token from bob: %s %q; unknown token: %s %q; want the same not_found answer", name, r1.Status, stolen, r2.Status, none)
		}
	}
	cancel := fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"resumeToken":%q}}`, token)
	if resp, body := bob.post(cancel); resp.StatusCode != http.StatusAccepted {
		t.Errorf("bob's cancel: %s %s", resp.Status, body)
	}
	// Bob presenting alice's session id: an unknown session.
	if resp, body := bob.post(getStatus(token), httptransport.HeaderSessionID+": "+alice.session); resp.StatusCode != http.StatusNotFound ||
		!strings.Contains(body, string(spec.ReasonUnknownSession)) {
		t.Errorf("bob on alice's session: %s %s; want 404 unknown_session", resp.Status, body)
	}
	// Alice: her request still runs (bob's cancel did nothing).
	resp, body := alice.post(getStatus(token))
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"status":"processing"`) {
		t.Errorf("alice's getStatus: %s %s; want processing", resp.Status, body)
	}
}

// The shared end-to-end suite, with authentication on and every client presenting
// its key.
func TestEndToEndHTTPAuth(t *testing.T) {
	s := newServer(t, nil, &httptransport.Options{Keys: keys(t)})
	client := &http.Client{Transport: transport.BearerTransport("key-bob", s.srv.Client().Transport)}
	e2etest.Run(t, e2etest.Harness{
		Dial: func(t testing.TB) transport.Conn {
			c := httptransport.Dial(s.url, &httptransport.ClientOptions{Client: client})
			t.Cleanup(func() { _ = c.Close() })
			return c
		},
		Reconnect: true,
	})
}
