package ws_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/mcp-resume/mcp-resume/mcp/e2etest"
	"github.com/mcp-resume/mcp-resume/resume"
	"github.com/mcp-resume/mcp-resume/spec"
	"github.com/mcp-resume/mcp-resume/transport"
	"github.com/mcp-resume/mcp-resume/transport/ws"
)

func authServer(t *testing.T) *server {
	t.Helper()
	ks, err := transport.ParseKeys("alice:key-alice,bob:key-bob")
	if err != nil {
		t.Fatal(err)
	}
	return newServer(t, nil, &ws.AcceptOptions{Keys: ks})
}

func withKey(key string) http.Header { return http.Header{"Authorization": {"Bearer " + key}} }

// A handshake without a known key gets 401 over HTTP, with WWW-Authenticate:
// Bearer and reason unauthorized; nothing is upgraded.
func TestAuthHandshake(t *testing.T) {
	s := authServer(t)
	httpURL := "http" + strings.TrimPrefix(s.url, "ws")
	for _, auth := range []string{"", "Bearer nope", "Basic key-alice", "Bearer key-alic"} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, httpURL, nil)
		req.Header = http.Header{"Connection": {"Upgrade"}, "Upgrade": {"websocket"}, "Sec-Websocket-Version": {"13"},
			"Sec-Websocket-Key": {"dGhlIHNhbXBsZSBub25jZQ=="}, "Sec-Websocket-Protocol": {"mcp"}}
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := s.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") ||
			!strings.Contains(string(b), `"reason":"`+string(spec.ReasonUnauthorized)+`"`) {
			t.Errorf("Authorization %q: %s, WWW-Authenticate %q, %s; want 401 unauthorized", auth, resp.Status, resp.Header.Get("WWW-Authenticate"), b)
		}
	}
	if _, err := ws.Dial(t.Context(), s.url, nil); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("Dial without a key: %v; want a 401 error", err)
	}
	if s.h.Conns() != 0 {
		t.Errorf("%d connections served after refused handshakes", s.h.Conns())
	}
	c, err := ws.Dial(t.Context(), s.url, &ws.DialOptions{Header: withKey("key-alice")})
	if err != nil {
		t.Fatalf("Dial with alice's key: %v", err)
	}
	_ = c.Close()
}

// A token of alice's presented by bob, on his own connection, gets exactly the
// bytes an unknown token gets for getStatus and resume; his cancel with it does
// nothing.
func TestAuthPrincipalIsolationWS(t *testing.T) {
	s := authServer(t)
	open := func(key string) *websocket.Conn {
		c := rawDial(t, s.url, &websocket.DialOptions{Subprotocols: []string{"mcp"}, HTTPHeader: withKey(key)})
		rawSend(t, c, websocket.MessageText, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"resumableRequests":{}},"clientInfo":{"name":"t","version":"1"}}}`)
		if m := rawNext(t, c); m.Error != nil {
			t.Fatalf("initialize: %s", m.Raw)
		}
		rawSend(t, c, websocket.MessageText, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		return c
	}
	alice, bob := open("key-alice"), open("key-bob")
	rawSend(t, alice, websocket.MessageText, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"countdown","arguments":{"seconds":5,"steps":50},"_meta":{"progressToken":7}}}`)
	var token string
	for token == "" {
		m := rawNext(t, alice)
		if m.Method == spec.MethodResumePolicy {
			var p spec.ResumePolicyParams
			if err := json.Unmarshal(m.Params, &p); err != nil {
				t.Fatal(err)
			}
			token = p.ResumeToken
		}
	}
	ask := func(c *websocket.Conn, msg string) string {
		rawSend(t, c, websocket.MessageText, msg)
		return string(rawNext(t, c).Raw)
	}
	getStatus := `{"jsonrpc":"2.0","id":9,"method":"requests/getStatus","params":{"requestId":7,"resumeToken":%q}}`
	resumeMsg := `{"jsonrpc":"2.0","id":7,"method":"requests/resume","params":{"resumeToken":%q}}`
	const unknown = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	for _, f := range []string{getStatus, resumeMsg} {
		stolen, none := ask(bob, fmt.Sprintf(f, token)), ask(bob, fmt.Sprintf(f, unknown))
		if stolen != none || !strings.Contains(none, string(spec.ReasonNotFound)) {
			t.Errorf("alice's token from bob: %s; unknown token: %s; want the same not_found answer", stolen, none)
		}
	}
	rawSend(t, bob, websocket.MessageText, fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"resumeToken":%q}}`, token))
	// Bob's next answer comes after his cancel was handled (one reader per
	// connection, in order); alice's request still runs.
	if got := ask(bob, `{"jsonrpc":"2.0","id":10,"method":"ping"}`); !strings.Contains(got, `"result"`) {
		t.Fatalf("ping: %s", got)
	}
	r, err := s.core.Engine().LookupAs(token, []byte(`7`), "alice")
	if err != nil {
		t.Fatalf("alice's request after bob's cancel: %v", err)
	}
	if st := r.Status().State; st != resume.StateProcessing {
		t.Errorf("alice's request after bob's cancel: %v; want processing", st)
	}
}

// The shared end-to-end suite, with authentication on.
func TestEndToEndWSAuth(t *testing.T) {
	s := authServer(t)
	e2etest.Run(t, e2etest.Harness{
		Dial: func(t testing.TB) transport.Conn {
			t.Helper()
			c, err := ws.Dial(t.Context(), s.url, &ws.DialOptions{Header: withKey("key-bob")})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Close() })
			return c
		},
		Reconnect: true,
	})
}
