package ws_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/mcp-resume/mcp-resume/mcp/e2etest"
	"github.com/mcp-resume/mcp-resume/spec"
	"github.com/mcp-resume/mcp-resume/transport/ws"
)

// rawDial opens a connection with the library directly, to send what ws.Conn never
// sends (binary frames, no subprotocol).
func rawDial(t *testing.T, url string, opts *websocket.DialOptions) *websocket.Conn {
	t.Helper()
	c, _, err := websocket.Dial(t.Context(), url, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.CloseNow() })
	return c
}

func rawSend(t *testing.T, c *websocket.Conn, typ websocket.MessageType, msg string) {
	t.Helper()
	if err := c.Write(t.Context(), typ, []byte(msg)); err != nil {
		t.Fatalf("write: %v", err)
	}
}

// rawNext reads the next text message, decoded enough to check.
func rawNext(t *testing.T, c *websocket.Conn) e2etest.Msg {
	t.Helper()
	typ, b, err := c.Read(t.Context())
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if typ != websocket.MessageText {
		t.Fatalf("server sent a %v message", typ)
	}
	var m e2etest.Msg
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("server sent invalid JSON %q", b)
	}
	m.Raw = b
	return m
}

// Binary messages, messages over the size limit and invalid JSON are each answered
// with a JSON-RPC error (id null) and skipped; the connection and a call in flight
// on it carry on.
func TestBadFrames(t *testing.T) {
	const limit = 4096
	s := newServer(t, nil, &ws.AcceptOptions{Options: ws.Options{MaxMessageBytes: limit}})
	c := rawDial(t, s.url, &websocket.DialOptions{Subprotocols: []string{"mcp"}})
	c.SetReadLimit(-1)
	rawSend(t, c, websocket.MessageText, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"resumableRequests":{}},"clientInfo":{"name":"t","version":"1"}}}`)
	if m := rawNext(t, c); !m.IsResponse("0") || m.Error != nil {
		t.Fatalf("initialize: %s", m.Raw)
	}
	rawSend(t, c, websocket.MessageText, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	rawSend(t, c, websocket.MessageText, `{"jsonrpc":"2.0","id":"long","method":"tools/call","params":{"name":"countdown","arguments":{"seconds":0.3,"steps":3}}}`)
	if m := rawNext(t, c); m.Method != spec.MethodResumePolicy {
		t.Fatalf("want the policy, got %s", m.Raw)
	}

	big := `{"jsonrpc":"2.0","id":9,"method":"ping","params":{"pad":"` + strings.Repeat("x", limit) + `"}}`
	// The call's answer may come while the bad frames are answered (a slow
	// machine): it is kept for the check at the end.
	var long *e2etest.Msg
	for _, tc := range []struct {
		name   string
		typ    websocket.MessageType
		msg    string
		code   int
		reason spec.Reason
	}{
		{"binary", websocket.MessageBinary, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, spec.CodeInvalidRequest, spec.ReasonBinaryFrame},
		{"binary over the limit", websocket.MessageBinary, big, spec.CodeInvalidRequest, spec.ReasonBinaryFrame},
		{"text over the limit", websocket.MessageText, big, spec.CodeInvalidRequest, spec.ReasonMessageTooLarge},
		{"text far over the limit", websocket.MessageText, big + strings.Repeat(" ", 1<<20), spec.CodeInvalidRequest, spec.ReasonMessageTooLarge},
		{"invalid JSON", websocket.MessageText, `{"jsonrpc":"2.0","id":1,`, spec.CodeParseError, spec.ReasonParseError},
		{"not JSON at all", websocket.MessageText, "\xff\xfe", spec.CodeParseError, spec.ReasonParseError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rawSend(t, c, tc.typ, tc.msg)
			rawSend(t, c, websocket.MessageText, `{"jsonrpc":"2.0","id":"probe","method":"ping"}`)
			var errs []e2etest.Msg
			for {
				m := rawNext(t, c)
				if m.IsResponse(`"probe"`) {
					break
				}
				if m.IsResponse(`"long"`) {
					long = &m
					continue
				}
				if m.Error != nil {
					errs = append(errs, m)
				}
			}
			if len(errs) != 1 || string(errs[0].ID) != "null" || errs[0].Error.Code != tc.code || errs[0].Error.Reason != tc.reason {
				t.Fatalf("got %d errors (%v), want one with id null, code %d, reason %s", len(errs), errs, tc.code, tc.reason)
			}
		})
	}
	for long == nil {
		if m := rawNext(t, c); m.IsResponse(`"long"`) {
			long = &m
		}
	}
	if e2etest.Text(*long) != "countdown done: 3 of 3 steps" {
		t.Fatalf("the call in flight: %s", long.Raw)
	}
}

// Handshakes the server refuses, with their HTTP status and JSON-RPC reason.
func TestBadHandshakes(t *testing.T) {
	s := newServer(t, nil, nil)
	allowList := newServer(t, nil, &ws.AcceptOptions{AllowedOrigins: []string{"https://app.example"}})
	httpURL := func(s *server) string { return "http" + strings.TrimPrefix(s.url, "ws") }
	upgrade := http.Header{"Connection": {"Upgrade"}, "Upgrade": {"websocket"}, "Sec-Websocket-Version": {"13"}, "Sec-Websocket-Key": {"dGhlIHNhbXBsZSBub25jZQ=="}}
	with := func(h http.Header, kv ...string) http.Header {
		h = h.Clone()
		for i := 0; i < len(kv); i += 2 {
			h.Set(kv[i], kv[i+1])
		}
		return h
	}
	for _, tc := range []struct {
		name   string
		srv    *server
		header http.Header
		status int
		reason spec.Reason // "" for an accepted handshake
	}{
		{"no subprotocol", s, upgrade, http.StatusBadRequest, spec.ReasonSubprotocolRequired},
		{"wrong subprotocol", s, with(upgrade, "Sec-WebSocket-Protocol", "graphql-ws, chat"), http.StatusBadRequest, spec.ReasonSubprotocolRequired},
		{"forbidden Origin", s, with(upgrade, "Sec-WebSocket-Protocol", "mcp", "Origin", "https://evil.example"), http.StatusForbidden, spec.ReasonForbidden},
		{"Origin that is not http", s, with(upgrade, "Sec-WebSocket-Protocol", "mcp", "Origin", "file://localhost"), http.StatusForbidden, spec.ReasonForbidden},
		{"forbidden Host", s, with(upgrade, "Sec-WebSocket-Protocol", "mcp", "Host", "evil.example"), http.StatusForbidden, spec.ReasonForbidden},
		{"loopback Origin", s, with(upgrade, "Sec-WebSocket-Protocol", "other, mcp", "Origin", "http://localhost:3000"), http.StatusSwitchingProtocols, ""},
		{"no Origin", s, with(upgrade, "Sec-WebSocket-Protocol", "mcp"), http.StatusSwitchingProtocols, ""},
		{"allow-listed Origin", allowList, with(upgrade, "Sec-WebSocket-Protocol", "mcp", "Origin", "https://app.example"), http.StatusSwitchingProtocols, ""},
		{"loopback Origin not on the allow-list", allowList, with(upgrade, "Sec-WebSocket-Protocol", "mcp", "Origin", "http://localhost"), http.StatusForbidden, spec.ReasonForbidden},
		{"plain GET", s, http.Header{}, http.StatusUpgradeRequired, spec.ReasonInvalidRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, httpURL(tc.srv), nil)
			req.Header = tc.header
			if h := tc.header.Get("Host"); h != "" {
				req.Host = h
			}
			resp, err := tc.srv.srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
			if tc.reason == "" {
				if got := resp.Header.Get("Sec-WebSocket-Protocol"); got != "mcp" {
					t.Fatalf("subprotocol %q, want mcp", got)
				}
				return
			}
			b, _ := io.ReadAll(resp.Body)
			m, derr := spec.Decode(b)
			if derr != nil || m.Kind != spec.KindResponse {
				t.Fatalf("body %q is not a JSON-RPC error", b)
			}
			var e spec.Error
			if err := json.Unmarshal(m.Error, &e); err != nil || e.Reason != tc.reason || e.Code != spec.CodeInvalidRequest {
				t.Fatalf("error %s, want reason %s", m.Error, tc.reason)
			}
		})
	}
	// Dial reports a refusal with the status and the server's error.
	_, err := ws.Dial(t.Context(), s.url, &ws.DialOptions{Header: http.Header{"Origin": {"https://evil.example"}}})
	if err == nil || !strings.Contains(err.Error(), "403") || !strings.Contains(err.Error(), "forbidden") {
		t.Fatalf("Dial with a forbidden Origin: %v", err)
	}
}

// Close of the handler (server shutdown) closes every connection with 1001 (going
// away); their resumable requests stay alive, detached; later handshakes get 503.
func TestHandlerCloseGoingAway(t *testing.T) {
	s := newServer(t, nil, nil)
	c := rawDial(t, s.url, &websocket.DialOptions{Subprotocols: []string{"mcp"}})
	rawSend(t, c, websocket.MessageText, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"resumableRequests":{}},"clientInfo":{"name":"t","version":"1"}}}`)
	rawNext(t, c)
	rawSend(t, c, websocket.MessageText, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"countdown","arguments":{"seconds":60,"steps":60}}}`)
	if m := rawNext(t, c); m.Method != spec.MethodResumePolicy {
		t.Fatalf("want the policy, got %s", m.Raw)
	}
	if n := s.h.Conns(); n != 1 {
		t.Fatalf("%d connections served, want 1", n)
	}
	// The client keeps reading, as a live peer does, to see the close frame.
	closed := make(chan error, 1)
	go func() {
		for {
			if _, _, err := c.Read(context.Background()); err != nil {
				closed <- err
				return
			}
		}
	}()
	s.h.Close()
	if err := <-closed; websocket.CloseStatus(err) != websocket.StatusGoingAway {
		t.Fatalf("client read %v, want close status 1001", err)
	}
	if n := s.h.Conns(); n != 0 {
		t.Fatalf("%d connections served after Close", n)
	}
	if n := s.core.Engine().Live(); n != 1 {
		t.Fatalf("%d live requests after the transport closed, want 1 (detached)", n)
	}
	if _, err := ws.Dial(t.Context(), s.url, nil); err == nil || !strings.Contains(err.Error(), "503") {
		t.Fatalf("dial after Close: %v, want 503", err)
	}
}
