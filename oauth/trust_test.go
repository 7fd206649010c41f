package oauth_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-resume/mcp-resume/oauth"
	"github.com/mcp-resume/mcp-resume/testkit/oauthtest"
	"github.com/mcp-resume/mcp-resume/transport/ws"
)

// The client's refusals of what a server names: each test is a hostile
// server (or page, or authorization server) and what it must not get.

// noLogin is an Authorizer that fails the test: a login where none is due.
func noLogin(t *testing.T) oauth.Authorizer {
	return func(context.Context, string, func(string) (string, error)) (url.Values, error) {
		t.Error("a login was started")
		return nil, context.Canceled
	}
}

// request sends one request to serverURL through s: a WebSocket handshake
// for a ws:// URL, else a POST.
func request(t *testing.T, serverURL string, s *oauth.Session) error {
	t.Helper()
	if strings.HasPrefix(serverURL, "ws") {
		c, err := ws.Dial(t.Context(), serverURL, &ws.DialOptions{Wrap: func(rt http.RoundTripper) http.RoundTripper {
			return &oauth.Transport{Session: s, Base: rt}
		}})
		if err == nil {
			_ = c.Close()
		}
		return err
	}
	resp, err := (&http.Client{Transport: &oauth.Transport{Session: s}}).Post(serverURL, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return err
}

// A grant goes only to its resource: a page on the victim's origin (a
// WebSocket at /evil/ws, Streamable HTTP at /evil/mcp) that names the
// victim's metadata, or metadata of its own naming the victim's resource and
// authorization server, or a resource above its path, or metadata on another
// origin, is refused, and none of its requests carries the victim's token;
// nor does a stored record mapping such a page to the victim's grant (saved
// by a version that accepted it) send it. The victim's own server, reached
// over WebSocket at its URL, takes the grant without a login.
func TestResourceMustMatch(t *testing.T) {
	a := newTestAS(t)
	store := &oauth.MemoryStore{}
	c, _ := a.client(&oauth.ClientOptions{Store: store})
	if st, err := a.get(t, c, ""); err != nil || st != 200 {
		t.Fatalf("the victim's login: %d %v", st, err)
	}
	victim, _ := store.Grant(a.issuer, a.mcpURL())
	if victim == nil {
		t.Fatal("no grant stored for the victim's resource")
	}
	origin := a.rs.URL
	host := strings.TrimPrefix(origin, "http://")
	victimMeta := origin + "/.well-known/oauth-protected-resource/mcp"
	for _, tc := range []struct{ name, url, meta, resource string }{
		{"a WebSocket page naming the victim's metadata", "ws://" + host + "/evil/ws", victimMeta, ""},
		{"a WebSocket page whose metadata names the victim's resource", "ws://" + host + "/evil/ws", "", a.mcpURL()},
		{"another path naming the victim's metadata", origin + "/evil/mcp", victimMeta, ""},
		{"another path whose metadata names the victim's resource", origin + "/evil/mcp", "", a.mcpURL()},
		{"a resource above the server's path", origin + "/evil/mcp", "", origin + "/evil"},
		{"the origin, from a document not at its root", "ws://" + host + "/evil/ws", "", origin + "/"},
		{"metadata on another origin", origin + "/evil/mcp", a.as.URL + "/.well-known/oauth-protected-resource/mcp", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a.mu.Lock()
			a.evilMeta, a.evilResource, a.evilSeen = tc.meta, tc.resource, nil
			a.mu.Unlock()
			err := request(t, tc.url, oauth.NewSession(tc.url, &oauth.ClientOptions{Store: store, Authorize: noLogin(t)}))
			if err == nil || !strings.Contains(err.Error(), "refused") {
				t.Errorf("err %v; want the metadata refused", err)
			}
			a.mu.Lock()
			defer a.mu.Unlock()
			for _, h := range a.evilSeen {
				if h != "" {
					t.Errorf("the page got Authorization %q (the victim's token: %v)", h, h == "Bearer "+victim.AccessToken)
				}
			}
		})
	}

	t.Run("a stored record of the page", func(t *testing.T) {
		evil := "ws://" + host + "/evil/ws"
		if err := store.SaveServer(&oauth.Server{URL: evil, Issuer: a.issuer, Resource: a.mcpURL()}); err != nil {
			t.Fatal(err)
		}
		a.mu.Lock()
		a.evilMeta, a.evilResource, a.evilSeen = victimMeta, "", nil
		a.mu.Unlock()
		_ = request(t, evil, oauth.NewSession(evil, &oauth.ClientOptions{Store: store, Authorize: noLogin(t)}))
		a.mu.Lock()
		defer a.mu.Unlock()
		if len(a.evilSeen) == 0 {
			t.Fatal("no request reached the page")
		}
		for _, h := range a.evilSeen {
			if h != "" {
				t.Errorf("the page got Authorization %q", h)
			}
		}
	})

	t.Run("the victim's server over WebSocket", func(t *testing.T) {
		// The session of ws://host/mcp (its resource http://host/mcp); the
		// request goes to the test server's HTTP endpoint, which is all it
		// serves.
		s := oauth.NewSession("ws://"+host+"/mcp", &oauth.ClientOptions{Store: store, Authorize: noLogin(t)})
		resp, err := (&http.Client{Transport: &oauth.Transport{Session: s}}).Post(a.mcpURL(), "application/json", strings.NewReader(`{}`))
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("the same resource over WebSocket: %v %v; want 200 with the stored grant", resp, err)
		}
		resp.Body.Close()
	})
}

// recorder is a hostile server's log: every request's line, Authorization
// and body.
type recorder struct {
	mu   sync.Mutex
	seen []string
}

func (r *recorder) record(req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	req.Body = io.NopCloser(bytes.NewReader(body))
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = append(r.seen, req.Method+" "+req.URL.String()+" auth="+req.Header.Get("Authorization")+" body="+string(body))
}

// contains reports the requests recorded that contain any of words.
func (r *recorder) contains(words ...string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, s := range r.seen {
		for _, w := range words {
			if w != "" && strings.Contains(s, w) {
				out = append(out, s)
				break
			}
		}
	}
	return out
}

// A server without protected resource metadata whose authorization server
// metadata claims a company's issuer (RFC 8414 §3.3: the issuer must be the
// one the URL was made from, its origin) is refused: it never sees the
// registration the client keeps for that issuer (its client id, its secret).
func TestFallbackClaimsAnotherIssuer(t *testing.T) {
	company := newTestAS(t)
	store := &oauth.MemoryStore{}
	const redirect = "http://127.0.0.1:9/callback"
	if err := store.SaveRegistration(&oauth.Registration{Issuer: company.issuer, ClientID: "company-client", ClientSecret: "company-secret",
		AuthMethod: "client_secret_basic", RedirectURI: redirect}); err != nil {
		t.Fatal(err)
	}
	var rec recorder
	var hostile *httptest.Server
	hostile = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.record(r)
		switch r.URL.Path {
		case "/.well-known/oauth-authorization-server":
			writeJSON(w, 200, map[string]any{"issuer": company.issuer, "authorization_endpoint": hostile.URL + "/authorize",
				"token_endpoint": hostile.URL + "/token", "code_challenge_methods_supported": []string{"S256"}})
		case "/authorize":
			q := r.URL.Query()
			http.Redirect(w, r, q.Get("redirect_uri")+"?"+url.Values{"code": {"c"}, "state": {q.Get("state")}}.Encode(), http.StatusFound)
		case "/token":
			writeJSON(w, 200, map[string]any{"access_token": "t", "token_type": "Bearer"})
		case "/mcp":
			w.Header().Set("WWW-Authenticate", "Bearer")
			w.WriteHeader(http.StatusUnauthorized)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(hostile.Close)
	s := oauth.NewSession(hostile.URL+"/mcp", &oauth.ClientOptions{Store: store, Authorize: oauth.Headless(nil, redirect)})
	err := request(t, hostile.URL+"/mcp", s)
	if err == nil || !strings.Contains(err.Error(), "RFC 8414") {
		t.Errorf("err %v; want the metadata refused (RFC 8414)", err)
	}
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("company-client:company-secret"))
	if got := rec.contains("company-client", "company-secret", basic); len(got) > 0 {
		t.Fatalf("the hostile server got the company's registration: %q", got)
	}
}

// A client's secret goes to the token endpoint of the issuer it is
// registered at (ClientIssuer), read from that issuer's own metadata, and
// nowhere else: not to an upstream that answers every request 401 without
// metadata (whose guessed <origin>/token got "Basic gw:s3cret"), not to an
// authorization server a server's metadata names instead. A secret without
// its issuer is a mistake of the options, refused before any request.
func TestClientSecretStaysWithItsIssuer(t *testing.T) {
	op := oauthtest.Start(t)
	var rec recorder
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.record(r)
		if r.URL.Path == "/mcp" && strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") {
			writeJSON(w, 200, map[string]string{"ok": "yes"})
			return
		}
		if r.Method == http.MethodPost {
			w.Header().Set("WWW-Authenticate", "Bearer")
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(upstream.Close)
	secret := oauthtest.Secret("gateway")
	leaked := func(t *testing.T) {
		t.Helper()
		basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("gateway:"+secret))
		if got := rec.contains(secret, basic, "Basic "); len(got) > 0 {
			t.Fatalf("the upstream got the client's credentials: %q", got)
		}
	}

	t.Run("no issuer", func(t *testing.T) {
		s := oauth.NewSession(upstream.URL+"/mcp", &oauth.ClientOptions{Machine: true, ClientID: "gateway", ClientSecret: secret})
		if err := request(t, upstream.URL+"/mcp", s); err == nil || !strings.Contains(err.Error(), "ClientIssuer") {
			t.Errorf("err %v; want the options refused", err)
		}
		leaked(t)
	})
	t.Run("the operator's issuer", func(t *testing.T) {
		// The upstream names no authorization server: the operator's is it.
		tokens := op.Requests("/oauth/token")
		s := oauth.NewSession(upstream.URL+"/mcp", &oauth.ClientOptions{Machine: true, ClientID: "gateway", ClientSecret: secret, ClientIssuer: op.Issuer})
		if err := request(t, upstream.URL+"/mcp", s); err != nil {
			t.Fatalf("with the issuer named: %v", err)
		}
		if op.Requests("/oauth/token") != tokens+1 {
			t.Errorf("%d token requests at the operator's issuer; want 1", op.Requests("/oauth/token")-tokens)
		}
		leaked(t)
	})
	t.Run("a server naming another authorization server", func(t *testing.T) {
		other := newTestAS(t)
		for _, o := range []oauth.ClientOptions{
			{Machine: true, ClientID: "gateway", ClientSecret: secret, ClientIssuer: op.Issuer},
			{ClientID: "gateway", ClientSecret: secret, ClientIssuer: op.Issuer, Authorize: noLogin(t)},
		} {
			s := oauth.NewSession(other.mcpURL(), &o)
			if err := request(t, other.mcpURL(), s); err == nil || !strings.Contains(err.Error(), "registered at") {
				t.Errorf("machine %v: err %v; want the server's authorization server refused", o.Machine, err)
			}
		}
		if au, reg, _ := other.counts(); au+reg+other.tokens > 0 {
			t.Errorf("the other authorization server saw %d authorizations, %d registrations, %d token requests", au, reg, other.tokens)
		}
	})
}

// An authorization server's endpoints and issuer are https URLs (http to a
// loopback host) of printable ASCII, or nothing is done with them: an
// authorization endpoint of another scheme (the system's opener would run
// its handler: CVE-2025-6514's class), with an escape sequence for the
// terminal, with user information, or a token or registration endpoint of
// plain http off this machine, is refused before the browser is opened or a
// request is sent.
func TestEndpointsRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		meta map[string]any
	}{
		{"file:", map[string]any{"authorization_endpoint": "file:///etc/passwd"}},
		{"javascript:", map[string]any{"authorization_endpoint": "javascript:alert(1)//https://sso.example.com/"}},
		{"search-ms:", map[string]any{"authorization_endpoint": `search-ms:query=x&crumb=location:\\evil.example\share`}},
		{"an escape sequence", map[string]any{"authorization_endpoint": "https://sso.example.com/\x1b]8;;https://evil.example\x07auth"}},
		{"a C1 control", map[string]any{"authorization_endpoint": "https://sso.example.com/\u009b2Jauth"}},
		{"a bidirectional override", map[string]any{"authorization_endpoint": "https://sso.example.com/\u202eauth"}},
		{"user information", map[string]any{"authorization_endpoint": "https://sso.example.com@evil.example/authorize"}},
		{"a plain http token endpoint", map[string]any{"token_endpoint": "http://sso.example.com/token"}},
		{"a plain http registration endpoint", map[string]any{"registration_endpoint": "http://sso.example.com/register"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newTestAS(t)
			a.meta = tc.meta
			var told bytes.Buffer
			opened := 0
			authorize := oauth.Loopback(func(string) error { opened++; return nil }, &told)
			// (A login that got as far as the browser waits for it 5 s.)
			c, _ := a.client(&oauth.ClientOptions{Authorize: authorize, LoginTimeout: 5 * time.Second})
			if _, err := a.get(t, c, ""); err == nil || !strings.Contains(err.Error(), "refused") {
				t.Errorf("err %v; want the endpoint refused", err)
			} else if strings.ContainsFunc(err.Error(), func(r rune) bool { return r < ' ' || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == '\u202e' }) {
				t.Errorf("the error %q carries control characters", err)
			}
			if au, reg, _ := a.counts(); opened+told.Len()+au+reg+a.tokens > 0 {
				t.Errorf("opened %d, told %q, %d authorizations, %d registrations, %d token requests; want nothing", opened, told.String(), au, reg, a.tokens)
			}
		})
	}
	t.Run("an issuer of plain http", func(t *testing.T) {
		a := newTestAS(t)
		a.issuer = "http://sso.example.com" // what the resource's metadata names
		c, _ := a.client(nil)
		if _, err := a.get(t, c, ""); err == nil || !strings.Contains(err.Error(), "plain http") {
			t.Errorf("err %v; want the issuer refused", err)
		}
	})
	t.Run("the browser", func(t *testing.T) {
		for _, u := range []string{"file:///etc/passwd", "search-ms:query=x", "-https://x", "https://x/\x1b[2J"} {
			if err := oauth.OpenBrowser(u); err == nil || !strings.Contains(err.Error(), "not an http(s) URL") {
				t.Errorf("OpenBrowser(%q): %v; want it refused", u, err)
			}
		}
	})
}

// What an authorization server says in an error reaches the terminal with
// its control characters replaced.
func TestServerTextPrintable(t *testing.T) {
	a := newTestAS(t)
	a.tokenError = "bad\x1b]0;pwned\x07 \x1b[2J\u009b31m\u202eevil"
	c, _ := a.client(nil)
	_, err := a.get(t, c, "")
	if err == nil || !strings.Contains(err.Error(), "bad") {
		t.Fatalf("err %v; want the token endpoint's error", err)
	}
	if strings.ContainsFunc(err.Error(), func(r rune) bool { return r < ' ' || (r >= 0x7f && r < 0xa0) || r == '\u202e' }) {
		t.Fatalf("the error %q carries control characters", err)
	}
}

// The loopback listener answers only the redirect of the login under way: a
// request with another state, or none (a page the browser visits meanwhile
// may send one, with an error to end the login), is answered 400 and the
// login goes on, to end with the authorization server's redirect.
func TestLoopbackIgnoresOtherState(t *testing.T) {
	var answers []int
	get := func(u string) {
		resp, err := http.Get(u)
		if err != nil {
			t.Errorf("GET %s: %v", u, err)
			return
		}
		resp.Body.Close()
		answers = append(answers, resp.StatusCode)
	}
	var redirect string
	open := func(string) error {
		get(redirect + "?code=forged&state=guessed")
		get(redirect + "?error=access_denied")
		get(redirect + "?code=good&state=the-state")
		return nil
	}
	q, err := oauth.Loopback(open, nil)(t.Context(), "", func(r string) (string, error) {
		redirect = r
		return "https://sso.example.com/authorize?" + url.Values{"state": {"the-state"}, "redirect_uri": {r}}.Encode(), nil
	})
	if err != nil || q.Get("code") != "good" {
		t.Fatalf("the login's redirect: %v %v; want code good", q, err)
	}
	if len(answers) != 3 || answers[0] != 400 || answers[1] != 400 || answers[2] != 200 {
		t.Fatalf("answers %v; want 400, 400, 200", answers)
	}
}

// lockWatch is a MemoryStore that tells (on waiting) of a Lock of a key
// another holds.
type lockWatch struct {
	*oauth.MemoryStore
	mu      sync.Mutex
	held    map[string]bool
	waiting chan string
}

func (l *lockWatch) Lock(ctx context.Context, key string) (func(), error) {
	l.mu.Lock()
	if l.held[key] {
		select {
		case l.waiting <- key:
		default:
		}
	}
	l.mu.Unlock()
	unlock, err := l.MemoryStore.Lock(ctx, key)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.held[key] = true
	l.mu.Unlock()
	return func() {
		l.mu.Lock()
		delete(l.held, key)
		l.mu.Unlock()
		unlock()
	}, nil
}

// Two sessions of one resource through two URLs (https:// and wss://) hold
// one grant about to expire and renew it at once, against an authorization
// server that rotates refresh tokens: one refreshes, the other takes its
// grant; the grant stored is the winner's, its refresh token good. (With a
// lock per URL, both spent the refresh token; the second was refused and
// deleted the grant the first had just stored.)
func TestRefreshRaceAcrossURLs(t *testing.T) {
	var mu sync.Mutex
	valid := map[string]bool{"rt-0": true}
	refreshes := 0
	arrived := make(chan struct{}, 2)
	release := make(chan struct{})
	var as *httptest.Server
	as = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/.well-known/oauth-authorization-server":
			writeJSON(w, 200, map[string]any{"issuer": as.URL, "authorization_endpoint": as.URL + "/authorize", "token_endpoint": as.URL + "/token",
				"code_challenge_methods_supported": []string{"S256"}})
		case "/token":
			_ = r.ParseForm()
			mu.Lock()
			refreshes++
			first := refreshes == 1
			mu.Unlock()
			arrived <- struct{}{}
			if first {
				<-release
			}
			mu.Lock()
			rt := r.PostForm.Get("refresh_token")
			ok := valid[rt]
			delete(valid, rt) // rotated: spent
			next := "rt-" + rt + "+"
			if ok {
				valid[next] = true
			}
			mu.Unlock()
			if !ok {
				writeJSON(w, 400, map[string]string{"error": "invalid_grant"})
				return
			}
			writeJSON(w, 200, map[string]any{"access_token": "at-" + next, "token_type": "Bearer", "expires_in": 3600, "refresh_token": next})
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(as.Close)
	const resource = "https://mcp.example.test/mcp"
	store := &lockWatch{MemoryStore: &oauth.MemoryStore{}, held: map[string]bool{}, waiting: make(chan string, 1)}
	if err := store.SaveGrant(&oauth.Grant{Issuer: as.URL, Resource: resource, ClientID: "c", AccessToken: "at-0", RefreshToken: "rt-0", Expiry: time.Now()}); err != nil {
		t.Fatal(err)
	}
	urls := []string{resource, "wss://mcp.example.test/mcp"}
	for _, u := range urls {
		if err := store.SaveServer(&oauth.Server{URL: u, Issuer: as.URL, Resource: resource}); err != nil {
			t.Fatal(err)
		}
	}
	tokens := make(chan string, 2)
	var wg sync.WaitGroup
	renew := func(u string) {
		wg.Go(func() {
			tok, err := oauth.NewSession(u, &oauth.ClientOptions{Store: store, Authorize: noLogin(t)}).Token(t.Context())
			if err != nil {
				t.Errorf("%s: %v", u, err)
			}
			tokens <- tok
		})
	}
	renew(urls[0])
	<-arrived // the first refresh is at the server, held there
	renew(urls[1])
	select {
	case <-arrived: // the second session spends the refresh token too
	case <-store.waiting: // the second session waits for the grant's lock
	}
	close(release)
	wg.Wait()
	close(tokens)
	for tok := range tokens {
		if tok == "" || tok == "at-0" {
			t.Errorf("a session got %q; want the refreshed token", tok)
		}
	}
	g, _ := store.Grant(as.URL, resource)
	mu.Lock()
	defer mu.Unlock()
	if g == nil || !valid[g.RefreshToken] {
		t.Fatalf("the grant stored: %+v; want the winner's, its refresh token good (good: %v)", g, valid)
	}
	if refreshes != 1 {
		t.Errorf("%d refreshes; want 1", refreshes)
	}
}

// A login a request started ends when the request is cancelled (Ctrl-C, the
// client closing): the request fails at once with the cancellation, not
// after LoginTimeout.
func TestLoginEndsWithItsRequest(t *testing.T) {
	a := newTestAS(t)
	started := make(chan struct{})
	c, _ := a.client(&oauth.ClientOptions{Authorize: func(ctx context.Context, _ string, start func(string) (string, error)) (url.Values, error) {
		if _, err := start("http://127.0.0.1:9/callback"); err != nil {
			return nil, err
		}
		close(started)
		<-ctx.Done()
		return nil, context.Cause(ctx)
	}})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, a.mcpURL(), strings.NewReader(`{}`))
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	<-started
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err %v; want the cancellation", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the request still waits on its login 10 s after it was cancelled")
	}
}
