// Package oauthtest runs a real OpenID provider in the test process: the
// example OP of github.com/zitadel/oidc (its storage, login and endpoints),
// on loopback, adapted to issue what an MCP resource server accepts: access
// tokens as JWTs (or opaque, for introspection) whose audience is the RFC 8707
// resource of the token request, with their scopes in a scope claim, from
// service users by the client credentials grant, and to people by the
// authorization code flow (with PKCE and refresh tokens) of the public client
// CodeClient, logged in headless (Login, Browse); its signing key can be
// rotated, its token lifetime shifted, and it can be stopped.
package oauthtest

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/google/uuid"
	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// Service users: the client credentials of each principal the tests use,
// their tokens JWTs unless named opaque (a gateway's own credentials:
// gateway).
var serviceUsers = map[string]string{"alice": "alice-secret", "bob": "bob-secret", "opaque": "opaque-secret", "gateway": "gateway-secret"}

// Secret returns the client secret of a service user.
func Secret(user string) string { return serviceUsers[user] }

// OP is a running provider.
type OP struct {
	Issuer   string
	st       *opStorage
	srv      *http.Server
	ln       net.Listener
	mu       sync.Mutex     // guards requests
	requests map[string]int // requests served, by path
}

// Requests returns the number of requests the provider served at path.
func (o *OP) Requests(path string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.requests[path]
}

// Start starts a provider on loopback; resources are the resource URIs that
// may introspect its opaque tokens (each a confidential client whose id is
// the URI, secret IntrospectionSecret). It stops when t ends.
func Start(t testing.TB, resources ...string) *OP {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	issuer := "http://" + ln.Addr().String()
	clients := map[string]*storage.Client{}
	for _, r := range resources {
		clients[r] = storage.WebClient(r, IntrospectionSecret)
	}
	// Any loopback port with this path (RFC 8252).
	clients[CodeClient] = storage.NativeClient(CodeClient, "http://localhost/callback")
	base := storage.NewStorageWithClients(storage.NewUserStore(issuer), clients)
	st := &opStorage{Storage: base, issued: map[string]issued{}, resByReq: map[string]string{}, resByRT: map[string]string{}}
	st.rotateLocked()
	// The example logs every request to the process's default logger.
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
	router := exampleop.SetupServer(issuer, st, nil, false)
	o := &OP{Issuer: issuer, st: st, ln: ln, requests: map[string]int{}}
	// The RFC 8707 resource of a token request becomes its tokens' audience.
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.mu.Lock()
		o.requests[r.URL.Path]++
		o.mu.Unlock()
		var res string
		switch {
		case r.URL.Path == "/oauth/token" && r.Method == http.MethodPost:
			_ = r.ParseForm()
			res = r.PostForm.Get("resource")
		case r.URL.Path == "/auth":
			res = r.URL.Query().Get("resource")
		}
		if res != "" {
			r = r.WithContext(context.WithValue(r.Context(), resourceKey{}, res))
		}
		router.ServeHTTP(w, r)
	})
	o.srv = &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = o.srv.Serve(ln) }()
	t.Cleanup(o.Stop)
	return o
}

// IntrospectionSecret is the secret of the introspecting clients (Start).
const IntrospectionSecret = "introspection-secret"

// Stop stops the provider (its keys and introspection become unreachable).
func (o *OP) Stop() { _ = o.srv.Close() }

// Token returns an access token for user (a service user: alice, bob,
// opaque) and resource with scopes, by the client credentials grant, as a
// client would get it.
func (o *OP) Token(t testing.TB, user, resource string, scopes ...string) string {
	t.Helper()
	form := url.Values{"grant_type": {"client_credentials"}, "resource": {resource}, "scope": {strings.Join(scopes, " ")}}
	req, _ := http.NewRequest(http.MethodPost, o.Issuer+"/oauth/token", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(user, serviceUsers[user])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &tok) != nil || tok.AccessToken == "" {
		t.Fatalf("token for %s: %s %s", user, resp.Status, b)
	}
	return tok.AccessToken
}

// Rotate makes a new signing key the one tokens are signed with from now on;
// the key set keeps the old ones.
func (o *OP) Rotate() {
	o.st.mu.Lock()
	defer o.st.mu.Unlock()
	o.st.rotateLocked()
}

// ShiftExpiry moves the expiry of the tokens issued from now on by d
// (negative: issued expired).
func (o *OP) ShiftExpiry(d time.Duration) {
	o.st.mu.Lock()
	defer o.st.mu.Unlock()
	o.st.shift = d
}

type resourceKey struct{}

// opStorage is the example storage with what an MCP resource server needs.
type opStorage struct {
	*storage.Storage

	mu       sync.Mutex
	keys     []*signingKey // the last signs
	shift    time.Duration
	issued   map[string]issued // token id -> what it was issued as
	resByReq map[string]string // auth request id -> the resource it named
	resByRT  map[string]string // refresh token -> the resource of its grant
}

// issued is what an access token was issued as, for its introspection.
type issued struct {
	subject string
	aud     []string
	scopes  []string
	expiry  time.Time
}

type signingKey struct {
	id  string
	key *rsa.PrivateKey
}

func (k *signingKey) SignatureAlgorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k *signingKey) Key() any                                    { return k.key }
func (k *signingKey) ID() string                                  { return k.id }

type publicKey struct{ k *signingKey }

func (p publicKey) ID() string                         { return p.k.id }
func (p publicKey) Algorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (p publicKey) Use() string                        { return "sig" }
func (p publicKey) Key() any                           { return &p.k.key.PublicKey }

func (s *opStorage) rotateLocked() {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	s.keys = append(s.keys, &signingKey{id: uuid.NewString(), key: key})
}

func (s *opStorage) SigningKey(context.Context) (op.SigningKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.keys[len(s.keys)-1], nil
}

func (s *opStorage) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	return []jose.SignatureAlgorithm{jose.RS256}, nil
}

func (s *opStorage) KeySet(context.Context) ([]op.Key, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]op.Key, 0, len(s.keys))
	for _, k := range s.keys {
		out = append(out, publicKey{k})
	}
	return out, nil
}

// serviceClient is a service user as a client of the client credentials
// grant: JWT access tokens (or opaque ones), any scope.
type serviceClient struct {
	op.Client
	jwt bool
}

func (c serviceClient) GrantTypes() []oidc.GrantType {
	return []oidc.GrantType{oidc.GrantTypeClientCredentials}
}
func (c serviceClient) AccessTokenType() op.AccessTokenType {
	if c.jwt {
		return op.AccessTokenTypeJWT
	}
	return op.AccessTokenTypeBearer
}
func (c serviceClient) IsScopeAllowed(string) bool { return true }
func (c serviceClient) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}

func (s *opStorage) ClientCredentials(_ context.Context, id, secret string) (op.Client, error) {
	if want, ok := serviceUsers[id]; !ok || want != secret {
		return nil, oidc.ErrInvalidClient()
	}
	return serviceClient{Client: storage.WebClient(id, secret), jwt: id != "opaque"}, nil
}

func (s *opStorage) ClientCredentialsTokenRequest(ctx context.Context, id string, scopes []string) (op.TokenRequest, error) {
	res, _ := ctx.Value(resourceKey{}).(string)
	return &oidc.JWTTokenRequest{Subject: id, Audience: []string{res}, Scopes: scopes}, nil
}

func (s *opStorage) CreateAccessToken(ctx context.Context, r op.TokenRequest) (string, time.Time, error) {
	inner, aud := unwrap(r)
	id, exp, err := s.Storage.CreateAccessToken(ctx, inner)
	s.mu.Lock()
	defer s.mu.Unlock()
	exp = exp.Add(s.shift)
	s.issued[id] = issued{subject: r.GetSubject(), aud: aud, scopes: r.GetScopes(), expiry: exp}
	return id, exp, err
}

func (s *opStorage) GetPrivateClaimsFromScopes(ctx context.Context, user, client string, scopes []string) (map[string]any, error) {
	claims, err := s.Storage.GetPrivateClaimsFromScopes(ctx, user, client, scopes)
	if claims == nil {
		claims = map[string]any{}
	}
	claims["scope"] = strings.Join(scopes, " ")
	return claims, err
}

// SetIntrospectionFromToken answers the resource a token was issued for (an
// introspecting client whose id is that resource), with its audience.
func (s *opStorage) SetIntrospectionFromToken(_ context.Context, in *oidc.IntrospectionResponse, tokenID, subject, clientID string) error {
	s.mu.Lock()
	tok, ok := s.issued[tokenID]
	s.mu.Unlock()
	switch {
	case !ok:
		return errors.New("unknown token")
	case time.Now().After(tok.expiry):
		return errors.New("expired token")
	case !slices.Contains(tok.aud, clientID):
		return errors.New("the token was not issued for this client")
	}
	in.Subject, in.Audience, in.Scope = subject, tok.aud, tok.scopes
	in.Expiration = oidc.FromTime(tok.expiry)
	return nil
}

// CodeClient is the public client of the authorization code flow (PKCE, any
// loopback redirect with the path /callback): JWT access tokens for the
// resource the authorization request named, any scope.
const CodeClient = "mcp-client"

// codeClient is CodeClient as the provider sees it.
type codeClient struct{ op.Client }

func (codeClient) AccessTokenType() op.AccessTokenType { return op.AccessTokenTypeJWT }
func (codeClient) IsScopeAllowed(string) bool          { return true }
func (codeClient) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}

func (s *opStorage) GetClientByClientID(ctx context.Context, id string) (op.Client, error) {
	c, err := s.Storage.GetClientByClientID(ctx, id)
	if err == nil && id == CodeClient {
		return codeClient{c}, nil
	}
	return c, err
}

func (s *opStorage) CreateAuthRequest(ctx context.Context, r *oidc.AuthRequest, userID string) (op.AuthRequest, error) {
	ar, err := s.Storage.CreateAuthRequest(ctx, r, userID)
	if res, _ := ctx.Value(resourceKey{}).(string); err == nil && res != "" {
		s.mu.Lock()
		s.resByReq[ar.GetID()] = res
		s.mu.Unlock()
	}
	return ar, err
}

// audAuthRequest is an authorization request whose tokens are for the
// resource it named.
type audAuthRequest struct {
	*storage.AuthRequest
	aud []string
}

func (a *audAuthRequest) GetAudience() []string { return a.aud }

type audRefreshRequest struct {
	op.RefreshTokenRequest
	aud []string
}

func (a *audRefreshRequest) GetAudience() []string { return a.aud }

func (s *opStorage) AuthRequestByCode(ctx context.Context, code string) (op.AuthRequest, error) {
	ar, err := s.Storage.AuthRequestByCode(ctx, code)
	if err != nil {
		return ar, err
	}
	s.mu.Lock()
	res := s.resByReq[ar.GetID()]
	s.mu.Unlock()
	if sar, ok := ar.(*storage.AuthRequest); ok && res != "" {
		return &audAuthRequest{sar, []string{res}}, nil
	}
	return ar, nil
}

func (s *opStorage) TokenRequestByRefreshToken(ctx context.Context, rt string) (op.RefreshTokenRequest, error) {
	r, err := s.Storage.TokenRequestByRefreshToken(ctx, rt)
	if err != nil {
		return r, err
	}
	s.mu.Lock()
	res := s.resByRT[rt]
	s.mu.Unlock()
	if res != "" {
		return &audRefreshRequest{r, []string{res}}, nil
	}
	return r, nil
}

// unwrap is the request the example storage knows, and the audience.
func unwrap(r op.TokenRequest) (op.TokenRequest, []string) {
	switch w := r.(type) {
	case *audAuthRequest:
		return w.AuthRequest, w.aud
	case *audRefreshRequest:
		return w.RefreshTokenRequest, w.aud
	}
	return r, r.GetAudience()
}

func (s *opStorage) CreateAccessAndRefreshTokens(ctx context.Context, r op.TokenRequest, cur string) (string, string, time.Time, error) {
	inner, aud := unwrap(r)
	id, rt, exp, err := s.Storage.CreateAccessAndRefreshTokens(ctx, inner, cur)
	if err != nil {
		return id, rt, exp, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	exp = exp.Add(s.shift)
	s.issued[id] = issued{subject: r.GetSubject(), aud: aud, scopes: r.GetScopes(), expiry: exp}
	if len(aud) > 0 {
		s.resByRT[rt] = aud[0]
	}
	return id, rt, exp, nil
}

// The demo users of the example storage (password Password).
const (
	Password = "verysecure"
	User2    = "test-user2"
)

// User is the first demo user's name (test-user@ and the issuer's host).
func (o *OP) User() string {
	u, _ := url.Parse(o.Issuer)
	return "test-user@" + u.Hostname()
}

// Browse is a person with a browser at the authorization URL authURL of a
// provider started by Start (in this process or another): it follows the
// provider's redirects to its login page, logs in as user, and follows the
// redirects back until one leaves for a /callback elsewhere, which it returns
// without following.
func Browse(ctx context.Context, authURL, user string) (*url.URL, error) {
	au, err := url.Parse(authURL)
	if err != nil {
		return nil, err
	}
	issuer := au.Scheme + "://" + au.Host
	jar, _ := cookiejar.New(nil)
	var back *url.URL
	c := &http.Client{Jar: jar, Timeout: 30 * time.Second, CheckRedirect: func(r *http.Request, via []*http.Request) error {
		if r.URL.Path == "/callback" && r.URL.Host != au.Host {
			back = r.URL
			return http.ErrUseLastResponse
		}
		if len(via) > 10 {
			return errors.New("too many redirects")
		}
		return nil
	}}
	get := func(method, u string, form url.Values) (*http.Response, error) {
		var body io.Reader
		if form != nil {
			body = strings.NewReader(form.Encode())
		}
		req, err := http.NewRequestWithContext(ctx, method, u, body)
		if err != nil {
			return nil, err
		}
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		resp, err := c.Do(req)
		if err != nil {
			return nil, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp, nil
	}
	resp, err := get(http.MethodGet, authURL, nil)
	if err != nil {
		return nil, err
	}
	if back != nil {
		return back, nil
	}
	id := resp.Request.URL.Query().Get("authRequestID")
	if id == "" {
		return nil, fmt.Errorf("the authorization URL led to %s (%s), not the login page", resp.Request.URL, resp.Status)
	}
	if _, err := get(http.MethodPost, issuer+"/login/username", url.Values{"id": {id}, "username": {user}, "password": {Password}}); err != nil {
		return nil, err
	}
	if back == nil {
		return nil, errors.New("the login did not come back to a /callback")
	}
	return back, nil
}

// Login is an oauth.Authorizer that logs in as user with Browse (the
// redirect to an unused loopback port, as nothing needs to listen there).
func (o *OP) Login(user string) func(context.Context, string, func(string) (string, error)) (url.Values, error) {
	return func(ctx context.Context, _ string, start func(string) (string, error)) (url.Values, error) {
		authURL, err := start("http://127.0.0.1:9/callback")
		if err != nil {
			return nil, err
		}
		back, err := Browse(ctx, authURL, user)
		if err != nil {
			return nil, err
		}
		return back.Query(), nil
	}
}
