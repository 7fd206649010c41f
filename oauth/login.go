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
	// authorization server; AuthMethod is how it authenticates at the token
	// endpoint (default: client_secret_basic, or client_secret_post when the
	// server supports only that, with a secret; none without). Without one,
	// the client uses its Client ID Metadata Document (ClientMetadataURL)
	// where the server supports them, else registers itself (RFC 7591).
	ClientID, ClientSecret, AuthMethod string
	ClientMetadataURL                  string
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
// carry, renewed, and the logins that get it. Safe for concurrent use.
type Session struct {
	url   string
	opts  ClientOptions
	store Store
	http  *http.Client
	log   zerolog.Logger

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
	return s
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

// renewLocked refreshes the grant, under the store's lock: another process
// may have refreshed it since this one read it (its refresh token rotated:
// the one held here is spent), and its grant is taken instead.
func (s *Session) renewLocked(ctx context.Context) error {
	unlock, err := s.store.Lock(ctx, s.url)
	if err != nil {
		return err
	}
	defer unlock()
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

// reloadLocked reads the grant of the server from the store.
func (s *Session) reloadLocked() error {
	srv, err := s.store.Server(s.url)
	if err != nil || srv == nil {
		return err
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
		// A login for the same resource through another URL (its /ws and
		// its /mcp) serves this one too.
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
			return "", fmt.Errorf("oauth: the server still wants more scopes (%s) after %d logins for them: refused", ch.Param("scope"), s.stepUps)
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
			return "", fmt.Errorf("oauth: the server wants the scopes %q, which the token was granted, and still refuses it: a new login would not help", ch.Param("scope"))
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
	return msg
}

// discovered is what a login needs of the server and its authorization
// server.
type discovered struct {
	resource  string // the RFC 8707 resource tokens are asked for
	issuer    string
	meta      *asMetadata
	prmScopes []string
	guessed   bool // meta is the 2025-03-26 default endpoints, not a document
}

// ErrNoAuthorizationServer is the error of a 401 whose server names no
// authorization server (no protected resource metadata, no authorization
// server metadata, no registration at the default endpoint): not an OAuth
// server. Transport answers the request with the 401 itself.
var ErrNoAuthorizationServer = errors.New("oauth: the server names no authorization server")

// prmDoc is the protected resource metadata (RFC 9728).
type prmDoc struct {
	Resource             string   `json:"resource"`
	AuthorizationServers []string `json:"authorization_servers"`
	ScopesSupported      []string `json:"scopes_supported"`
}

// discover finds the server's authorization server: its protected resource
// metadata from the challenge's resource_metadata, else the well-known paths
// (path-specific, then root); from it the authorization server and its
// metadata. A server without protected resource metadata is taken as its
// own authorization server, with the 2025-03-26 defaults when it has no
// metadata either.
func (s *Session) discover(ctx context.Context, ch *Challenge) (*discovered, error) {
	su, err := url.Parse(s.url)
	if err != nil {
		return nil, fmt.Errorf("oauth: the server URL %q: %w", s.url, err)
	}
	// A WebSocket endpoint is an endpoint of a server reached over HTTP: its
	// metadata is there, and its resource is the server's (any path of the
	// origin: mcp-resume's /ws takes the tokens of its /mcp).
	ws := su.Scheme == "ws" || su.Scheme == "wss"
	switch su.Scheme {
	case "ws":
		su.Scheme = "http"
	case "wss":
		su.Scheme = "https"
	}
	origin := su.Scheme + "://" + su.Host
	var candidates []string
	if rm := ch.Param("resource_metadata"); rm != "" {
		if u, err := url.Parse(rm); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return nil, fmt.Errorf("oauth: the server's challenge names resource metadata at %q, not an http(s) URL", rm)
		}
		candidates = append(candidates, rm)
	}
	if p := strings.TrimSuffix(su.EscapedPath(), "/"); p != "" {
		candidates = append(candidates, origin+"/.well-known/oauth-protected-resource"+p)
	}
	candidates = append(candidates, origin+"/.well-known/oauth-protected-resource")
	var prm *prmDoc
	for _, u := range candidates {
		var doc prmDoc
		status, err := getJSON(ctx, s.http, u, &doc)
		if err == nil {
			prm = &doc
			break
		}
		if status < 400 || status >= 500 {
			return nil, fmt.Errorf("oauth: the server's protected resource metadata: %w", err)
		}
	}
	if prm == nil {
		// 2025-03-26: the server is its own authorization server.
		d := &discovered{resource: su.String(), issuer: origin}
		// Its metadata at its origin, whatever issuer the document names
		// (2025-03-26 asked no more).
		var m *asMetadata
		var doc asMetadata
		_, err := getJSON(ctx, s.http, origin+"/.well-known/oauth-authorization-server", &doc)
		if err == nil && doc.AuthorizationEndpoint != "" && doc.TokenEndpoint != "" && sameOrigin(doc.AuthorizationEndpoint, origin) && sameOrigin(doc.TokenEndpoint, origin) {
			m = &doc
			if doc.Issuer == "" {
				doc.Issuer = origin
			}
			d.issuer = doc.Issuer
			s.metas[doc.Issuer] = m
		} else {
			// Its default endpoints, when it registers clients there: a
			// server that answers 401 with neither metadata nor them wants
			// credentials of another kind (an API key).
			m = &asMetadata{Issuer: origin, AuthorizationEndpoint: origin + "/authorize", TokenEndpoint: origin + "/token",
				RegistrationEndpoint: origin + "/register", CodeChallengeMethods: []string{"S256"}}
			d.guessed = true
			s.metas[origin] = m
		}
		d.meta = m
		return d, nil
	}
	// [MCP authorization; RFC 9728 §3.3] the metadata must be for this
	// server: a document naming another resource is refused.
	if target := su.String(); !covers(prm.Resource, target) && !(ws && sameOrigin(prm.Resource, target)) {
		return nil, fmt.Errorf("oauth: the server's protected resource metadata is for %q, not for %s: refused", prm.Resource, s.url)
	}
	if len(prm.AuthorizationServers) == 0 {
		return nil, errors.New("oauth: the server's protected resource metadata names no authorization server")
	}
	d := &discovered{resource: prm.Resource, issuer: prm.AuthorizationServers[0], prmScopes: prm.ScopesSupported}
	if d.meta, err = s.metadata(ctx, d.issuer); err != nil {
		return nil, err
	}
	return d, nil
}

// metadata returns the authorization server's metadata, read once a session.
func (s *Session) metadata(ctx context.Context, issuer string) (*asMetadata, error) {
	if m := s.metas[issuer]; m != nil {
		return m, nil
	}
	m, err := discover(ctx, s.http, issuer)
	if err != nil {
		return nil, fmt.Errorf("oauth: the authorization server %s: %w", issuer, err)
	}
	// [MCP authorization] a client MUST refuse to proceed when the server
	// does not announce PKCE with S256.
	if !slices.Contains(m.CodeChallengeMethods, "S256") {
		return nil, fmt.Errorf("oauth: the authorization server %s does not announce PKCE with S256 (code_challenge_methods_supported): refused", issuer)
	}
	if m.AuthorizationEndpoint == "" || m.TokenEndpoint == "" {
		return nil, fmt.Errorf("oauth: the authorization server %s names no authorization or token endpoint", issuer)
	}
	s.metas[issuer] = m
	return m, nil
}

// sameOrigin reports whether a and b have the same scheme and host.
func sameOrigin(a, b string) bool {
	x, err1 := url.Parse(a)
	y, err2 := url.Parse(b)
	return err1 == nil && err2 == nil && strings.EqualFold(x.Scheme, y.Scheme) && strings.EqualFold(x.Host, y.Host)
}

// covers reports whether resource, a protected resource's identifier, is
// the server at serverURL or a prefix of it on a path segment: the same
// scheme and host, its path the server's or above it.
func covers(resource, serverURL string) bool {
	r, err1 := url.Parse(resource)
	u, err2 := url.Parse(serverURL)
	if err1 != nil || err2 != nil || r.Fragment != "" || r.RawQuery != "" {
		return false
	}
	if !strings.EqualFold(r.Scheme, u.Scheme) || !strings.EqualFold(r.Host, u.Host) {
		return false
	}
	rp, up := strings.TrimSuffix(r.EscapedPath(), "/"), strings.TrimSuffix(u.EscapedPath(), "/")
	return rp == "" || rp == up || strings.HasPrefix(up, rp+"/")
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
	// The person may take a while, whatever the request that met the 401
	// allows.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.LoginTimeout)
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
		return fmt.Errorf("oauth: the authorization server %s refused the login: %s %s", d.issuer, e, q.Get("error_description"))
	}
	if subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(state)) != 1 {
		return fmt.Errorf("oauth: the login's redirect carries another state than the one sent: refused")
	}
	// RFC 9207: an authorization server that announces iss must send it, and
	// an iss that comes must be the server's, exactly.
	if iss, has := q.Get("iss"), q.Has("iss"); (d.meta.IssParameterSupported && !has) || (has && iss != d.meta.Issuer) {
		return fmt.Errorf("oauth: the login's redirect names the issuer %q, not %q: refused (RFC 9207)", iss, d.meta.Issuer)
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
	if s.opts.ClientID != "" {
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
		return nil, fmt.Errorf("oauth: registering at %s: %s %s %s", d.issuer, resp.Status, r.Error, r.Description)
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
		return nil, fmt.Errorf("oauth: the token endpoint of %s issued a %q token, not a bearer token", m.Issuer, t.TokenType)
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
	return fmt.Sprintf("oauth: the token endpoint of %s answered %d %s %s", e.Issuer, e.Status, e.Code, e.Description)
}

// refreshLocked renews the grant with its refresh token, unless another
// request or process did since used was sent. A refresh token the server
// refuses (invalid_grant) is dropped with its grant.
func (s *Session) refreshLocked(ctx context.Context, used string) error {
	g := s.grant
	reg, err := s.store.Registration(g.Issuer)
	if err != nil {
		return err
	}
	if reg == nil || reg.ClientID != g.ClientID {
		reg = &Registration{Issuer: g.Issuer, ClientID: g.ClientID, AuthMethod: "none"}
		if s.opts.ClientID == g.ClientID {
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
		_ = s.store.DeleteGrant(g.Issuer, g.Resource)
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
	if err := s.store.DeleteGrant(g.Issuer, g.Resource); err != nil {
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
