package oauth_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/mcp/e2etest"
	"github.com/mcp-resume/mcp-resume/oauth"
	"github.com/mcp-resume/mcp-resume/servers/demo"
	"github.com/mcp-resume/mcp-resume/testkit/oauthtest"
	httptransport "github.com/mcp-resume/mcp-resume/transport/http"
	"github.com/mcp-resume/mcp-resume/transport/ws"
)

// onePath serves the demo tools behind a ResourceServer of op on one path,
// /mcp, over both transports (a GET that asks for a WebSocket upgrade goes to
// WebSocket, the rest to Streamable HTTP): one resource, whichever scheme a
// client reaches it by.
func onePath(t *testing.T, op *oauthtest.OP) *httptest.Server {
	srv := httptest.NewUnstartedServer(nil)
	rs, err := oauth.New(&oauth.Options{Resource: "http://" + srv.Listener.Addr().String() + "/mcp", Issuers: []string{op.Issuer}, Scopes: []string{"mcp:tools"}})
	if err != nil {
		t.Fatal(err)
	}
	core, err := mcp.New(demo.Server("test"), nil)
	if err != nil {
		t.Fatal(err)
	}
	h := httptransport.NewHandler(core, &httptransport.Options{Auth: rs})
	wh := ws.NewHandler(core, &ws.AcceptOptions{Auth: rs})
	mux := http.NewServeMux()
	mux.Handle("/mcp", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
			wh.ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(w, r)
	}))
	for _, p := range rs.MetadataPaths() {
		mux.Handle(p, rs.MetadataHandler())
	}
	srv.Config.Handler = mux
	srv.Start()
	t.Cleanup(func() {
		h.Close()
		wh.Close()
		srv.Close()
		core.Close()
	})
	return srv
}

// Our client against our resource server and a real OpenID provider: a
// person logs in (authorization code, PKCE, the resource as the token's
// audience), over Streamable HTTP and WebSocket; a token that expires is
// refreshed, not a new login.
func TestClientAgainstProvider(t *testing.T) {
	op := oauthtest.Start(t)
	srv := onePath(t, op)
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
	// The WebSocket endpoint at the same URL is the same resource: it takes
	// the same grant.
	wsURL := "ws://" + srv.Listener.Addr().String() + "/mcp"
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
