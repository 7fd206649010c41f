package oauth_test

import (
	"context"
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
