package oauth

import (
	"context"
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

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/mcp-resume/mcp-resume/spec"
)

// refetchEvery bounds how often an issuer's metadata and keys are fetched
// again: a token naming a key not known yet (a rotation) fetches the keys at
// most this often, so that a flood of made-up key ids costs the identity
// provider one fetch a second.
const refetchEvery = time.Second

// maxDocBytes bounds a metadata document or key set read from an
// authorization server.
const maxDocBytes = 1 << 20

// asymmetric are the signature algorithms a token may be signed with: never
// none, never an HMAC (whose key would be the issuer's public key).
var asymmetric = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512, jose.EdDSA,
}

// issuer is one authorization server: its metadata and keys, fetched when
// needed and again at most every refetchEvery.
type issuer struct {
	id string
	rs *ResourceServer

	mu       sync.Mutex // guards the fields below
	meta     *asMetadata
	keys     *jose.JSONWebKeySet
	metaAt   time.Time // the last fetch of the metadata (success or not)
	keysAt   time.Time // the last fetch of the keys
	algs     []jose.SignatureAlgorithm
	fetching chan struct{} // closed when the fetch under way ends; nil when none
}

// asMetadata is what the resource server reads of an authorization server's
// metadata (RFC 8414, OpenID Connect Discovery).
type asMetadata struct {
	Issuer                string `json:"issuer"`
	JWKSURI               string `json:"jwks_uri"`
	IntrospectionEndpoint string `json:"introspection_endpoint"`
	TokenEndpoint         string `json:"token_endpoint"`
	// What a client reads.
	AuthorizationEndpoint string   `json:"authorization_endpoint"`
	RegistrationEndpoint  string   `json:"registration_endpoint"`
	RevocationEndpoint    string   `json:"revocation_endpoint"`
	ScopesSupported       []string `json:"scopes_supported"`
	CodeChallengeMethods  []string `json:"code_challenge_methods_supported"`
	TokenAuthMethods      []string `json:"token_endpoint_auth_methods_supported"`
	GrantTypes            []string `json:"grant_types_supported"`
	CIMDSupported         bool     `json:"client_id_metadata_document_supported"`
	IssParameterSupported bool     `json:"authorization_response_iss_parameter_supported"`
	SigningAlgs           []string `json:"id_token_signing_alg_values_supported"`
}

// metadataURLs are where an issuer's metadata is looked for, in the order
// [MCP authorization, authorization server metadata discovery] gives it:
// RFC 8414 with path insertion, OpenID Connect with path insertion, OpenID
// Connect appended to the path (only the first two for an issuer without a
// path).
func metadataURLs(issuer string) []string {
	u, err := url.Parse(issuer)
	if err != nil {
		return nil
	}
	origin := u.Scheme + "://" + u.Host
	path := strings.TrimSuffix(u.EscapedPath(), "/")
	if path == "" {
		return []string{origin + "/.well-known/oauth-authorization-server", origin + "/.well-known/openid-configuration"}
	}
	return []string{
		origin + "/.well-known/oauth-authorization-server" + path,
		origin + "/.well-known/openid-configuration" + path,
		origin + path + "/.well-known/openid-configuration",
	}
}

// getJSON fetches url into v with client, within maxDocBytes.
func getJSON(ctx context.Context, client *http.Client, url string, v any) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxDocBytes+1))
	if err != nil {
		return resp.StatusCode, err
	}
	if len(b) > maxDocBytes {
		return resp.StatusCode, fmt.Errorf("GET %s: the document is over %d bytes", url, maxDocBytes)
	}
	return resp.StatusCode, json.Unmarshal(b, v)
}

// state returns what is known of the issuer, fetching its metadata and keys
// first when they are missing (or, with kid not among the keys, fetching the
// keys again) and not fetched within refetchEvery. One fetch at a time;
// others wait for it.
func (is *issuer) state(ctx context.Context, kid string) (*asMetadata, *jose.JSONWebKeySet, []jose.SignatureAlgorithm) {
	for {
		is.mu.Lock()
		now := time.Now()
		needMeta := is.meta == nil && now.Sub(is.metaAt) >= refetchEvery
		needKeys := is.meta != nil && is.meta.JWKSURI != "" && (is.keys == nil || kid != "" && len(is.keys.Key(kid)) == 0) && now.Sub(is.keysAt) >= refetchEvery
		if (!needMeta && !needKeys) || is.fetching != nil {
			if w := is.fetching; w != nil {
				is.mu.Unlock()
				select {
				case <-w:
					continue
				case <-ctx.Done():
					return nil, nil, nil
				}
			}
			meta, keys, algs := is.meta, is.keys, is.algs
			is.mu.Unlock()
			return meta, keys, algs
		}
		done := make(chan struct{})
		is.fetching = done
		is.mu.Unlock()
		is.fetch(ctx, needMeta)
		is.mu.Lock()
		is.fetching = nil
		is.mu.Unlock()
		close(done)
	}
}

// fetch fetches the metadata (meta) then the keys.
func (is *issuer) fetch(ctx context.Context, meta bool) {
	rs := is.rs
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	if meta {
		m, err := discover(ctx, rs.client, is.id)
		is.mu.Lock()
		is.metaAt = time.Now()
		if m != nil {
			is.meta = m
			is.algs = signingAlgs(m.SigningAlgs)
		}
		is.mu.Unlock()
		if m == nil {
			rs.log.Warn().Str("issuer", is.id).Err(err).Msg("the authorization server's metadata could not be read")
			return
		}
	}
	is.mu.Lock()
	m := is.meta
	is.mu.Unlock()
	if m == nil || m.JWKSURI == "" {
		return
	}
	var ks jose.JSONWebKeySet
	_, err := getJSON(ctx, rs.client, m.JWKSURI, &ks)
	is.mu.Lock()
	is.keysAt = time.Now()
	if err == nil {
		is.keys = &ks
	}
	is.mu.Unlock()
	if err != nil {
		rs.log.Warn().Str("issuer", is.id).Err(err).Msg("the authorization server's keys could not be read; the keys read before stay")
		return
	}
	rs.log.Info().Str("issuer", is.id).Int("keys", len(ks.Keys)).Msg("authorization server keys read")
}

// discover reads the metadata of the authorization server issuer, trying
// metadataURLs in order. Its error is an *IssuerError.
func discover(ctx context.Context, client *http.Client, issuer string) (*asMetadata, error) {
	var found []string // what each URL answered, when it had no metadata
	for _, u := range metadataURLs(issuer) {
		var doc asMetadata
		status, err := getJSON(ctx, client, u, &doc)
		switch {
		case status == 0 || transient(status):
			// Not "no metadata here": the server is away, or busy.
			return nil, &IssuerError{Issuer: issuer, Unreachable: true, Problem: "its metadata cannot be read now", Err: err}
		case err != nil || doc.Issuer == "":
			what := "no metadata"
			if status == http.StatusOK {
				what = "not authorization server metadata"
			}
			found = append(found, fmt.Sprintf("%s (%s, %d)", u, what, status))
			continue
		case doc.Issuer != issuer:
			// [RFC 8414 §3.3] The "issuer" value returned MUST be identical
			// to the authorization server's issuer identifier value into
			// which the well-known URI string was inserted to create the URL
			// used to retrieve the metadata. [OpenID Connect Discovery §4.3]
			// likewise for the prefix of /.well-known/openid-configuration.
			e := &IssuerError{Issuer: issuer, Problem: fmt.Sprintf("its metadata at %s names the issuer %q", u, doc.Issuer)}
			if slices.Contains(metadataURLs(doc.Issuer), u) {
				e.Want = doc.Issuer // the same document, found from the issuer it names
			}
			return nil, e
		}
		return &doc, nil
	}
	return nil, &IssuerError{Issuer: issuer, Problem: "no authorization server metadata at " + strings.Join(found, ", ")}
}

// transient reports whether an HTTP status says "not now" rather than "not
// here": a server error, a timeout, too many requests.
func transient(status int) bool {
	return status >= 500 || status == http.StatusRequestTimeout || status == http.StatusTooManyRequests
}

// IssuerError is what is wrong with an authorization server as this server
// names it (Options.Issuers): a definite mistake (its metadata names another
// issuer, is not an authorization server's, or says nothing this server can
// check tokens with), or, Unreachable, that it cannot be asked now.
type IssuerError struct {
	Issuer string
	// Unreachable: the authorization server could not be asked (no
	// connection, a server error, a timeout); it may answer later.
	Unreachable bool
	// Problem says what was found.
	Problem string
	// Want is the issuer identifier to give instead, when what was found
	// names one ("" when not).
	Want string
	// Err is the cause, when there is one.
	Err error
}

func (e *IssuerError) Error() string {
	s := fmt.Sprintf("the authorization server %q: %s", e.Issuer, e.Problem)
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	if e.Want != "" {
		s += fmt.Sprintf("; its issuer identifier is %q", e.Want)
	}
	return s
}

func (e *IssuerError) Unwrap() error { return e.Err }

// VerifyIssuer reads the metadata of the issuer id, one of Options.Issuers,
// and checks it: nil when it is an authorization server's metadata for
// exactly id whose tokens this server can check (with keys or by
// introspection), kept then for the tokens to come; else an *IssuerError,
// with the issuer identifier to give instead when what was found names one.
// A server calls it as it starts, so that a mistake in an issuer's name is
// told to its operator rather than to each client that fails to log in.
func (rs *ResourceServer) VerifyIssuer(ctx context.Context, id string) error {
	is := rs.issuers[id]
	if is == nil {
		return fmt.Errorf("oauth: %q is not an issuer of this server", id)
	}
	m, err := discover(ctx, rs.client, id)
	var ie *IssuerError
	if errors.As(err, &ie) && !ie.Unreachable && ie.Want == "" {
		rs.hint(ctx, ie)
	}
	if err != nil {
		return err
	}
	if m.JWKSURI == "" && m.IntrospectionEndpoint == "" && rs.opts.Introspection == "" {
		return &IssuerError{Issuer: id, Problem: "its metadata names neither jwks_uri nor introspection_endpoint: none of its tokens can be checked without an introspection endpoint named"}
	}
	is.mu.Lock()
	is.meta, is.algs, is.metaAt = m, signingAlgs(m.SigningAlgs), time.Now()
	is.mu.Unlock()
	return nil
}

// hint looks, on the host of an issuer that has no metadata, for what the
// operator may have meant: a protected resource (an MCP server) whose
// metadata names its authorization servers, or the authorization server at
// the host's root; e.Problem and e.Want say so when found.
func (rs *ResourceServer) hint(ctx context.Context, e *IssuerError) {
	u, err := url.Parse(e.Issuer)
	if err != nil {
		return
	}
	origin := u.Scheme + "://" + u.Host
	path := strings.TrimSuffix(u.EscapedPath(), "/")
	for _, p := range []string{"/.well-known/oauth-protected-resource" + path, "/.well-known/oauth-protected-resource"} {
		var prm struct {
			AuthorizationServers []string `json:"authorization_servers"`
		}
		if _, err := getJSON(ctx, rs.client, origin+p, &prm); err == nil && len(prm.AuthorizationServers) > 0 {
			e.Problem = fmt.Sprintf("this is a protected resource (an MCP server?), not an authorization server: its metadata at %s names the authorization servers %s",
				origin+p, strings.Join(prm.AuthorizationServers, ", "))
			e.Want = prm.AuthorizationServers[0]
			return
		}
	}
	if path == "" {
		return
	}
	for _, mu := range metadataURLs(origin) {
		var doc asMetadata
		if _, err := getJSON(ctx, rs.client, mu, &doc); err == nil && doc.Issuer != "" && slices.Contains(metadataURLs(doc.Issuer), mu) {
			e.Problem += fmt.Sprintf("; %s is the metadata of the authorization server %q", mu, doc.Issuer)
			e.Want = doc.Issuer
			return
		}
	}
}

// signingAlgs are the asymmetric algorithms among those an issuer announces
// (id_token_signing_alg_values_supported: RFC 8414 has no field for access
// tokens); every asymmetric one when it announces none.
func signingAlgs(announced []string) []jose.SignatureAlgorithm {
	var out []jose.SignatureAlgorithm
	for _, a := range announced {
		if alg := jose.SignatureAlgorithm(a); slices.Contains(asymmetric, alg) {
			out = append(out, alg)
		}
	}
	if len(out) == 0 {
		return asymmetric
	}
	return out
}

// atClaims are the claims of a JWT access token (RFC 9068) the server reads.
type atClaims struct {
	jwt.Claims
	Scope    string   `json:"scope"`
	Scp      []string `json:"scp"`
	Resource any      `json:"resource"`
	// An ID token's: a token with one is no access token.
	Nonce  string `json:"nonce"`
	AtHash string `json:"at_hash"`
	// Keycloak's token kind (Bearer, ID, Refresh).
	Typ string `json:"typ"`
}

// verifiedKeep bounds how long a JWT that passed checkJWT is taken as good
// without its signature verified again (never past its exp): a key its
// issuer withdraws stops working within it.
const verifiedKeep = time.Minute

// verifiedJWT is checkJWT, its good verdicts kept for verifiedKeep.
func (rs *ResourceServer) verifiedJWT(ctx context.Context, raw string) (*Token, spec.Reason, string) {
	key := tokenKey(raw)
	now := time.Now()
	if v, ok := rs.verified.get(key, now); ok {
		return v.tok, "", ""
	}
	tok, reason, desc := rs.checkJWT(ctx, raw)
	if tok != nil {
		until := now.Add(verifiedKeep)
		if exp := tok.Expiry.Add(rs.opts.Skew); exp.Before(until) {
			until = exp
		}
		rs.verified.put(key, verdict{tok: tok, until: until})
	}
	return tok, reason, desc
}

// checkJWT checks raw as a JWT access token: signed by one of the issuers
// with an announced asymmetric algorithm and a key of its key set, naming
// this server's resource, within its exp and nbf (Options.Skew).
func (rs *ResourceServer) checkJWT(ctx context.Context, raw string) (*Token, spec.Reason, string) {
	tok, err := jwt.ParseSigned(raw, asymmetric)
	if err != nil || len(tok.Headers) != 1 {
		return nil, ReasonMalformed, "the access token is not a JWT signed with an asymmetric algorithm"
	}
	h := tok.Headers[0]
	if typ, _ := h.ExtraHeaders[jose.HeaderType].(string); typ != "" && !strings.EqualFold(typ, "at+jwt") && !strings.EqualFold(typ, "application/at+jwt") && !strings.EqualFold(typ, "JWT") {
		return nil, ReasonNotAccessTok, "the token's type is " + typ + ", not an access token's"
	}
	var unverified atClaims
	if err := tok.UnsafeClaimsWithoutVerification(&unverified); err != nil {
		return nil, ReasonMalformed, "the access token's claims cannot be read"
	}
	is := rs.issuers[unverified.Issuer]
	if is == nil {
		return nil, ReasonUnknownIssuer, "the access token was not issued by an authorization server of this resource"
	}
	_, keys, algs := is.state(ctx, h.KeyID)
	if keys == nil {
		return nil, ReasonUnavailable, "the authorization server's keys cannot be read now; try again later"
	}
	if !slices.Contains(algs, jose.SignatureAlgorithm(h.Algorithm)) {
		return nil, ReasonBadSignature, "the access token is signed with an algorithm its issuer does not announce"
	}
	var candidates []jose.JSONWebKey
	if h.KeyID != "" {
		candidates = keys.Key(h.KeyID)
	} else {
		candidates = keys.Keys
	}
	var c atClaims
	verified := false
	for _, k := range candidates {
		if (k.Use != "" && k.Use != "sig") || !k.IsPublic() {
			continue // a key set holds public signing keys; anything else is ignored
		}
		if k.Algorithm != "" && k.Algorithm != h.Algorithm {
			continue
		}
		if err := tok.Claims(k.Key, &c); err == nil {
			verified = true
			break
		}
	}
	if !verified {
		return nil, ReasonBadSignature, "the access token's signature does not verify with its issuer's keys"
	}
	if c.Nonce != "" || c.AtHash != "" || strings.EqualFold(c.Typ, "ID") || strings.EqualFold(c.Typ, "Refresh") {
		return nil, ReasonNotAccessTok, "this is an ID token, not an access token"
	}
	if c.Expiry == nil {
		return nil, ReasonMalformed, "the access token has no expiry (exp)"
	}
	now := time.Now()
	switch err := c.ValidateWithLeeway(jwt.Expected{Issuer: is.id, Time: now}, rs.opts.Skew); {
	case errors.Is(err, jwt.ErrExpired):
		return nil, ReasonExpired, "the access token has expired"
	case errors.Is(err, jwt.ErrNotValidYet), errors.Is(err, jwt.ErrIssuedInTheFuture):
		return nil, ReasonNotYetValid, "the access token is not valid yet"
	case err != nil:
		return nil, ReasonMalformed, "the access token's claims are not valid: " + err.Error()
	}
	// [MCP authorization, token handling] MCP servers MUST validate that
	// access tokens were issued specifically for them as the intended
	// audience (RFC 8707).
	if !slices.ContainsFunc(c.Audience, rs.resourceMatches) && !rs.resourceClaimMatches(c.Resource) {
		return nil, ReasonWrongAudience, "the access token was not issued for this resource (" + rs.opts.Resource + ")"
	}
	if c.Subject == "" {
		return nil, ReasonMalformed, "the access token names no subject (sub)"
	}
	scopes := strings.Fields(c.Scope)
	if len(scopes) == 0 {
		scopes = c.Scp
	}
	return &Token{Issuer: is.id, Subject: c.Subject, Scopes: scopes, Expiry: c.Expiry.Time()}, "", ""
}

// resourceClaimMatches reports whether a token's resource claim (a string or
// a list) names this server's resource.
func (rs *ResourceServer) resourceClaimMatches(v any) bool {
	switch r := v.(type) {
	case string:
		return rs.resourceMatches(r)
	case []any:
		for _, x := range r {
			if s, ok := x.(string); ok && rs.resourceMatches(s) {
				return true
			}
		}
	}
	return false
}
