package oauth_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/mcp-resume/mcp-resume/mcp/e2etest"
	"github.com/mcp-resume/mcp-resume/oauth"
	"github.com/mcp-resume/mcp-resume/testkit/oauthtest"
)

// TestToolScopeOneName: a token with mcp:read calls countdown, which needs
// mcp:write, by naming it so that the scope check and mcp-go read two tools
// ("name":"echo","Name":"countdown", a lone "NAME", ...): refused before
// anything runs, over Streamable HTTP in a 2025 session and in the stateless
// 2026 form (as curl sends them), and over WebSocket in both eras.
func TestToolScopeOneName(t *testing.T) {
	op := oauthtest.Start(t)
	r := newRig(t, oauth.Options{Issuers: []string{op.Issuer}, Scopes: []string{"mcp:read"}, ToolScopes: map[string][]string{"countdown": {"mcp:write"}}})
	read := op.Token(t, "alice", resource, "mcp:read")
	session := r.rawSession(t, read)
	wc, err := r.dialWS(t, read)
	if err != nil {
		t.Fatal(err)
	}
	w := e2etest.NewClient(t, wc)
	w.Initialize(`{}`)
	e2etest.RefusesTwoNames(t, "serve", "countdown", func(msg string, modern bool) e2etest.Msg {
		if modern {
			return r.rawCall(t, read, "", msg)
		}
		return r.rawCall(t, read, session, msg)
	}, w)
}

// rawSession opens a 2025 session with POSTs as curl sends them and returns
// its id.
func (r *rig) rawSession(t *testing.T, token string) string {
	t.Helper()
	resp, body := r.post(t, token)
	id := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || id == "" {
		t.Fatalf("initialize: %s %s", resp.Status, body)
	}
	r.rawCall(t, token, id, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return id
}

// rawCall POSTs msg with token, in session (or, "", a 2026 request) and
// returns its answer: the JSON body, or the last event of its stream.
func (r *rig) rawCall(t *testing.T, token, session, msg string) e2etest.Msg {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, r.srv.URL+"/mcp", strings.NewReader(msg))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	} else {
		req.Header.Set("MCP-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", "echo")
	}
	resp, err := r.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode == http.StatusAccepted {
		return e2etest.Msg{}
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		for i := len(lines) - 1; i >= 0; i-- {
			if d, ok := strings.CutPrefix(lines[i], "data: "); ok {
				b = []byte(d)
				break
			}
		}
	}
	m := e2etest.Msg{Raw: b}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %s %s", msg, resp.Status, b)
	}
	return m
}
