package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/mcp-resume/mcp-resume/mcp/e2etest"
	"github.com/mcp-resume/mcp-resume/testkit/oauthtest"
	"github.com/mcp-resume/mcp-resume/transport/ws"
)

// TestGatewayToolScopeOneName: the gateway checks its clients' tokens and
// calls its upstream with credentials of its own, so a tool named two ways
// would run upstream what the check never allowed. A token without the
// scope of the upstream's countdown, naming it so that the check and mcp-go
// read two tools: refused at the gateway, in both eras, over HTTP and
// WebSocket: the answer is the refusal, never countdown's result.
func TestGatewayToolScopeOneName(t *testing.T) {
	op := oauthtest.Start(t)
	up := spawnNet(t, "serve --http 127.0.0.1:0", 1)[0]
	gw := spawnNet(t, "gateway --http 127.0.0.1:0 --upstream "+up.URL+" --oauth-issuer "+op.Issuer+
		" --oauth-scope mcp:read --oauth-tool-scope countdown=mcp:write", 1)[0]
	read := op.Token(t, "alice", gw.URL, "mcp:read")
	post := func(msg string, header ...string) e2etest.Msg {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, gw.URL, strings.NewReader(msg))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+read)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if i := strings.LastIndex(string(b), "data: "); i >= 0 { // an event stream: its last event
			b = []byte(strings.TrimSpace(string(b[i+len("data: "):])))
		}
		m := e2etest.Msg{Raw: b}
		_ = json.Unmarshal(b, &m)
		return m
	}
	init := post(`{"jsonrpc":"2.0","id":"i","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if init.Error != nil {
		t.Fatalf("initialize: %s", init.Raw)
	}
	req, _ := http.NewRequest(http.MethodPost, gw.URL, strings.NewReader(`{"jsonrpc":"2.0","id":"i","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+read)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	session := resp.Header.Get("Mcp-Session-Id")
	post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, "Mcp-Session-Id", session)

	wc, err := ws.Dial(t.Context(), gw.WS, &ws.DialOptions{Header: http.Header{"Authorization": {"Bearer " + read}}})
	if err != nil {
		t.Fatal(err)
	}
	w := e2etest.NewClient(t, wc)
	w.Initialize(`{}`)
	e2etest.RefusesTwoNames(t, "gateway", "countdown", func(msg string, modern bool) e2etest.Msg {
		if modern {
			return post(msg, "MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "echo")
		}
		return post(msg, "Mcp-Session-Id", session, "MCP-Protocol-Version", "2025-11-25")
	}, w)
	w.Close()
}
