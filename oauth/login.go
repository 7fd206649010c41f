package oauth

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/oauth2"
)

// An Authorizer takes the user through an authorization endpoint: it picks
// the redirect URI (prev, the one the client was registered with, when it
// can), calls start with it for the authorization URL, sends the user there,
// and returns the query of the redirect that comes back.
type Authorizer func(ctx context.Context, prev string, start func(redirectURI string) (authURL string, err error)) (url.Values, error)

// ClientOptions configure the OAuth client of an MCP client.
type ClientOptions struct {
	// Store keeps the grants, registrations and servers. Default: a
	// MemoryStore.
	Store Store
	// Authorize takes the user through a login. Nil: a server that wants one
	// is an error (ErrLoginRequired).
	Authorize Authorizer
	// ClientID (and ClientSecret) name a client registered beforehand at the
	// authorization server ClientIssuer; AuthMethod is how it authenticates
	// at the token endpoint (default: client_secret_basic, or
	// client_secret_post when the server supports only that, with a secret;
	// none without). Without one, the client uses its Client ID Metadata
	// Document (ClientMetadataURL) where the server supports them, else
	// registers itself (RFC 7591).
	ClientID, ClientSecret, AuthMethod string
	ClientMetadataURL                  string
	// ClientIssuer is the issuer of the authorization server ClientID is
	// registered at, as the operator knows it (never as a server names it):
	// the client is used there only, with the endpoints of that issuer's own
	// metadata; a server whose metadata names other authorization servers is
	// refused, and one without metadata gets its tokens from it. Required
	// with ClientSecret, PrivateKey or Machine (a secret goes to no token
	// endpoint but this issuer's); without it, a public ClientID is used at
	// whichever authorization server a server names.
	ClientIssuer string
	// ClientName is the client_name of a registration. Default "mcp-resume".
	ClientName string
	// HTTPClient makes the requests to metadata, registration and token
	// endpoints. Default: one with a 30 s timeout.
	HTTPClient *http.Client
	// MaxStepUps bounds the logins for more scopes (403 insufficient_scope)
	// in a row without a request succeeding. Default 2.
	MaxStepUps int
	// Logger hears of logins and refreshes (never a token). Nil: none.
	Logger *zerolog.Logger
	// LoginTimeout bounds a login in the browser, whatever the request that
	// met the 401 allows. Default 5 minutes.
	LoginTimeout time.Duration

	// Machine, when set, makes the client a machine's: no person, no
	// browser; its tokens come from the client credentials grant (RFC 6749
	// §4.4) of ClientID, authenticated with ClientSecret or, when set,
	// PrivateKey (private_key_jwt, RFC 7523: a JWT signed with SigningAlg),
	// again whenever the server refuses the one held.
	Machine    bool
	PrivateKey any // a crypto.Signer (or what go-jose signs with)
	SigningAlg string
	// Scopes, when set, are the scopes a machine asks for, instead of those
	// the server's challenge or metadata name.
	Scopes []string
}

// ErrLoginRequired is the error of a request to a server that wants a login
// when the client has no Authorizer (and no token from an earlier login).
var ErrLoginRequired = errors.New("oauth: the server wants a login")

// Session is the OAuth client of one MCP server URL: the token its requests
// carry, renewed, and the logins that get it. Safe for concurrent use, through
// one lock that a refresh or a login holds to its end (a login in the browser
// up to ClientOptions.LoginTimeout): Token, Recover, Succeeded and Current
// called meanwhile wait for it, whatever their ctx.
type Session struct {
	url   string
	opts  ClientOptions
	store Store
	http  *http.Client
	log   zerolog.Logger

	invalid error // of the options: every request fails with it

	mu      sync.Mutex // guards the fields below
	grant   *Grant
	loaded  bool                   // the store was read for the grant
	fresh   string                 // a token from a login of this session no request has succeeded with
	stepUps int                    // logins for more scopes since a request succeeded
	metas   map[string]*asMetadata // by issuer
}

// NewSession returns the OAuth client of the MCP server at serverURL.
func NewSession(serverURL string, opts *ClientOptions) *Session {
	s := &Session{url: serverURL, log: zerolog.Nop(), metas: map[string]*asMetadata{}}
	if opts != nil {
		s.opts = *opts
	}
	if s.opts.Store == nil {
		s.opts.Store = &MemoryStore{}
	}
	if s.opts.HTTPClient == nil {
		s.opts.HTTPClient = newHTTPClient()
	}
	if s.opts.MaxStepUps <= 0 {
		s.opts.MaxStepUps = 2
	}
	if s.opts.ClientName == "" {
		s.opts.ClientName = "mcp-resume"
	}
	if s.opts.LoginTimeout <= 0 {
		s.opts.LoginTimeout = 5 * time.Minute
	}
	if s.opts.Logger != nil {
		s.log = *s.opts.Logger
	}
	s.store, s.http = s.opts.Store, s.opts.HTTPClient
	s.invalid = s.opts.check()
	return s
}

// check refuses options that would send a secret where it does not belong.
func (o *ClientOptions) check() error {
	if o.ClientIssuer != "" {
		if o.ClientID == "" {
			return errors.New("oauth: ClientIssuer is the issuer of ClientID, which is not given")
		}
		return CheckIssuer(o.ClientIssuer)
	}
	if o.ClientSecret != "" || o.PrivateKey != nil || o.Machine {
		return errors.New("oauth: a client with a secret or a key is bound to the issuer it is registered at: give it (ClientIssuer)")
	}
	return nil
}

// configured reports whether the client given (ClientID) logs in at issuer:
// the one it is registered at, or any for a public client given without it.
func (s *Session) configured(issuer string) bool {
	return s.opts.ClientID != "" && (s.opts.ClientIssuer == issuer || s.opts.ClientIssuer == "" && s.opts.ClientSecret == "" && s.opts.PrivateKey == nil)
}

// renewBefore is how long before its expiry a token is refreshed.
const renewBefore = 30 * time.Second

func expiring(g *Grant) bool {
	return !g.Expiry.IsZero() && time.Until(g.Expiry) < renewBefore
}

// Token returns the access token to send ("" when there is none yet: the
// request goes without, and its 401 starts a login), refreshing one about
// to expire.
func (s *Session) Token(ctx context.Context) (string, error) {
	if s.invalid != nil {
		return "", s.invalid
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.loaded {
		s.loaded = true
		if err := s.reloadLocked(); err != nil {
			return "", err
		}
	}
	if s.grant == nil {
		return "", nil
	}
	if expiring(s.grant) && s.grant.RefreshToken != "" {
		if err := s.renewLocked(ctx); err != nil {
			s.log.Warn().Err(err).Msg("oauth: refreshing the token failed; the server will say whether it still takes it")
		}
		if s.grant == nil { // the refresh token was refused: a login is due
			return "", nil
		}
	}
	return s.grant.AccessToken, nil
}

// renewLocked refreshes the grant, unless another session or process did
// since this one read it (refreshLocked).
func (s *Session) renewLocked(ctx context.Context) error {
	if err := s.reloadLocked(); err != nil {
		return err
	}
	if s.grant == nil || !expiring(s.grant) {
		return nil
	}
	return s.refreshLocked(ctx, s.grant.AccessToken)
}

// Current returns what the session's grant is (nil: none), without its
// tokens.
func (s *Session) Current() *Grant {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.grant == nil {
		return nil
	}
	g := *s.grant
	g.AccessToken, g.RefreshToken = "", ""
	return &g
}

// reloadLocked reads the grant of the server from the store: the grant of
// the resource its record names, when that is the server's own resource (a
// record of another resource, saved by a version that took a document for
// another path of the origin, is not followed: the server's 401 leads to
// discovery again).
func (s *Session) reloadLocked() error {
	srv, err := s.store.Server(s.url)
	if err != nil || srv == nil {
		return err
	}
	if su, err := resourceOf(s.url); err != nil || !sameResource(srv.Resource, su) {
		return nil
	}
	g, err := s.store.Grant(srv.Issuer, srv.Resource)
	if err != nil {
		return err
	}
	if g != nil {
		s.grant = g
	}
	return nil
}

// Succeeded tells the session that a request carrying token was not refused:
// the token works.
func (s *Session) Succeeded(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fresh == token {
		s.fresh = ""
	}
	s.stepUps = 0
}

// Recover answers a refusal of a request that carried used ("" for none):
// status 401 (or 403) with the challenge ch (nil when the response named
// none). It returns the token to send the request again with: one another
// request (or process) got meanwhile, a refreshed one, or one of a new login
// (for more scopes after a 403 insufficient_scope). An error means the
// request cannot succeed: the login failed, the server refuses a token just
// obtained, or the scopes it wants are never granted.
func (s *Session) Recover(ctx context.Context, used string, status int, ch *Challenge) (string, error) {
	if s.invalid != nil {
		return "", s.invalid
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	stepUp := status == http.StatusForbidden
	if stepUp && ch.Param("error") != "insufficient_scope" {
		return "", fmt.Errorf("oauth: the server refused the request (403): %s", describe(ch))
	}
	if !stepUp && s.grant != nil && s.grant.AccessToken != used && !expiring(s.grant) {
		return s.grant.AccessToken, nil
	}
	if !stepUp && used != "" && used == s.fresh {
		return "", fmt.Errorf("oauth: the server refused the token a login just got (%d): %s", status, describe(ch))
	}
	unlock, err := s.store.Lock(ctx, s.url)
	if err != nil {
		return "", err
	}
	defer unlock()
	// Another process may have logged in while this one waited.
	if err := s.reloadLocked(); err != nil {
		return "", err
	}
	if !stepUp && s.grant != nil && s.grant.AccessToken != used && !expiring(s.grant) {
		return s.grant.AccessToken, nil
	}
	d, err := s.discover(ctx, ch)
	if err != nil {
		return "", err
	}
	if !stepUp && (s.grant == nil || s.grant.Issuer != d.issuer || s.grant.Resource != d.resource) {
		// A login for the same resource through another URL of it (ws://h/mcp
		// and http://h/mcp; a path with and without its trailing slash)
		// serves this one too: discover checked that d.resource is this
		// server's.
		g, err := s.store.Grant(d.issuer, d.resource)
		if err != nil {
			return "", err
		}
		if g != nil && g.AccessToken != used {
			if err := s.keep(g); err != nil {
				return "", err
			}
			if !expiring(g) {
				return g.AccessToken, nil
			}
		}
	}
	var scopes []string
	if stepUp {
		if s.stepUps >= s.opts.MaxStepUps {
			return "", fmt.Errorf("oauth: the server still wants more scopes (%s) after %d logins for them: refused", printable(ch.Param("scope")), s.stepUps)
		}
		// [MCP 2026-07-28, authorization: step-up] the scopes asked for are
		// those of the token held and those the challenge names.
		if s.grant != nil {
			scopes = slices.Clone(s.grant.Scopes)
		}
		added := false
		for _, sc := range ch.Scopes() {
			if !slices.Contains(scopes, sc) {
				scopes = append(scopes, sc)
				added = true
			}
		}
		if !added && s.grant != nil {
			return "", fmt.Errorf("oauth: the server wants the scopes %+q, which the token was granted, and still refuses it: a new login would not help", ch.Param("scope"))
		}
		s.stepUps++
	} else if s.grant != nil && s.grant.RefreshToken != "" && s.grant.Issuer == d.issuer && s.grant.Resource == d.resource {
		if err := s.refreshLocked(ctx, used); err == nil {
			return s.grant.AccessToken, nil
		}
	}
	if err := s.loginLocked(ctx, d, ch, scopes); err != nil {
		return "", err
	}
	return s.grant.AccessToken, nil
}

// describe is a challenge's error and description, for an error message.
func describe(ch *Challenge) string {
	if ch == nil {
		return "no challenge"
	}
	msg := ch.Param("error")
	if d := ch.Param("error_description"); d != "" {
		msg += ": " + d
	}
	if msg == "" {
		msg = "no error named"
	}
	return printable(msg)
}

// loginContext is the context of a person's login that a request with ctx
// started: it ends when ctx is cancelled (an interrupt, the client closing:
// nobody waits for the login any more) and after timeout, not at ctx's
// deadline (a request's or a connection's, which a person at an MFA prompt
// may outlive: the grant then serves the next request).
func loginContext(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	lctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() {
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			cancel(context.Cause(ctx))
		}
	})
	lctx, cancelT := context.WithTimeout(lctx, timeout)
	return lctx, func() {
		stop()
		cancelT()
		cancel(nil)
	}
}

// loginLocked logs in at d's authorization server for scopes (nil: those the
// challenge names, else those the metadata lists, else none), and keeps the
// grant (and a registration made for it) once the token is got: a login that
// fails stores nothing.
func (s *Session) loginLocked(ctx context.Context, d *discovered, ch *Challenge, scopes []string) error {
	if s.opts.Machine {
		return s.machineLocked(ctx, d, ch, scopes)
	}
	if s.opts.Authorize == nil {
		return fmt.Errorf("%w at %s (run mcp-resume login %s)", ErrLoginRequired, d.issuer, s.url)
	}
	if scopes == nil {
		scopes = ch.Scopes()
		if len(scopes) == 0 {
			scopes = slices.Clone(d.prmScopes)
		}
	}
	// A refresh token, where the server offers offline_access (SEP-2207).
	if slices.Contains(d.meta.ScopesSupported, "offline_access") && !slices.Contains(scopes, "offline_access") {
		scopes = append(scopes, "offline_access")
	}
	prev, err := s.store.Registration(d.issuer)
	if err != nil {
		return err
	}
	prevRedirect := ""
	if prev != nil {
		prevRedirect = prev.RedirectURI
	}
	ctx, cancel := loginContext(ctx, s.opts.LoginTimeout)
	defer cancel()
	verifier := oauth2.GenerateVerifier()
	state := rand.Text()
	var reg *Registration
	var redirect string
	q, err := s.opts.Authorize(ctx, prevRedirect, func(redirectURI string) (string, error) {
		redirect = redirectURI
		if reg, err = s.registration(ctx, d, prev, redirectURI); err != nil {
			return "", err
		}
		v := url.Values{
			"response_type": {"code"}, "client_id": {reg.ClientID}, "redirect_uri": {redirectURI},
			"code_challenge": {oauth2.S256ChallengeFromVerifier(verifier)}, "code_challenge_method": {"S256"},
			"state": {state}, "resource": {d.resource},
		}
		if len(scopes) > 0 {
			v.Set("scope", strings.Join(scopes, " "))
		}
		au := d.meta.AuthorizationEndpoint
		if strings.Contains(au, "?") {
			return au + "&" + v.Encode(), nil
		}
		return au + "?" + v.Encode(), nil
	})
	if err != nil {
		return fmt.Errorf("oauth: the login at %s: %w", d.issuer, err)
	}
	if reg == nil {
		return fmt.Errorf("oauth: the login at %s ended before it started", d.issuer)
	}
	if e := q.Get("error"); e != "" {
		return fmt.Errorf("oauth: the authorization server %s refused the login: %s", d.issuer, printable(e+" "+q.Get("error_description")))
	}
	if subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(state)) != 1 {
		return fmt.Errorf("oauth: the login's redirect carries another state than the one sent: refused")
	}
	// RFC 9207: an authorization server that announces iss must send it, and
	// an iss that comes must be the server's, exactly.
	if iss, has := q.Get("iss"), q.Has("iss"); (d.meta.IssParameterSupported && !has) || (has && iss != d.meta.Issuer) {
		return fmt.Errorf("oauth: the login's redirect names the issuer %+q, not %+q: refused (RFC 9207)", iss, d.meta.Issuer)
	}
	code := q.Get("code")
	if code == "" {
		return fmt.Errorf("oauth: the login's redirect carries no code")
	}
	tr, err := s.tokenRequest(ctx, d.meta, reg, url.Values{
		"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {redirect},
		"code_verifier": {verifier}, "resource": {d.resource},
	})
	if err != nil {
		return err
	}
	g := tr.grant(d.meta.Issuer, d.resource, reg.ClientID, scopes)
	if reg != prev {
		if err := s.store.SaveRegistration(reg); err != nil {
			return err
		}
	}
	if err := s.keep(g); err != nil {
		return err
	}
	s.fresh = g.AccessToken
	s.log.Info().Str("issuer", g.Issuer).Str("resource", g.Resource).Strs("scopes", g.Scopes).Msg("oauth: logged in")
	return nil
}

// keep makes g the session's grant and stores it, with the server's record.
func (s *Session) keep(g *Grant) error {
	if err := s.store.SaveGrant(g); err != nil {
		return err
	}
	if err := s.store.SaveServer(&Server{URL: s.url, Issuer: g.Issuer, Resource: g.Resource}); err != nil {
		return err
	}
	s.grant = g
	return nil
}

// registration returns the client to log in as at d's authorization server:
// one registered before (with the same redirect URI, or any when it was
// given one beforehand), the one given (ClientOptions.ClientID), the Client
// ID Metadata Document where the server supports them, or a new dynamic
// registration.
func (s *Session) registration(ctx context.Context, d *discovered, prev *Registration, redirect string) (*Registration, error) {
	m := d.meta
	if s.configured(d.issuer) {
		method := s.opts.AuthMethod
		if method == "" {
			method = "none"
			if s.opts.ClientSecret != "" {
				method = "client_secret_basic"
				if len(m.TokenAuthMethods) > 0 && !slices.Contains(m.TokenAuthMethods, method) && slices.Contains(m.TokenAuthMethods, "client_secret_post") {
					method = "client_secret_post"
				}
			}
		}
		return &Registration{Issuer: d.issuer, ClientID: s.opts.ClientID, ClientSecret: s.opts.ClientSecret, AuthMethod: method, RedirectURI: redirect}, nil
	}
	if prev != nil && prev.RedirectURI == redirect {
		return prev, nil
	}
	if m.CIMDSupported && s.opts.ClientMetadataURL != "" {
		return &Registration{Issuer: d.issuer, ClientID: s.opts.ClientMetadataURL, AuthMethod: "none", RedirectURI: redirect}, nil
	}
	if m.RegistrationEndpoint == "" {
		if prev != nil {
			return prev, nil // loopback redirects on another port: RFC 8252 §7.3
		}
		return nil, fmt.Errorf("oauth: the authorization server %s takes no registrations and no client id was given (--client-id)", d.issuer)
	}
	return s.register(ctx, d, redirect)
}

// register registers this client at d's authorization server (RFC 7591).
func (s *Session) register(ctx context.Context, d *discovered, redirect string) (*Registration, error) {
	supported := d.meta.TokenAuthMethods
	if len(supported) == 0 {
		supported = []string{"client_secret_basic"} // RFC 8414's default
	}
	method := supported[0]
	for _, m := range []string{"none", "client_secret_basic", "client_secret_post"} {
		if slices.Contains(supported, m) {
			method = m
			break
		}
	}
	body, _ := json.Marshal(map[string]any{
		"client_name": s.opts.ClientName, "redirect_uris": []string{redirect},
		"grant_types": []string{"authorization_code", "refresh_token"}, "response_types": []string{"code"},
		"token_endpoint_auth_method": method, "application_type": "native",
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.meta.RegistrationEndpoint, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := s.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("oauth: registering at %s: %w", d.issuer, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxDocBytes))
	var r struct {
		ClientID     string `json:"client_id"`
		ClientSecret string `json:"client_secret"`
		AuthMethod   string `json:"token_endpoint_auth_method"`
		Error        string `json:"error"`
		Description  string `json:"error_description"`
	}
	_ = json.Unmarshal(b, &r)
	if d.guessed && resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		return nil, ErrNoAuthorizationServer
	}
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK || r.ClientID == "" {
		return nil, fmt.Errorf("oauth: registering at %s: %s %s", d.issuer, resp.Status, printable(r.Error+" "+r.Description))
	}
	reg := &Registration{Issuer: d.issuer, ClientID: r.ClientID, ClientSecret: r.ClientSecret, AuthMethod: r.AuthMethod, RedirectURI: redirect}
	if reg.AuthMethod == "" {
		reg.AuthMethod = method
		if r.ClientSecret == "" {
			reg.AuthMethod = "none"
		}
	}
	s.log.Info().Str("issuer", d.issuer).Str("method", reg.AuthMethod).Msg("oauth: registered a client")
	return reg, nil
}

// tokenResponse is a token endpoint's answer (RFC 6749 §5).
type tokenResponse struct {
	AccessToken  string  `json:"access_token"`
	TokenType    string  `json:"token_type"`
	ExpiresIn    float64 `json:"expires_in"`
	RefreshToken string  `json:"refresh_token"`
	Scope        string  `json:"scope"`
	Error        string  `json:"error"`
	Description  string  `json:"error_description"`
}

// grant is what the response grants, asked for with scopes.
func (t *tokenResponse) grant(issuer, resource, clientID string, scopes []string) *Grant {
	g := &Grant{Issuer: issuer, Resource: resource, ClientID: clientID, AccessToken: t.AccessToken, RefreshToken: t.RefreshToken, Scopes: scopes}
	if t.Scope != "" {
		g.Scopes = strings.Fields(t.Scope)
	}
	if t.ExpiresIn > 0 {
		g.Expiry = time.Now().Add(time.Duration(t.ExpiresIn * float64(time.Second)))
	}
	return g
}

// tokenRequest posts form to m's token endpoint as reg.
func (s *Session) tokenRequest(ctx context.Context, m *asMetadata, reg *Registration, form url.Values) (*tokenResponse, error) {
	switch reg.AuthMethod {
	case "client_secret_post":
		form.Set("client_id", reg.ClientID)
		form.Set("client_secret", reg.ClientSecret)
	case "client_secret_basic":
	default: // none, private_key_jwt (its assertion in form)
		form.Set("client_id", reg.ClientID)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, m.TokenEndpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if reg.AuthMethod == "client_secret_basic" {
		// RFC 6749 §2.3.1: the id and secret form-encoded first.
		req.SetBasicAuth(url.QueryEscape(reg.ClientID), url.QueryEscape(reg.ClientSecret))
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("oauth: the token endpoint of %s: %w", m.Issuer, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxDocBytes))
	var t tokenResponse
	if err := json.Unmarshal(b, &t); err != nil && resp.StatusCode == http.StatusOK {
		return nil, fmt.Errorf("oauth: the token endpoint of %s answered no JSON: %w", m.Issuer, err)
	}
	if resp.StatusCode != http.StatusOK || t.AccessToken == "" {
		return nil, &TokenError{Issuer: m.Issuer, Status: resp.StatusCode, Code: t.Error, Description: t.Description}
	}
	if !strings.EqualFold(t.TokenType, "Bearer") {
		return nil, fmt.Errorf("oauth: the token endpoint of %s issued a %+q token, not a bearer token", m.Issuer, t.TokenType)
	}
	return &t, nil
}

// TokenError is a token endpoint's refusal.
type TokenError struct {
	Issuer      string
	Status      int
	Code        string // invalid_grant, invalid_client, ...
	Description string
}

func (e *TokenError) Error() string {
	return fmt.Sprintf("oauth: the token endpoint of %s answered %d %s", e.Issuer, e.Status, printable(e.Code+" "+e.Description))
}

// grantLock is the store's lock key of the grant of issuer and resource,
// which every session of the resource shares, whatever URL it reached the
// server by.
func grantLock(issuer, resource string) string {
	return "grant\n" + issuer + "\n" + resource
}

// refreshLocked renews the grant with its refresh token, unless another
// session or process did since used was sent: under the grant's lock (not
// the server URL's: two URLs of one resource share its grant), the grant is
// read again, and one whose refresh token is not the one held here was
// renewed by another and is taken. [RFC 9700 §4.14.2] refresh tokens of a
// public client rotate: the one spent by another is refused (invalid_grant),
// and a session that spent it second would otherwise drop the grant the
// first just stored. A refresh token the server refuses is dropped with its
// grant, if the grant stored is still the one refused.
func (s *Session) refreshLocked(ctx context.Context, used string) error {
	g := s.grant
	unlock, err := s.store.Lock(ctx, grantLock(g.Issuer, g.Resource))
	if err != nil {
		return err
	}
	defer unlock()
	cur, err := s.store.Grant(g.Issuer, g.Resource)
	if err != nil {
		return err
	}
	if cur == nil { // logged out, or refused meanwhile: a login is due
		s.grant = nil
		return errors.New("oauth: the grant was dropped while this session held it")
	}
	if cur.AccessToken != used && !expiring(cur) {
		s.grant = cur
		return nil
	}
	g = cur // its refresh token: another's rotation included
	reg, err := s.store.Registration(g.Issuer)
	if err != nil {
		return err
	}
	if reg == nil || reg.ClientID != g.ClientID {
		reg = &Registration{Issuer: g.Issuer, ClientID: g.ClientID, AuthMethod: "none"}
		if s.configured(g.Issuer) && s.opts.ClientID == g.ClientID {
			reg.ClientSecret, reg.AuthMethod = s.opts.ClientSecret, cmpOr(s.opts.AuthMethod, "client_secret_basic")
			if s.opts.ClientSecret == "" {
				reg.AuthMethod = cmpOr(s.opts.AuthMethod, "none")
			}
		}
	}
	m, err := s.metadata(ctx, g.Issuer)
	if err != nil {
		return err
	}
	tr, err := s.tokenRequest(ctx, m, reg, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {g.RefreshToken}, "resource": {g.Resource}})
	var te *TokenError
	if errors.As(err, &te) && te.Code == "invalid_grant" {
		if now, _ := s.store.Grant(g.Issuer, g.Resource); now != nil && now.RefreshToken == g.RefreshToken {
			_ = s.store.DeleteGrant(g.Issuer, g.Resource)
		}
		s.grant = nil
		return err
	}
	if err != nil {
		return err
	}
	ng := tr.grant(g.Issuer, g.Resource, g.ClientID, g.Scopes)
	if ng.RefreshToken == "" {
		ng.RefreshToken = g.RefreshToken // not rotated
	}
	if err := s.keep(ng); err != nil {
		return err
	}
	s.log.Info().Str("issuer", g.Issuer).Msg("oauth: token refreshed")
	return nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// Logout forgets the server's grant (the registration stays, for the next
// login), telling the authorization server to revoke its tokens (RFC 7009)
// when it has a revocation endpoint. It reports whether there was one.
func (s *Session) Logout(ctx context.Context) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	unlock, err := s.store.Lock(ctx, s.url)
	if err != nil {
		return false, err
	}
	defer unlock()
	if err := s.reloadLocked(); err != nil {
		return false, err
	}
	g := s.grant
	s.grant, s.loaded = nil, true
	if err := s.store.DeleteServer(s.url); err != nil {
		return false, err
	}
	if g == nil {
		return false, nil
	}
	unlockGrant, err := s.store.Lock(ctx, grantLock(g.Issuer, g.Resource))
	if err != nil {
		return true, err
	}
	err = s.store.DeleteGrant(g.Issuer, g.Resource)
	unlockGrant()
	if err != nil {
		return true, err
	}
	if m, err := s.metadata(ctx, g.Issuer); err == nil && m.RevocationEndpoint != "" {
		reg, _ := s.store.Registration(g.Issuer)
		if reg == nil {
			reg = &Registration{Issuer: g.Issuer, ClientID: g.ClientID, AuthMethod: "none"}
		}
		for _, t := range []struct{ tok, hint string }{{g.RefreshToken, "refresh_token"}, {g.AccessToken, "access_token"}} {
			if t.tok != "" {
				s.revoke(ctx, m, reg, t.tok, t.hint)
			}
		}
	}
	return true, nil
}

// revoke asks m to revoke tok; its answer does not matter (the token is
// forgotten here either way).
func (s *Session) revoke(ctx context.Context, m *asMetadata, reg *Registration, tok, hint string) {
	form := url.Values{"token": {tok}, "token_type_hint": {hint}}
	if reg.AuthMethod != "client_secret_basic" {
		form.Set("client_id", reg.ClientID)
		if reg.AuthMethod == "client_secret_post" {
			form.Set("client_secret", reg.ClientSecret)
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, m.RevocationEndpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if reg.AuthMethod == "client_secret_basic" {
		req.SetBasicAuth(url.QueryEscape(reg.ClientID), url.QueryEscape(reg.ClientSecret))
	}
	if resp, err := s.http.Do(req); err == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDocBytes))
		resp.Body.Close()
	}
}
