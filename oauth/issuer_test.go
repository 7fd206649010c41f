package oauth_test

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mcp-resume/mcp-resume/oauth"
	"github.com/mcp-resume/mcp-resume/testkit/oauthtest"
)

// verify runs VerifyIssuer for a server whose one issuer is issuer.
func verify(t *testing.T, issuer string, opts oauth.Options) error {
	t.Helper()
	opts.Resource = resource
	opts.Issuers = []string{issuer}
	rs, err := oauth.New(&opts)
	if err != nil {
		t.Fatal(err)
	}
	return rs.VerifyIssuer(t.Context(), issuer)
}

// servedDocs is a host that answers GET path with its document, and 404
// elsewhere; status, when set, answers every request.
func servedDocs(t *testing.T, status int, docs map[string]string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if status != 0 {
			w.WriteHeader(status)
			return
		}
		doc, ok := docs[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		if !strings.HasPrefix(doc, "{") {
			w.Header().Set("Content-Type", "text/html")
		}
		_, _ = w.Write([]byte(strings.ReplaceAll(doc, "$HOST", "http://"+r.Host)))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// An issuer's metadata is checked as the server starts: a real provider
// named as its metadata spells it passes; named with a trailing slash its
// metadata does not spell, or as the MCP server it protects (its path),
// the check fails with what to give instead; a page that is no metadata, or
// metadata with nothing to check tokens with, fails; a host that cannot be
// reached, or answers 503, is Unreachable (the server starts and tries
// again), not a mistake.
func TestVerifyIssuer(t *testing.T) {
	op := oauthtest.Start(t)
	if err := verify(t, op.Issuer, oauth.Options{}); err != nil {
		t.Fatalf("the provider as its metadata names it: %v", err)
	}
	definite := func(name string, err error, want string, problem string) {
		t.Helper()
		var ie *oauth.IssuerError
		if !errors.As(err, &ie) || ie.Unreachable || ie.Want != want || !strings.Contains(ie.Problem, problem) {
			t.Errorf("%s: %v (%+v), want a definite error naming %q, suggesting %q", name, err, ie, problem, want)
		}
	}
	definite("a trailing slash the metadata does not spell", verify(t, op.Issuer+"/", oauth.Options{}), op.Issuer, "names the issuer")

	// The MCP endpoint for its issuer: serve's own, protected by op.
	r := newRigAt(t, oauth.Options{Issuers: []string{op.Issuer}}, true)
	definite("the MCP endpoint", verify(t, r.rs.Resource(), oauth.Options{}), op.Issuer, "protected resource")

	page := servedDocs(t, 0, map[string]string{"/.well-known/oauth-authorization-server": "<html>sign in</html>",
		"/.well-known/openid-configuration": `{"hello":"world"}`})
	definite("a host whose well-known URLs answer pages", verify(t, page.URL, oauth.Options{}), "", "not authorization server metadata")

	bare := servedDocs(t, 0, map[string]string{"/.well-known/oauth-authorization-server": `{"issuer":"$HOST","token_endpoint":"$HOST/token"}`})
	definite("metadata with neither keys nor introspection", verify(t, bare.URL, oauth.Options{}), "", "neither jwks_uri nor introspection_endpoint")
	if err := verify(t, bare.URL, oauth.Options{Introspection: bare.URL + "/introspect"}); err != nil {
		t.Errorf("the same with an introspection endpoint named: %v", err)
	}

	// An issuer with a path, whose host's authorization server is at its root.
	root := servedDocs(t, 0, map[string]string{"/.well-known/oauth-authorization-server": `{"issuer":"$HOST/","jwks_uri":"$HOST/keys"}`})
	definite("a path under the real issuer", verify(t, root.URL+"/oauth", oauth.Options{}), root.URL+"/", "is the metadata of the authorization server")

	unreachable := func(name string, err error) {
		t.Helper()
		var ie *oauth.IssuerError
		if !errors.As(err, &ie) || !ie.Unreachable {
			t.Errorf("%s: %v, want Unreachable", name, err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := "http://" + ln.Addr().String()
	ln.Close()
	unreachable("nothing listening", verify(t, gone, oauth.Options{}))
	unreachable("503", verify(t, servedDocs(t, http.StatusServiceUnavailable, nil).URL, oauth.Options{}))
}
