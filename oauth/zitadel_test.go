package oauth_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/mcp-resume/mcp-resume/mcp/e2etest"
	"github.com/mcp-resume/mcp-resume/oauth"
	"github.com/mcp-resume/mcp-resume/testkit/oauthtest"
	httptransport "github.com/mcp-resume/mcp-resume/transport/http"
	"github.com/mcp-resume/mcp-resume/transport/ws"
)

// Our client against our resource server and a real OpenID provider: a
// person logs in (authorization code, PKCE, the resource as the token's
// audience), over Streamable HTTP and WebSocket; a token that expires is
// refreshed, not a new login.
func TestClientAgainstProvider(t *testing.T) {
	op := oauthtest.Start(t)
	r := newRigAt(t, oauth.Options{Issuers: []string{op.Issuer}, Scopes: []string{"mcp:tools"}}, true)
	srv := r.srv
	mcpURL := srv.URL + "/mcp"

	store := &oauth.MemoryStore{}
	opts := &oauth.ClientOptions{Store: store, ClientID: oauthtest.CodeClient, Authorize: op.Login(op.User())}
	s := oauth.NewSession(mcpURL, opts)
	hc := e2etest.NewClient(t, httptransport.Dial(mcpURL, &httptransport.ClientOptions{Client: &http.Client{Transport: &oauth.Transport{Session: s}}}))
	hc.Initialize(`{}`)
	hc.Send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"logged in"}}}`)
	if resp, _ := hc.Response(`2`); e2etest.Text(resp) != "logged in" {
		t.Fatalf("echo: %s", resp.Raw)
	}
	hc.Close()
	if n := op.Requests("/auth"); n != 1 {
		t.Fatalf("%d authorization requests; want 1", n)
	}
	g, _ := store.Grant(op.Issuer, mcpURL)
	if g == nil || g.RefreshToken == "" || !strings.Contains(strings.Join(g.Scopes, " "), "mcp:tools") {
		t.Fatalf("grant %+v: want a refresh token and mcp:tools", g)
	}

	// The stored token expires: a new session (a new process) refreshes it
	// before its first request.
	g.Expiry = time.Now()
	if err := store.SaveGrant(g); err != nil {
		t.Fatal(err)
	}
	refused := func(context.Context, string, func(string) (string, error)) (url.Values, error) {
		t.Error("a login where a refresh or the stored grant would do")
		return nil, context.Canceled
	}
	s2 := oauth.NewSession(mcpURL, &oauth.ClientOptions{Store: store, ClientID: oauthtest.CodeClient, Authorize: refused})
	tokens := op.Requests("/oauth/token")
	tok, err := s2.Token(context.Background())
	if err != nil || tok == "" || tok == g.AccessToken || op.Requests("/oauth/token") != tokens+1 {
		t.Fatalf("the expired token: %v, a new one %v, %d token requests (want one more than %d)", err, tok != g.AccessToken, op.Requests("/oauth/token"), tokens)
	}
	// The WebSocket endpoint of the same server takes the same grant.
	wsURL := "ws://" + srv.Listener.Addr().String() + "/ws"
	s3 := oauth.NewSession(wsURL, &oauth.ClientOptions{Store: store, ClientID: oauthtest.CodeClient, Authorize: refused})
	wc, err := ws.Dial(context.Background(), wsURL, &ws.DialOptions{Wrap: func(rt http.RoundTripper) http.RoundTripper {
		return &oauth.Transport{Session: s3, Base: rt}
	}})
	if err != nil {
		t.Fatal(err)
	}
	w := e2etest.NewClient(t, wc)
	w.Initialize(`{}`)
	w.Send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"over ws"}}}`)
	if resp, _ := w.Response(`3`); e2etest.Text(resp) != "over ws" {
		t.Fatalf("echo over WebSocket: %s", resp.Raw)
	}
	if n := op.Requests("/auth"); n != 1 {
		t.Fatalf("%d authorization requests; want 1", n)
	}
}
