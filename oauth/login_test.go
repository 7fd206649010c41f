package oauth_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/mcp-resume/mcp-resume/oauth"
)

// testAS is an authorization server and a protected resource written for
// these tests, each knob one a test turns: what the metadata announces, what
// the redirect carries (iss), whether registration is open. Tokens are
// opaque strings it remembers, each for a resource and scopes.
type testAS struct {
	t      *testing.T
	as, rs *httptest.Server

	mu            sync.Mutex
	issuer        string // as.URL
	metaIssuer    string // the issuer its metadata names ("": issuer)
	advertiseIss  bool
	issMode       string // "", "omit", "wrong", "normalized"
	dcr           bool
	cimd          bool
	offline       bool              // scopes_supported has offline_access
	prmResource   string            // "": the RS's /mcp
	needScope     map[string]string // the scope a request with ?need=X needs
	baseScope     string            // every request needs it ("": none)
	clients       map[string]string // client id -> secret ("" for public)
	methods       map[string]string // client id -> token_endpoint_auth_method
	codes         map[string]grantInfo
	access        map[string]grantInfo
	refresh       map[string]grantInfo
	authorizes    int
	registrations int
	tokens        int
	refreshes     int
	lastScope     string // the scope of the last authorization request
	lastResource  string
	deny          string         // a scope the token endpoint never grants
	trust         *testAS        // the authorization server the RS takes tokens of (nil: this one)
	seenClients   []string       // client ids seen at /authorize and /token
	meta          map[string]any // members of the metadata replaced (an endpoint a test makes hostile)
	tokenError    string         // the token endpoint refuses every request with this error_description
	evilMeta      string         // the resource_metadata of the 401 of the RS's /evil/* ("": /evil/meta)
	evilResource  string         // the resource of the RS's /evil/meta
	evilSeen      []string       // the Authorization headers of requests to the RS's /evil/*
}

type grantInfo struct {
	client, resource, scope, challenge string
}

func newTestAS(t *testing.T) *testAS {
	a := &testAS{t: t, dcr: true, advertiseIss: true, needScope: map[string]string{}, clients: map[string]string{}, methods: map[string]string{},
		codes: map[string]grantInfo{}, access: map[string]grantInfo{}, refresh: map[string]grantInfo{}}
	a.as = httptest.NewServer(http.HandlerFunc(a.serveAS))
	a.rs = httptest.NewServer(http.HandlerFunc(a.serveRS))
	a.issuer = a.as.URL
	t.Cleanup(func() {
		a.as.Close()
		a.rs.Close()
	})
	return a
}

func (a *testAS) mcpURL() string { return a.rs.URL + "/mcp" }

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (a *testAS) serveAS(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch r.URL.Path {
	case "/.well-known/oauth-authorization-server":
		m := map[string]any{
			"issuer": cmpOr(a.metaIssuer, a.issuer), "authorization_endpoint": a.issuer + "/authorize", "token_endpoint": a.issuer + "/token",
			"revocation_endpoint": a.issuer + "/revoke", "code_challenge_methods_supported": []string{"S256"},
			"token_endpoint_auth_methods_supported":          []string{"none", "client_secret_basic"},
			"authorization_response_iss_parameter_supported": a.advertiseIss, "client_id_metadata_document_supported": a.cimd,
		}
		if a.dcr {
			m["registration_endpoint"] = a.issuer + "/register"
		}
		if a.offline {
			m["scopes_supported"] = []string{"mcp", "offline_access"}
		}
		maps.Copy(m, a.meta)
		writeJSON(w, 200, m)
	case "/register":
		a.registrations++
		var req struct {
			RedirectURIs []string `json:"redirect_uris"`
			Method       string   `json:"token_endpoint_auth_method"`
			GrantTypes   []string `json:"grant_types"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		id := fmt.Sprintf("%s-client-%d", strings.TrimPrefix(a.issuer, "http://"), a.registrations)
		a.clients[id], a.methods[id] = "", req.Method
		resp := map[string]any{"client_id": id, "token_endpoint_auth_method": req.Method, "redirect_uris": req.RedirectURIs}
		if req.Method != "none" {
			a.clients[id] = "secret-" + id
			resp["client_secret"] = a.clients[id]
		}
		writeJSON(w, 201, resp)
	case "/authorize":
		a.authorizes++
		q := r.URL.Query()
		a.seenClients = append(a.seenClients, q.Get("client_id"))
		a.lastScope, a.lastResource = q.Get("scope"), q.Get("resource")
		if q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" {
			http.Error(w, "PKCE required", 400)
			return
		}
		code := fmt.Sprintf("code-%d", a.authorizes)
		a.codes[code] = grantInfo{client: q.Get("client_id"), resource: q.Get("resource"), scope: q.Get("scope"), challenge: q.Get("code_challenge")}
		back := url.Values{"code": {code}, "state": {q.Get("state")}}
		switch a.issMode {
		case "":
			back.Set("iss", a.issuer)
		case "wrong":
			back.Set("iss", "https://evil.example.com")
		case "normalized":
			back.Set("iss", a.issuer+"/")
		}
		http.Redirect(w, r, q.Get("redirect_uri")+"?"+back.Encode(), http.StatusFound)
	case "/token":
		a.tokens++
		_ = r.ParseForm()
		if a.tokenError != "" {
			writeJSON(w, 400, map[string]string{"error": "invalid_request", "error_description": a.tokenError})
			return
		}
		id, secret, basic := r.BasicAuth()
		if !basic {
			id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
		} else {
			id, _ = url.QueryUnescape(id)
			secret, _ = url.QueryUnescape(secret)
		}
		a.seenClients = append(a.seenClients, id)
		if want, ok := a.clients[id]; ok && want != secret {
			writeJSON(w, 401, map[string]string{"error": "invalid_client"})
			return
		}
		var g grantInfo
		switch r.PostForm.Get("grant_type") {
		case "authorization_code":
			c, ok := a.codes[r.PostForm.Get("code")]
			delete(a.codes, r.PostForm.Get("code"))
			sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
			if !ok || base64.RawURLEncoding.EncodeToString(sum[:]) != c.challenge || r.PostForm.Get("resource") != c.resource {
				writeJSON(w, 400, map[string]string{"error": "invalid_grant"})
				return
			}
			g = c
		case "refresh_token":
			a.refreshes++
			c, ok := a.refresh[r.PostForm.Get("refresh_token")]
			delete(a.refresh, r.PostForm.Get("refresh_token")) // rotated
			if !ok {
				writeJSON(w, 400, map[string]string{"error": "invalid_grant"})
				return
			}
			g = c
		default:
			writeJSON(w, 400, map[string]string{"error": "unsupported_grant_type"})
			return
		}
		if a.deny != "" {
			g.scope = strings.Join(slices.DeleteFunc(strings.Fields(g.scope), func(s string) bool { return s == a.deny }), " ")
		}
		at, rt := fmt.Sprintf("%s-at-%d", a.issuer, a.tokens), fmt.Sprintf("%s-rt-%d", a.issuer, a.tokens)
		a.access[at], a.refresh[rt] = g, g
		writeJSON(w, 200, map[string]any{"access_token": at, "token_type": "Bearer", "expires_in": 3600, "refresh_token": rt, "scope": g.scope})
	case "/revoke":
		_ = r.ParseForm()
		delete(a.access, r.PostForm.Get("token"))
		delete(a.refresh, r.PostForm.Get("token"))
	default:
		http.NotFound(w, r)
	}
}

func (a *testAS) serveRS(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	trust := a.trust
	a.mu.Unlock()
	if trust == nil {
		trust = a
	}
	trust.mu.Lock()
	issuer, access := trust.issuer, maps.Clone(trust.access)
	trust.mu.Unlock()
	a.mu.Lock()
	defer a.mu.Unlock()
	meta := a.rs.URL + "/.well-known/oauth-protected-resource/mcp"
	switch r.URL.Path {
	case "/.well-known/oauth-protected-resource/mcp":
		writeJSON(w, 200, map[string]any{"resource": cmpOr(a.prmResource, a.mcpURL()), "authorization_servers": []string{issuer}})
		return
	case "/mcp":
	case "/evil/meta":
		writeJSON(w, 200, map[string]any{"resource": a.evilResource, "authorization_servers": []string{issuer}})
		return
	default:
		if strings.HasPrefix(r.URL.Path, "/evil/") {
			a.evilSeen = append(a.evilSeen, r.Header.Get("Authorization"))
			w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer resource_metadata=%q`, cmpOr(a.evilMeta, a.rs.URL+"/evil/meta")))
			writeJSON(w, 401, map[string]string{"error": "invalid_token"})
			return
		}
		http.NotFound(w, r)
		return
	}
	tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	g, ok := access[tok]
	if !ok || g.resource != a.mcpURL() {
		w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer resource_metadata=%q, scope=%q, error="invalid_token"`, meta, a.baseScope))
		writeJSON(w, 401, map[string]string{"error": "invalid_token"})
		return
	}
	need := []string{}
	if a.baseScope != "" {
		need = append(need, a.baseScope)
	}
	if n := a.needScope[r.URL.Query().Get("need")]; n != "" {
		need = append(need, n)
	}
	for _, n := range need {
		if !slices.Contains(strings.Fields(g.scope), n) {
			w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer error="insufficient_scope", scope=%q, resource_metadata=%q`, strings.Join(need, " "), meta))
			writeJSON(w, 403, map[string]string{"error": "insufficient_scope"})
			return
		}
	}
	body, _ := io.ReadAll(r.Body)
	writeJSON(w, 200, map[string]string{"ok": string(body)})
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// client is an HTTP client through a Session of the test server.
func (a *testAS) client(opts *oauth.ClientOptions) (*http.Client, *oauth.Session) {
	o := oauth.ClientOptions{Authorize: oauth.Headless(nil, "http://127.0.0.1:9/callback")}
	if opts != nil {
		o = *opts
		if o.Authorize == nil {
			o.Authorize = oauth.Headless(nil, "http://127.0.0.1:9/callback")
		}
	}
	s := oauth.NewSession(a.mcpURL(), &o)
	return &http.Client{Transport: &oauth.Transport{Session: s}}, s
}

func (a *testAS) get(t *testing.T, c *http.Client, need string) (int, error) {
	t.Helper()
	u := a.mcpURL()
	if need != "" {
		u += "?need=" + need
	}
	resp, err := c.Post(u, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

func (a *testAS) counts() (authorizes, registrations, refreshes int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.authorizes, a.registrations, a.refreshes
}

// A request to a server that wants a token: the 401's challenge leads to the
// metadata, the client registers, logs in (PKCE, state, iss, resource),
// gets its token and the request goes again and succeeds; later requests
// carry it; a token the server stops taking is refreshed (rotated), not a new
// login; a refresh token refused leads to a login.
func TestLoginRegisterRefresh(t *testing.T) {
	a := newTestAS(t)
	a.offline = true
	c, _ := a.client(nil)
	for range 3 {
		if st, err := a.get(t, c, ""); err != nil || st != 200 {
			t.Fatalf("request: %d %v", st, err)
		}
	}
	if au, reg, _ := a.counts(); au != 1 || reg != 1 || a.lastResource != a.mcpURL() || a.lastScope != "offline_access" {
		t.Fatalf("%d authorizations, %d registrations, resource %q scope %q; want 1, 1, the MCP URL, offline_access", au, reg, a.lastResource, a.lastScope)
	}
	a.mu.Lock()
	clear(a.access) // every access token revoked
	a.mu.Unlock()
	if st, err := a.get(t, c, ""); err != nil || st != 200 {
		t.Fatalf("request after the tokens were revoked: %d %v", st, err)
	}
	if au, _, ref := a.counts(); au != 1 || ref != 1 {
		t.Fatalf("%d authorizations, %d refreshes; want 1 and 1", au, ref)
	}
	a.mu.Lock()
	clear(a.access)
	clear(a.refresh)
	a.mu.Unlock()
	if st, err := a.get(t, c, ""); err != nil || st != 200 {
		t.Fatalf("request after the refresh tokens were revoked: %d %v", st, err)
	}
	if au, reg, ref := a.counts(); au != 2 || reg != 1 || ref != 2 {
		t.Fatalf("%d authorizations, %d registrations, %d refreshes; want 2, 1 (the registration kept), 2", au, reg, ref)
	}
}

// What must not be trusted is refused with an error that says so, and
// nothing is stored: metadata for another resource, an authorization server
// whose metadata names another issuer, an iss missing, wrong or normalized,
// a redirect with another state.
func TestLoginRefusals(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		set        func(a *testAS)
		authorize  oauth.Authorizer
	}{
		{name: "resource mismatch", want: "not for", set: func(a *testAS) { a.prmResource = "https://evil.example.com/mcp" }},
		{name: "metadata issuer mismatch", want: "names the issuer", set: func(a *testAS) { a.metaIssuer = "https://attacker.example.com" }},
		{name: "iss missing", want: "RFC 9207", set: func(a *testAS) { a.issMode = "omit" }},
		{name: "iss wrong", want: "RFC 9207", set: func(a *testAS) { a.issMode = "wrong" }},
		{name: "iss normalized", want: "RFC 9207", set: func(a *testAS) { a.issMode = "normalized" }},
		{name: "iss unexpected", want: "RFC 9207", set: func(a *testAS) { a.advertiseIss, a.issMode = false, "wrong" }},
		{name: "state", want: "another state", authorize: func(ctx context.Context, prev string, start func(string) (string, error)) (url.Values, error) {
			q, err := oauth.Headless(nil, "http://127.0.0.1:9/callback")(ctx, prev, start)
			if err == nil {
				q.Set("state", "forged")
			}
			return q, err
		}},
		{name: "no registration possible", want: "takes no registrations", set: func(a *testAS) { a.dcr = false }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newTestAS(t)
			if tc.set != nil {
				tc.set(a)
			}
			store := &oauth.FileStore{Dir: t.TempDir()}
			c, _ := a.client(&oauth.ClientOptions{Store: store, Authorize: tc.authorize})
			if _, err := a.get(t, c, ""); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v; want one with %q", err, tc.want)
			}
			if a.tokens != 0 {
				t.Errorf("%d token requests; want none", a.tokens)
			}
			if files := storedFiles(t, store.Dir); len(files) > 0 {
				t.Errorf("stored %v after a refused login", files)
			}
		})
	}
	// Without the iss parameter announced and none sent, the login goes on.
	a := newTestAS(t)
	a.advertiseIss, a.issMode = false, "omit"
	c, _ := a.client(nil)
	if st, err := a.get(t, c, ""); err != nil || st != 200 {
		t.Fatalf("no iss, none announced: %d %v", st, err)
	}
}

// storedFiles lists the record files under dir.
func storedFiles(t *testing.T, dir string) []string {
	var out []string
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".json") {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// A 403 insufficient_scope logs in for the scopes held and those named (the
// union); a server that never grants enough gets at most MaxStepUps such
// logins in a row, then the error.
func TestStepUp(t *testing.T) {
	a := newTestAS(t)
	a.baseScope = "mcp:read"
	a.needScope["write"] = "mcp:write"
	c, _ := a.client(nil)
	if st, err := a.get(t, c, ""); err != nil || st != 200 || a.lastScope != "mcp:read" {
		t.Fatalf("first request: %d %v, scope %q", st, err, a.lastScope)
	}
	if st, err := a.get(t, c, "write"); err != nil || st != 200 || a.lastScope != "mcp:read mcp:write" {
		t.Fatalf("a request that needs mcp:write: %d %v, scope %q; want the union", st, err, a.lastScope)
	}
	if au, _, _ := a.counts(); au != 2 {
		t.Fatalf("%d authorizations; want 2", au)
	}
	// A scope the server never grants: every step-up gets 403 again.
	never := newTestAS(t)
	never.baseScope, never.deny = "mcp:read", "mcp:admin"
	never.needScope["admin"] = "mcp:admin"
	c2, _ := never.client(nil)
	if st, err := never.get(t, c2, "admin"); (err == nil || !strings.Contains(err.Error(), "more scopes")) && st != 403 {
		t.Fatalf("a scope never granted: %d %v; want 403 or the step-up limit's error", st, err)
	}
	if au, _, _ := never.counts(); au > 3 || au < 1 {
		t.Fatalf("%d authorizations for a scope never granted; want 1 to 3", au)
	}
}

// The file store: owner-only files, a grant found again by a new session (a
// new process), two sessions that meet the 401 at once log in once; logout
// forgets the grant and revokes it.
func TestFileStoreShared(t *testing.T) {
	a := newTestAS(t)
	dir := filepath.Join(t.TempDir(), "oauth")
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			c, _ := a.client(&oauth.ClientOptions{Store: &oauth.FileStore{Dir: dir}})
			if st, err := a.get(t, c, ""); err != nil || st != 200 {
				t.Errorf("request: %d %v", st, err)
			}
		})
	}
	wg.Wait()
	if au, _, _ := a.counts(); au != 1 {
		t.Fatalf("%d authorizations for two sessions at once; want 1", au)
	}
	for _, f := range storedFiles(t, dir) {
		fi, err := os.Stat(f)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v; want 0600", f, fi.Mode(), err)
		}
		di, _ := os.Stat(filepath.Dir(f))
		if di.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v; want 0700", filepath.Dir(f), di.Mode())
		}
	}
	c, s := a.client(&oauth.ClientOptions{Store: &oauth.FileStore{Dir: dir}, Authorize: func(context.Context, string, func(string) (string, error)) (url.Values, error) {
		t.Error("a login with a stored grant")
		return nil, context.Canceled
	}})
	if st, err := a.get(t, c, ""); err != nil || st != 200 {
		t.Fatalf("a new session with the stored grant: %d %v", st, err)
	}
	had, err := s.Logout(context.Background())
	if err != nil || !had {
		t.Fatalf("logout: %v %v", had, err)
	}
	a.mu.Lock()
	left := len(a.access)
	a.mu.Unlock()
	if left != 0 { // the two sessions shared one grant
		t.Errorf("%d access tokens left at the server after logout; want 0", left)
	}
	c, _ = a.client(&oauth.ClientOptions{Store: &oauth.FileStore{Dir: dir}, Authorize: oauth.Headless(nil, "http://127.0.0.1:9/callback")})
	if st, err := a.get(t, c, ""); err != nil || st != 200 {
		t.Fatalf("after logout: %d %v", st, err)
	}
	if au, reg, _ := a.counts(); au != 2 || reg != 1 {
		t.Fatalf("%d authorizations, %d registrations after logout; want 2 and 1", au, reg)
	}
}

// An authorization server that moves: the resource's metadata names
// another one, whose tokens it takes from then on; the client meets the 401,
// reads the metadata again, registers at the new one and never shows it the
// first one's client.
func TestServerMoves(t *testing.T) {
	a := newTestAS(t)
	b := newTestAS(t)
	c, _ := a.client(nil)
	if st, err := a.get(t, c, ""); err != nil || st != 200 {
		t.Fatalf("first: %d %v", st, err)
	}
	a.mu.Lock()
	a.trust = b
	a.mu.Unlock()
	if st, err := a.get(t, c, ""); err != nil || st != 200 {
		t.Fatalf("after the move: %d %v", st, err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.registrations != 1 || b.authorizes != 1 {
		t.Fatalf("%d registrations and %d authorizations at the new server; want 1 and 1", b.registrations, b.authorizes)
	}
	for _, id := range b.seenClients {
		if strings.HasPrefix(id, strings.TrimPrefix(a.issuer, "http://")) {
			t.Fatalf("the first server's client %q shown to the new one", id)
		}
	}
}

// The challenge parser: parameters of several challenges, quoted strings
// with escapes, a token68.
func TestParseChallenges(t *testing.T) {
	cs := oauth.ParseChallenges([]string{`Basic realm="x", Bearer resource_metadata="https://a/b?c=\"d\"", scope="s1 s2", error=invalid_token`, `DPoP abc==`})
	if len(cs) != 3 || cs[1].Scheme != "Bearer" || cs[1].Params["resource_metadata"] != `https://a/b?c="d"` || cs[1].Params["scope"] != "s1 s2" ||
		cs[1].Params["error"] != "invalid_token" || cs[0].Params["realm"] != "x" || cs[2].Scheme != "DPoP" || cs[2].Params[""] != "abc==" {
		t.Fatalf("%+v", cs)
	}
	h := http.Header{"Www-Authenticate": {`bearer scope="a"`}}
	if ch := oauth.Bearer(h); ch == nil || len(ch.Scopes()) != 1 {
		t.Fatalf("Bearer(%v) = %+v", h, ch)
	}
}

// FuzzParseChallenges: any header parses without a panic.
func FuzzParseChallenges(f *testing.F) {
	for _, s := range []string{`Bearer resource_metadata="x", scope="a b"`, `Bearer "`, `Bearer a=`, `, , Basic`, `Bearer a="\`, `x y=z, w`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, c := range oauth.ParseChallenges([]string{s}) {
			if c.Scheme == "" {
				t.Fatalf("%q: a challenge without a scheme", s)
			}
		}
	})
}

// Two processes that hold one grant the server stops taking: the first to
// renew it spends the refresh token (the server rotates them); the other,
// renewing after, takes the grant the first stored instead of spending a
// refresh token no longer valid (which would end in a new login).
func TestRefreshRotationAcrossProcesses(t *testing.T) {
	a := newTestAS(t)
	dir := t.TempDir()
	c1, _ := a.client(&oauth.ClientOptions{Store: &oauth.FileStore{Dir: dir}})
	if st, err := a.get(t, c1, ""); err != nil || st != 200 {
		t.Fatalf("login: %d %v", st, err)
	}
	noLogin := func(context.Context, string, func(string) (string, error)) (url.Values, error) {
		t.Error("a login where the stored grant would do")
		return nil, context.Canceled
	}
	c2, _ := a.client(&oauth.ClientOptions{Store: &oauth.FileStore{Dir: dir}, Authorize: noLogin})
	if st, err := a.get(t, c2, ""); err != nil || st != 200 {
		t.Fatalf("the second process with the stored grant: %d %v", st, err)
	}
	a.mu.Lock()
	clear(a.access) // both hold a token the server no longer takes
	a.mu.Unlock()
	for i, c := range []*http.Client{c1, c2} {
		if st, err := a.get(t, c, ""); err != nil || st != 200 {
			t.Fatalf("process %d after the server dropped the token: %d %v", i+1, st, err)
		}
	}
	if au, _, ref := a.counts(); ref != 1 || au != 1 {
		t.Fatalf("%d refreshes and %d authorizations; want 1 and 1", ref, au)
	}
}

// The transport passes CloseIdleConnections on to its base: a client that
// found a connection silent drops the pooled ones through it (without, the
// next request went out on a dead pooled connection).
func TestTransportClosesIdleConnections(t *testing.T) {
	var closed int
	base := closeCounter{&closed}
	c := &http.Client{Transport: &oauth.Transport{Session: oauth.NewSession("http://127.0.0.1:9/mcp", nil), Base: base}}
	c.CloseIdleConnections()
	if closed != 1 {
		t.Fatalf("the base's CloseIdleConnections called %d times, want 1", closed)
	}
}

type closeCounter struct{ n *int }

func (c closeCounter) RoundTrip(*http.Request) (*http.Response, error) {
	return nil, errors.New("unused")
}
func (c closeCounter) CloseIdleConnections() { *c.n++ }
