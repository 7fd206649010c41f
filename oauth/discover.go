package oauth

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
)

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
// metadata from the challenge's resource_metadata (a URL of the server's
// origin), else the well-known paths (path-specific, then root); from it the
// authorization server and its metadata. The metadata must be this server's
// (its resource the server's URL, sameResource; or its whole origin, from
// the origin's root document, originWide), else nothing of it is used. A
// server without protected resource metadata is taken as its own
// authorization server (fallback).
func (s *Session) discover(ctx context.Context, ch *Challenge) (*discovered, error) {
	su, err := resourceOf(s.url)
	if err != nil {
		return nil, err
	}
	base := origin(su)
	var candidates []string
	if rm := ch.Param("resource_metadata"); rm != "" {
		// The document speaks for the resource: RFC 9728 §3 serves it from
		// the resource's own host, and a URL elsewhere would have the client
		// fetch whatever a server names (an address inside the gateway's
		// network).
		if u, err := url.Parse(rm); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || origin(u) != base {
			return nil, fmt.Errorf("oauth: the server's challenge names resource metadata at %s, not a URL of the server's origin %s: refused", quote(rm), base)
		}
		candidates = append(candidates, rm)
	}
	if p := strings.TrimSuffix(su.EscapedPath(), "/"); p != "" {
		candidates = append(candidates, base+rootMetadataPath+p)
	}
	candidates = append(candidates, base+rootMetadataPath)
	var prm *prmDoc
	var from string
	for _, u := range candidates {
		var doc prmDoc
		status, err := getJSON(ctx, s.http, u, &doc)
		if err == nil {
			prm, from = &doc, u
			break
		}
		if status < 400 || status >= 500 {
			return nil, fmt.Errorf("oauth: the server's protected resource metadata: %w", err)
		}
	}
	if prm == nil {
		return s.fallback(ctx, su)
	}
	// [RFC 9728 §3.3] If these values are not identical, the data contained
	// in the response MUST NOT be used: a document naming another resource
	// (another path of the origin, one above the server's) is refused, and
	// the grant of that resource is never sent here.
	if !sameResource(prm.Resource, su) && !originWide(prm.Resource, from, su) {
		return nil, fmt.Errorf("oauth: the protected resource metadata at %s is for %s, not for %s: refused (RFC 9728 §3.3)", from, quote(prm.Resource), su)
	}
	if len(prm.AuthorizationServers) == 0 {
		return nil, errors.New("oauth: the server's protected resource metadata names no authorization server")
	}
	d := &discovered{resource: prm.Resource, issuer: prm.AuthorizationServers[0], prmScopes: prm.ScopesSupported}
	if is := s.opts.ClientIssuer; is != "" {
		// The client given (ClientID) is registered there, and goes nowhere
		// else.
		if !slices.Contains(prm.AuthorizationServers, is) {
			return nil, fmt.Errorf("oauth: the server's authorization servers are %s; the client %s is registered at %s: refused", quote(strings.Join(prm.AuthorizationServers, " ")), quote(s.opts.ClientID), is)
		}
		d.issuer = is
	}
	if d.meta, err = s.metadata(ctx, d.issuer); err != nil {
		return nil, err
	}
	return d, nil
}

// fallback is the authorization server of a server without protected
// resource metadata: the one the client was given (ClientIssuer), else, as
// the 2025-03-26 revision has it, the server's origin, with its metadata
// there or its default endpoints.
func (s *Session) fallback(ctx context.Context, su *url.URL) (*discovered, error) {
	base := origin(su)
	d := &discovered{resource: su.String(), issuer: base}
	if s.opts.ClientIssuer != "" {
		// The operator said where the tokens of its client come from.
		d.issuer = s.opts.ClientIssuer
		var err error
		d.meta, err = s.metadata(ctx, d.issuer)
		return d, err
	}
	if err := checkEndpoint("the server's origin, as its own authorization server,", base); err != nil {
		return nil, err
	}
	var doc asMetadata
	_, err := getJSON(ctx, s.http, base+"/.well-known/oauth-authorization-server", &doc)
	if err == nil && doc.AuthorizationEndpoint != "" && doc.TokenEndpoint != "" && sameOrigin(doc.AuthorizationEndpoint, base) && sameOrigin(doc.TokenEndpoint, base) {
		// [RFC 8414 §3.3] The "issuer" value returned MUST be identical to
		// the authorization server's issuer identifier value into which the
		// well-known URI string was inserted to create the URL used to
		// retrieve the metadata. The URL was made from the origin; the
		// 2025-03-26 revision has the client read it there whatever path
		// the issuer it names has (its conformance scenario names
		// <origin>/oauth), so an issuer of the origin is taken. One of
		// another origin (a company's, whose registration this client
		// keeps) is refused: a document served by the origin speaks for the
		// origin only, and no registration of another origin's issuer is
		// handed to it.
		if doc.Issuer == "" {
			doc.Issuer = base
		}
		if iu, err := url.Parse(doc.Issuer); err != nil || iu.Host == "" || origin(iu) != base || iu.RawQuery != "" || iu.Fragment != "" {
			return nil, fmt.Errorf("oauth: %s has no protected resource metadata, and its authorization server metadata names the issuer %s, not one of its origin %s: refused (RFC 8414 §3.3)", s.url, quote(doc.Issuer), base)
		}
		if err := checkMetadata(&doc); err != nil {
			return nil, err
		}
		d.issuer, d.meta = doc.Issuer, &doc
		s.metas[doc.Issuer] = &doc
		return d, nil
	}
	// Its default endpoints, when it registers clients there: a server that
	// answers 401 with neither metadata nor them wants credentials of another
	// kind (an API key).
	d.meta = &asMetadata{Issuer: base, AuthorizationEndpoint: base + "/authorize", TokenEndpoint: base + "/token",
		RegistrationEndpoint: base + "/register", CodeChallengeMethods: []string{"S256"}}
	d.guessed = true
	s.metas[base] = d.meta
	return d, nil
}

// metadata returns the authorization server's metadata, read once a session
// from the issuer's own well-known URLs (RFC 8414 §3.3: the issuer the
// document names must be the one asked for) and checked (checkMetadata).
func (s *Session) metadata(ctx context.Context, issuer string) (*asMetadata, error) {
	if m := s.metas[issuer]; m != nil {
		return m, nil
	}
	if err := CheckIssuer(issuer); err != nil {
		return nil, err
	}
	m, err := discover(ctx, s.http, issuer)
	if err != nil {
		return nil, fmt.Errorf("oauth: the authorization server %s: %w", issuer, err)
	}
	if err := checkMetadata(m); err != nil {
		return nil, err
	}
	// [MCP authorization] a client MUST refuse to proceed when the server
	// does not announce PKCE with S256.
	if !slices.Contains(m.CodeChallengeMethods, "S256") {
		return nil, fmt.Errorf("oauth: the authorization server %s does not announce PKCE with S256 (code_challenge_methods_supported): refused", issuer)
	}
	s.metas[issuer] = m
	return m, nil
}

// CheckIssuer refuses an issuer identifier a client must not use:
// [RFC 8414 §2] a URL that uses the "https" scheme and has no query or
// fragment components (http for a loopback host, as checkEndpoint).
func CheckIssuer(issuer string) error {
	if err := checkEndpoint("the authorization server", issuer); err != nil {
		return err
	}
	if strings.Contains(issuer, "?") {
		return fmt.Errorf("oauth: the authorization server %s has a query: refused (RFC 8414 §2)", issuer)
	}
	return nil
}
