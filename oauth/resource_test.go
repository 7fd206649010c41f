package oauth_test

import (
	"context"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"go.uber.org/goleak"

	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/mcp/e2etest"
	"github.com/mcp-resume/mcp-resume/oauth"
	"github.com/mcp-resume/mcp-resume/servers/demo"
	"github.com/mcp-resume/mcp-resume/testkit/oauthtest"
	"github.com/mcp-resume/mcp-resume/testkit/poll"
	"github.com/mcp-resume/mcp-resume/transport"
	httptransport "github.com/mcp-resume/mcp-resume/transport/http"
	"github.com/mcp-resume/mcp-resume/transport/ws"
)

func TestMain(m *testing.M) {
	// The provider's HTTP client keeps idle connections a while after a test.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"), goleak.IgnoreTopFunction("testkit/poll.runtime_pollWait"))
}

// resource is the MCP endpoint's canonical URI as its clients reach it (the
// server behind a proxy: not its listen address).
const resource = "https://mcp.example.test/mcp"

// rig is a server of the demo tools behind a ResourceServer, on Streamable
// HTTP (/mcp) and WebSocket (/ws), with its metadata at the well-known paths.
type rig struct {
	rs      *oauth.ResourceServer
	srv     *httptest.Server
	mu      sync.Mutex
	refused map[string]int
}

func newRig(t *testing.T, opts oauth.Options) *rig { return newRigAt(t, opts, false) }

// newRigAt is newRig with the server's own URL as its resource when local
// (its clients reach it at its listen address).
func newRigAt(t *testing.T, opts oauth.Options, local bool) *rig {
	t.Helper()
	r := &rig{refused: map[string]int{}}
	srv := httptest.NewUnstartedServer(nil)
	opts.Resource = resource
	if local {
		opts.Resource = "http://" + srv.Listener.Addr().String() + "/mcp"
	}
	opts.OnRefused = func(reason string) {
		r.mu.Lock()
		r.refused[reason]++
		r.mu.Unlock()
	}
	rs, err := oauth.New(&opts)
	if err != nil {
		t.Fatal(err)
	}
	r.rs = rs
	core, err := mcp.New(demo.Server("test"), nil)
	if err != nil {
		t.Fatal(err)
	}
	h := httptransport.NewHandler(core, &httptransport.Options{Auth: rs})
	wh := ws.NewHandler(core, &ws.AcceptOptions{Auth: rs})
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	mux.Handle("/ws", wh)
	for _, p := range rs.MetadataPaths() {
		mux.Handle(p, rs.MetadataHandler())
	}
	srv.Config.Handler = mux
	srv.Start()
	r.srv = srv
	t.Cleanup(func() {
		h.Close()
		wh.Close()
		r.srv.Close()
		core.Close()
	})
	return r
}

// post sends an initialize with token and returns the answer.
func (r *rig) post(t *testing.T, token string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, r.srv.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := r.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

func (r *rig) dialHTTP(t testing.TB, token string) transport.Conn {
	c := httptransport.Dial(r.srv.URL+"/mcp", &httptransport.ClientOptions{Client: &http.Client{Transport: transport.BearerTransport(token, nil)}})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func (r *rig) dialWS(t testing.TB, token string) (transport.Conn, error) {
	c, err := ws.Dial(context.Background(), "ws"+strings.TrimPrefix(r.srv.URL, "http")+"/ws", &ws.DialOptions{Header: http.Header{"Authorization": {"Bearer " + token}}})
	if err == nil {
		t.Cleanup(func() { _ = c.Close() })
	}
	return c, err
}

// A good JWT from a real provider works over Streamable HTTP (both eras) and
// WebSocket; the metadata names the resource, its authorization server and
// its scopes; a request without a token gets 401 and a challenge naming the
// metadata and the scope.
func TestGoodToken(t *testing.T) {
	op := oauthtest.Start(t)
	r := newRig(t, oauth.Options{Issuers: []string{op.Issuer}, Scopes: []string{"mcp:read"}, ToolScopes: map[string][]string{"countdown": {"mcp:write"}}})
	tok := op.Token(t, "alice", resource, "mcp:read", "mcp:write")

	c := e2etest.NewClient(t, r.dialHTTP(t, tok))
	c.Initialize(`{}`)
	c.Send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`)
	if resp, _ := c.Response(`2`); e2etest.Text(resp) != "hi" {
		t.Fatalf("echo with a good token: %s", resp.Raw)
	}
	c.Modern(`3`, "tools/call", `"name":"countdown","arguments":{"seconds":0,"steps":1}`, `{}`)
	if resp, _ := c.Response(`3`); !strings.Contains(e2etest.Text(resp), "countdown done") {
		t.Fatalf("a 2026 call with a good token: %s", resp.Raw)
	}
	wc, err := r.dialWS(t, tok)
	if err != nil {
		t.Fatal(err)
	}
	w := e2etest.NewClient(t, wc)
	w.Initialize(`{}`)
	w.Send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"ws"}}}`)
	if resp, _ := w.Response(`2`); e2etest.Text(resp) != "ws" {
		t.Fatalf("echo over WebSocket: %s", resp.Raw)
	}

	resp, body := r.post(t, "")
	ch := resp.Header.Get("WWW-Authenticate")
	if resp.StatusCode != 401 || !strings.Contains(ch, `resource_metadata="https://mcp.example.test/.well-known/oauth-protected-resource/mcp"`) || !strings.Contains(ch, `scope="mcp:read"`) {
		t.Fatalf("no token: %s %q %s", resp.Status, ch, body)
	}
	for _, p := range r.rs.MetadataPaths() {
		resp, err := http.Get(r.srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		var meta struct {
			Resource             string   `json:"resource"`
			AuthorizationServers []string `json:"authorization_servers"`
			ScopesSupported      []string `json:"scopes_supported"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&meta)
		resp.Body.Close()
		if meta.Resource != resource || len(meta.AuthorizationServers) != 1 || meta.AuthorizationServers[0] != op.Issuer || strings.Join(meta.ScopesSupported, " ") != "mcp:read mcp:write" {
			t.Errorf("metadata at %s: %+v", p, meta)
		}
	}
}

// Each bad token gets 401 with its reason (and the challenge), and is
// counted by it: malformed, too long, expired, for another resource, forged,
// unsigned (alg none), signed with an HMAC keyed by the provider's public
// key, issued by a provider the server does not trust.
func TestBadTokens(t *testing.T) {
	op := oauthtest.Start(t)
	other := oauthtest.Start(t)
	r := newRig(t, oauth.Options{Issuers: []string{op.Issuer}})
	good := op.Token(t, "alice", resource)
	if resp, body := r.post(t, good); resp.StatusCode != 200 {
		t.Fatalf("good token: %s %s", resp.Status, body)
	}
	op.ShiftExpiry(-time.Hour)
	expired := op.Token(t, "alice", resource)
	op.ShiftExpiry(0)
	parts := strings.Split(good, ".")
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	forgedPayload := strings.Replace(string(payload), `"sub":"alice"`, `"sub":"bob"`, 1)
	forged := parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(forgedPayload)) + "." + parts[2]
	none := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + parts[1] + "."
	for _, tc := range []struct {
		name, token, reason string
	}{
		{"malformed", "garbage", string(oauth.ReasonMalformed)},
		{"too long", strings.Repeat("a", 9000), string(oauth.ReasonMalformed)},
		{"expired", expired, string(oauth.ReasonExpired)},
		{"another resource", op.Token(t, "alice", "https://other.example.test/mcp"), string(oauth.ReasonWrongAudience)},
		{"forged", forged, string(oauth.ReasonBadSignature)},
		{"alg none", none, string(oauth.ReasonMalformed)},
		{"hmac with the public key", hmacWithPublicKey(t, op, payload), string(oauth.ReasonMalformed)},
		{"untrusted issuer", other.Token(t, "alice", resource), string(oauth.ReasonUnknownIssuer)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := r.post(t, tc.token)
			if resp.StatusCode != 401 || !strings.Contains(body, `"reason":"`+tc.reason+`"`) || !strings.Contains(resp.Header.Get("WWW-Authenticate"), `error="invalid_token"`) {
				t.Errorf("%s: %s %q %s, want 401 %s", tc.name, resp.Status, resp.Header.Get("WWW-Authenticate"), body, tc.reason)
			}
			if _, err := r.dialWS(t, tc.token); err == nil || !strings.Contains(err.Error(), "401") {
				t.Errorf("%s over WebSocket: %v, want 401", tc.name, err)
			}
		})
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.refused[string(oauth.ReasonExpired)] != 2 || r.refused[string(oauth.ReasonBadSignature)] != 2 {
		t.Errorf("refusals counted %v", r.refused)
	}
}

// hmacWithPublicKey signs claims with HS256 keyed by the provider's public
// key (the classic algorithm confusion).
func hmacWithPublicKey(t *testing.T, op *oauthtest.OP, claims []byte) string {
	t.Helper()
	resp, err := http.Get(op.Issuer + "/keys")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ks jose.JSONWebKeySet
	if err := json.NewDecoder(resp.Body).Decode(&ks); err != nil || len(ks.Keys) == 0 {
		t.Fatalf("keys: %v", err)
	}
	pub := ks.Keys[0].Key.(*rsa.PublicKey)
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: pub.N.Bytes()}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", ks.Keys[0].KeyID))
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	_ = json.Unmarshal(claims, &c)
	tok, err := jwt.Signed(sig).Claims(c).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// A tool whose scope the token lacks is refused with 403 insufficient_scope
// naming every scope the call needs (step-up), over HTTP; over WebSocket with
// the same JSON-RPC error. A token with the scope calls it; a broader scope
// covers a narrower one.
func TestToolScopeStepUp(t *testing.T) {
	op := oauthtest.Start(t)
	r := newRig(t, oauth.Options{Issuers: []string{op.Issuer}, Scopes: []string{"mcp:read"}, ToolScopes: map[string][]string{"countdown": {"mcp:write"}}})
	read := op.Token(t, "alice", resource, "mcp:read")
	c := e2etest.NewClient(t, r.dialHTTP(t, read))
	c.Initialize(`{}`)
	req, _ := http.NewRequest(http.MethodPost, r.srv.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"countdown","arguments":{"seconds":0,"steps":1},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", "countdown")
	req.Header.Set("Authorization", "Bearer "+read)
	resp, err := r.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	ch := resp.Header.Get("WWW-Authenticate")
	if resp.StatusCode != 403 || !strings.Contains(ch, `error="insufficient_scope"`) || !strings.Contains(ch, `scope="mcp:read mcp:write"`) || !strings.Contains(string(b), `"insufficient_scope"`) {
		t.Fatalf("countdown with mcp:read: %s %q %s", resp.Status, ch, b)
	}
	c.Send(`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"echo","arguments":{"text":"ok"}}}`)
	if resp, _ := c.Response(`6`); e2etest.Text(resp) != "ok" {
		t.Fatalf("echo with mcp:read: %s", resp.Raw)
	}
	wc, err := r.dialWS(t, read)
	if err != nil {
		t.Fatal(err)
	}
	w := e2etest.NewClient(t, wc)
	w.Initialize(`{}`)
	w.Send(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"countdown","arguments":{"seconds":0,"steps":1}}}`)
	if resp, _ := w.Response(`7`); resp.Error == nil || resp.Error.Reason != oauth.ReasonScope {
		t.Fatalf("countdown over WebSocket with mcp:read: %s", resp.Raw)
	}
	for _, scopes := range [][]string{{"mcp:read", "mcp:write"}, {"mcp"}} {
		c := e2etest.NewClient(t, r.dialHTTP(t, op.Token(t, "alice", resource, scopes...)))
		c.Initialize(`{}`)
		c.Send(`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"countdown","arguments":{"seconds":0,"steps":1}}}`)
		if resp, _ := c.Response(`8`); !strings.Contains(e2etest.Text(resp), "countdown done") {
			t.Fatalf("countdown with %v: %s", scopes, resp.Raw)
		}
	}
}

// The principal is the token's issuer and subject: bob's token finds
// nothing of alice's (a resume is not_found).
func TestPrincipalBinding(t *testing.T) {
	op := oauthtest.Start(t)
	r := newRig(t, oauth.Options{Issuers: []string{op.Issuer}})
	alice := e2etest.NewClient(t, r.dialHTTP(t, op.Token(t, "alice", resource)))
	alice.Initialize(`{"resumableRequests":{}}`)
	alice.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"countdown","arguments":{"seconds":30,"steps":1}}}`)
	pol := e2etest.PolicyOf(t, alice.Next())
	bob := e2etest.NewClient(t, r.dialHTTP(t, op.Token(t, "bob", resource)))
	bob.Initialize(`{"resumableRequests":{}}`)
	if _, e := bob.GetStatus(`"s"`, `1`, pol.ResumeToken); e == nil || e.Reason != "not_found" {
		t.Fatalf("bob's getStatus of alice's request: %v, want not_found", e)
	}
	if st, e := alice.GetStatus(`"s"`, `1`, pol.ResumeToken); e != nil || st.Status != "processing" {
		t.Fatalf("alice's getStatus of her request: %+v %v", st, e)
	}
}

// A key rotation is followed: a token signed with the new key is accepted
// once the server fetched the keys again (it does, at most once a second,
// for a key id it does not know). With the provider gone, tokens of the keys
// it fetched keep working; a server that never fetched them fails closed:
// 503, authorization_unavailable.
func TestKeyRotationAndOutage(t *testing.T) {
	op := oauthtest.Start(t)
	r := newRig(t, oauth.Options{Issuers: []string{op.Issuer}})
	before := op.Token(t, "alice", resource)
	if resp, body := r.post(t, before); resp.StatusCode != 200 {
		t.Fatalf("before the rotation: %s %s", resp.Status, body)
	}
	op.Rotate()
	after := op.Token(t, "alice", resource)
	poll.Until(t, 10*time.Second, "the rotated key to be followed", func() bool {
		resp, _ := r.post(t, after)
		return resp.StatusCode == 200
	})
	op.Stop()
	if resp, body := r.post(t, after); resp.StatusCode != 200 {
		t.Fatalf("a known key with its provider away: %s %s", resp.Status, body)
	}
	fresh := newRig(t, oauth.Options{Issuers: []string{op.Issuer}})
	if resp, body := fresh.post(t, after); resp.StatusCode != 503 || !strings.Contains(body, string(oauth.ReasonUnavailable)) {
		t.Fatalf("keys never fetched, provider away: %s %s, want 503", resp.Status, body)
	}
}

// An opaque token is checked by introspection (the server authenticated to
// the provider); its answer is kept a while, so that the provider is asked
// once, not at every request; a provider away fails closed for a token not
// seen before.
func TestOpaqueTokenIntrospection(t *testing.T) {
	op := oauthtest.Start(t, resource)
	r := newRig(t, oauth.Options{Issuers: []string{op.Issuer}, IntrospectionClient: resource, IntrospectionSecret: oauthtest.IntrospectionSecret})
	tok := op.Token(t, "opaque", resource)
	if strings.Count(tok, ".") == 2 {
		t.Fatalf("the opaque user's token is a JWT")
	}
	c := e2etest.NewClient(t, r.dialHTTP(t, tok))
	c.Initialize(`{}`)
	c.Send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"opaque"}}}`)
	if resp, _ := c.Response(`2`); e2etest.Text(resp) != "opaque" {
		t.Fatalf("echo with an opaque token: %s", resp.Raw)
	}
	other := op.Token(t, "opaque", "https://other.example.test/mcp")
	if resp, body := r.post(t, other); resp.StatusCode != 401 {
		t.Fatalf("an opaque token of another resource: %s %s", resp.Status, body)
	}
	fresh := op.Token(t, "opaque", resource)
	op.Stop()
	if resp, body := r.post(t, tok); resp.StatusCode != 200 {
		t.Fatalf("a token introspected before, provider away: %s %s", resp.Status, body)
	}
	if resp, body := r.post(t, fresh); resp.StatusCode != 503 {
		t.Fatalf("a new opaque token, provider away: %s %s, want 503", resp.Status, body)
	}
}

// A flood of made-up opaque tokens from one address costs the provider a
// bounded number of introspections (a burst, then a rate): past it they are
// refused at once, 429 rate_limited; a token checked before is answered from
// what was kept; made-up key ids cost at most a key fetch a second.
func TestTokenFlood(t *testing.T) {
	op := oauthtest.Start(t, resource)
	r := newRig(t, oauth.Options{Issuers: []string{op.Issuer}, IntrospectionClient: resource, IntrospectionSecret: oauthtest.IntrospectionSecret})
	good := op.Token(t, "opaque", resource)
	if resp, body := r.post(t, good); resp.StatusCode != 200 {
		t.Fatalf("good token: %s %s", resp.Status, body)
	}
	limited := 0
	for i := range 100 {
		resp, _ := r.post(t, fmt.Sprintf("made-up-token-%d", i))
		if resp.StatusCode == http.StatusTooManyRequests {
			limited++
		}
	}
	if n := op.Requests("/oauth/introspect"); n > 30 || limited < 60 {
		t.Errorf("100 made-up tokens: %d introspections, %d refused as rate limited", n, limited)
	}
	if resp, body := r.post(t, good); resp.StatusCode != 200 {
		t.Fatalf("the owner's token during the flood: %s %s", resp.Status, body)
	}
	jwtGood := op.Token(t, "alice", resource)
	parts := strings.Split(jwtGood, ".")
	before := op.Requests("/keys")
	for i := range 50 {
		h := base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, `{"alg":"RS256","kid":"made-up-%d","typ":"JWT"}`, i))
		r.post(t, h+"."+parts[1]+"."+parts[2])
	}
	if n := op.Requests("/keys") - before; n > 3 {
		t.Errorf("50 made-up key ids within a moment: %d key fetches", n)
	}
}

// A token that expires while in use: the verdict kept for it ends at its
// expiry (with the skew), after which a request carrying it gets 401
// expired_token; a WebSocket opened with it is closed then (1008).
func TestTokenExpiresInUse(t *testing.T) {
	op := oauthtest.Start(t)
	r := newRig(t, oauth.Options{Issuers: []string{op.Issuer}, Skew: 30 * time.Second})
	var claims struct {
		Exp int64 `json:"exp"`
	}
	payload, _ := base64.RawURLEncoding.DecodeString(strings.Split(op.Token(t, "alice", resource), ".")[1])
	if err := json.Unmarshal(payload, &claims); err != nil {
		t.Fatal(err)
	}
	// Issued to expire 25 s ago: accepted for 5 s more (the skew is 30 s).
	op.ShiftExpiry(-time.Until(time.Unix(claims.Exp, 0)) - 25*time.Second)
	short := op.Token(t, "alice", resource)
	op.ShiftExpiry(0)
	payload, _ = base64.RawURLEncoding.DecodeString(strings.Split(short, ".")[1])
	if err := json.Unmarshal(payload, &claims); err != nil {
		t.Fatal(err)
	}
	until := time.Unix(claims.Exp, 0).Add(30 * time.Second) // accepted until then
	if resp, body := r.post(t, short); resp.StatusCode != 200 {
		t.Fatalf("the token before its expiry: %s %s", resp.Status, body)
	}
	wc, err := r.dialWS(t, short)
	if err != nil {
		t.Fatal(err)
	}
	if err := wc.Write(context.Background(), []byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)); err != nil {
		t.Fatal(err)
	}
	closed := make(chan error, 1)
	go func() {
		for {
			if _, err := wc.Read(context.Background()); err != nil {
				closed <- err
				return
			}
		}
	}()
	select {
	case err := <-closed:
		// The close frame is read as the end of the connection.
		if early := time.Until(until); err != io.EOF || early > time.Second {
			t.Errorf("the WebSocket ended with %v %v before its token's expiry; want io.EOF then", err, early)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the WebSocket is still open 20 s after its token expired")
	}
	poll.Until(t, 10*time.Second, "the token refused as expired", func() bool {
		resp, body := r.post(t, short)
		return resp.StatusCode == 401 && strings.Contains(body, string(oauth.ReasonExpired))
	})
}
