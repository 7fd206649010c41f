package oauth_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-resume/mcp-resume/oauth"
	"github.com/mcp-resume/mcp-resume/testkit/redirect"
)

// heldGrant is a store that holds a grant of the server at serverURL, from
// issuer, whose access token is "at-secret" and refresh token "rt-secret";
// expired, it is refreshed at the next Token.
func heldGrant(t *testing.T, serverURL, issuer string, expired bool) *oauth.MemoryStore {
	t.Helper()
	st := &oauth.MemoryStore{}
	g := &oauth.Grant{Issuer: issuer, Resource: serverURL, ClientID: "client", AccessToken: "at-secret", RefreshToken: "rt-secret"}
	if expired {
		g.Expiry = time.Now().Add(-time.Minute)
	}
	for _, err := range []error{
		st.SaveServer(&oauth.Server{URL: serverURL, Issuer: issuer, Resource: serverURL}),
		st.SaveGrant(g),
		st.SaveRegistration(&oauth.Registration{Issuer: issuer, ClientID: "client", ClientSecret: "cs-secret", AuthMethod: "client_secret_basic"}),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	return st
}

// noLoginCounted is an Authorizer that counts the logins it was asked for and
// refuses them.
func noLoginCounted(n *atomic.Int32) oauth.Authorizer {
	return func(context.Context, string, func(string) (string, error)) (url.Values, error) {
		n.Add(1)
		return nil, oauth.ErrLoginRequired
	}
}

// A server that answers a request with 307 or 308 to another origin (its
// address, another port) gets no token sent there by the Transport, even
// under an http.Client that follows every redirect: the request to the other
// origin is refused before its token is attached, so that origin's 401
// drives no discovery and no login either.
func TestTransportRedirectToAnotherOrigin(t *testing.T) {
	for _, code := range []int{http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		t.Run(http.StatusText(code), func(t *testing.T) {
			p := redirect.New(t, code)
			var logins atomic.Int32
			s := oauth.NewSession(p.URL("/mcp"), &oauth.ClientOptions{Store: heldGrant(t, p.URL("/mcp"), "http://127.0.0.1:9", false), Authorize: noLoginCounted(&logins)})
			c := &http.Client{Transport: &oauth.Transport{Session: s}}
			resp, err := c.Post(p.URL("/mcp"), "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
			if err == nil {
				resp.Body.Close()
				t.Errorf("the request was answered %s, want an error", resp.Status)
			} else if !strings.Contains(err.Error(), p.To.URL) {
				t.Errorf("error %v, want it to name %s", err, p.To.URL)
			}
			p.NothingReached(t, "secret")
			if n := logins.Load(); n != 0 {
				t.Errorf("%d logins started", n)
			}
		})
	}
}

// A token endpoint that answers the refresh with 307 to another origin gets
// the refresh token and the client's secret sent nowhere: the session's own
// HTTP client follows no redirect out of an endpoint's origin.
func TestSessionTokenRequestRedirect(t *testing.T) {
	p := redirect.New(t, http.StatusTemporaryRedirect)
	var as *httptest.Server
	as = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/.well-known/oauth-authorization-server":
			writeJSON(w, 200, map[string]any{"issuer": as.URL, "authorization_endpoint": as.URL + "/authorize", "token_endpoint": as.URL + "/token",
				"code_challenge_methods_supported": []string{"S256"}, "token_endpoint_auth_methods_supported": []string{"client_secret_basic"}})
		case "/token":
			http.Redirect(w, r, p.To.URL+"/token", http.StatusTemporaryRedirect)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(as.Close)
	const server = "http://127.0.0.1:9/mcp"
	var logins atomic.Int32
	s := oauth.NewSession(server, &oauth.ClientOptions{Store: heldGrant(t, server, as.URL, true), Authorize: noLoginCounted(&logins)})
	if tok, err := s.Token(t.Context()); err != nil || tok != "at-secret" {
		t.Errorf("Token: %q, %v; want the held token (its refresh failed)", tok, err)
	}
	p.NothingReached(t, "secret")
}

// A token is never sent in the clear: a server reached over plain http off
// this machine (a name that is not loopback, dialed here to a real server on
// loopback) gets the request without it, refused before it leaves, and no
// login starts; the same server at a loopback address gets the token.
func TestTokenNeedsTLS(t *testing.T) {
	var got atomic.Value
	got.Store("")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store(r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`))
	}))
	t.Cleanup(srv.Close)
	dialer := &net.Dialer{}
	base := &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return dialer.DialContext(ctx, network, srv.Listener.Addr().String())
	}}
	t.Cleanup(base.CloseIdleConnections)
	for _, tc := range []struct {
		url    string
		wantOK bool
	}{{"http://mcp.example.test/mcp", false}, {srv.URL + "/mcp", true}} {
		var logins atomic.Int32
		s := oauth.NewSession(tc.url, &oauth.ClientOptions{Store: heldGrant(t, tc.url, "http://127.0.0.1:9", false), Authorize: noLoginCounted(&logins)})
		c := &http.Client{Transport: &oauth.Transport{Session: s, Base: base}}
		got.Store("")
		resp, err := c.Post(tc.url, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		if err == nil {
			resp.Body.Close()
		}
		switch {
		case tc.wantOK && (err != nil || got.Load() != "Bearer at-secret"):
			t.Errorf("%s: %v, the server got %q; want the token", tc.url, err, got.Load())
		case !tc.wantOK && (err == nil || !strings.Contains(err.Error(), "TLS") || got.Load() != ""):
			t.Errorf("%s: %v, the server got %q; want a refusal naming TLS and nothing sent", tc.url, err, got.Load())
		}
		if n := logins.Load(); n != 0 {
			t.Errorf("%s: %d logins started", tc.url, n)
		}
	}
}
