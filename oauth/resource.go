package oauth

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-resume/mcp-resume/spec"
	"github.com/mcp-resume/mcp-resume/transport"
)

// Options configure a ResourceServer.
type Options struct {
	// Resource is the canonical URI of the MCP endpoint as its clients reach
	// it (https://mcp.example.com/mcp): a token must name it, in its aud or
	// its resource claim. Required.
	Resource string
	// Issuers are the authorization servers whose tokens are accepted, by
	// issuer identifier; their metadata is found by RFC 8414 and OpenID
	// Connect discovery. At least one.
	Issuers []string
	// Introspection is an RFC 7662 introspection endpoint for opaque tokens,
	// for an issuer whose metadata names none. IntrospectionClient and
	// IntrospectionSecret authenticate this server to it (HTTP Basic); empty:
	// it is called without.
	Introspection                            string
	IntrospectionClient, IntrospectionSecret string
	// Scopes must all be covered by every request's token.
	Scopes []string
	// ToolScopes are the scopes a call of a tool needs besides Scopes.
	ToolScopes map[string][]string
	// ToolScopesOf, when set, is what a call of a tool needs besides
	// Scopes, instead of ToolScopes[tool] (a tool served under several
	// names: a gateway of several's); ToolScopes is then what the metadata
	// lists.
	ToolScopesOf func(tool string) []string
	// Skew is the clock skew allowed on a token's exp and nbf. Default 30s.
	Skew time.Duration
	// Client makes the requests to the authorization servers. Default: one
	// with a 10 s timeout.
	Client *http.Client
	// OnRefused, when set, is told the reason of each refused request
	// (missing, malformed, expired, wrong_audience, ...; see Refusal).
	OnRefused func(reason string)
	// Keys are API keys accepted beside access tokens, each naming its
	// principal (machines, a metrics scraper, the owner while the identity
	// provider is away). A key allows everything: no scope is asked of it.
	Keys *transport.KeySet
	// Logger receives what the server does with its authorization servers
	// (never a token). Nil means none.
	Logger *zerolog.Logger
	// ClientPrincipal takes the client (client_id) of an introspected token
	// that names no subject (neither sub nor username) as its principal:
	// every user of one client is then one principal, who shares requests,
	// tasks and limits. False: such a token is refused (no_subject).
	ClientPrincipal bool
	// TrustedProxies are the reverse proxies in front of this server: of a
	// request from one of them, the client's address is read from
	// X-Forwarded-For (the last address no trusted proxy added), for the
	// limit on introspections. Of any other request, X-Forwarded-For is not
	// read: anyone can write it.
	TrustedProxies []netip.Prefix
	// Recheck bounds how long an introspection's answer authenticates what
	// lasts (a WebSocket, an event stream) before the token is introspected
	// again: a token revoked at its authorization server ends what it opened
	// (a WebSocket closes with 1008, an event stream ends) within Recheck;
	// one still active goes on. Default 5 minutes.
	Recheck time.Duration
}

// DefaultRecheck is Options.Recheck's default.
const DefaultRecheck = 5 * time.Minute

// Reasons a request is refused (the error.data.reason of its answer, and
// OnRefused's argument).
const (
	ReasonMissing       spec.Reason = "missing_token"
	ReasonMalformed     spec.Reason = "malformed_token"
	ReasonExpired       spec.Reason = "expired_token"
	ReasonNotYetValid   spec.Reason = "token_not_yet_valid"
	ReasonWrongAudience spec.Reason = "wrong_audience"
	ReasonUnknownIssuer spec.Reason = "unknown_issuer"
	ReasonBadSignature  spec.Reason = "bad_signature"
	ReasonNotAccessTok  spec.Reason = "not_an_access_token"
	ReasonInactive      spec.Reason = "inactive_token"
	ReasonScope         spec.Reason = "insufficient_scope"
	ReasonUnavailable   spec.Reason = "authorization_unavailable"
	ReasonRateLimited   spec.Reason = "rate_limited"
	ReasonNoSubject     spec.Reason = "no_subject"
)

// maxTokenBytes bounds a bearer token: a longer one is refused unread.
const maxTokenBytes = 8 << 10

// ResourceServer checks the access tokens of an MCP server's requests. It is
// safe for concurrent use.
type ResourceServer struct {
	opts     Options
	client   *http.Client
	log      zerolog.Logger
	metaURL  string // the path-specific protected resource metadata URL
	metaPath string // its path
	issuers  map[string]*issuer
	order    []*issuer
	intro    *introspector
	verified checkedCache // JWTs whose signature and claims were checked
}

// New returns a ResourceServer. The authorization servers' metadata and keys
// are fetched when a token first needs them (a server starts while its
// identity provider is away, and refuses what it cannot check meanwhile).
func New(opts *Options) (*ResourceServer, error) {
	o := *opts
	u, err := url.Parse(o.Resource)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.Fragment != "" {
		return nil, fmt.Errorf("oauth: the resource %q is not an http(s) URL", o.Resource)
	}
	if len(o.Issuers) == 0 {
		return nil, errors.New("oauth: no authorization server (issuer)")
	}
	if o.Skew <= 0 {
		o.Skew = 30 * time.Second
	}
	if o.Recheck <= 0 {
		o.Recheck = DefaultRecheck
	}
	rs := &ResourceServer{opts: o, client: o.Client, issuers: map[string]*issuer{}, log: zerolog.Nop()}
	if rs.client == nil {
		// The introspection carries the token and this server's secret: to
		// the authorization server's origin only.
		rs.client = &http.Client{Timeout: 10 * time.Second, CheckRedirect: transport.CheckRedirect}
	}
	if o.Logger != nil {
		rs.log = *o.Logger
	}
	rs.metaPath = "/.well-known/oauth-protected-resource" + strings.TrimSuffix(u.EscapedPath(), "/")
	rs.metaURL = u.Scheme + "://" + u.Host + rs.metaPath
	for _, id := range o.Issuers {
		if iu, err := url.Parse(id); err != nil || (iu.Scheme != "https" && iu.Scheme != "http") || iu.Host == "" || iu.RawQuery != "" || iu.Fragment != "" {
			return nil, fmt.Errorf("oauth: the issuer %q is not an http(s) URL without query or fragment", id)
		}
		is := &issuer{id: id, rs: rs}
		rs.issuers[id] = is
		rs.order = append(rs.order, is)
	}
	rs.intro = &introspector{rs: rs}
	return rs, nil
}

// MetadataPaths are the paths the protected resource metadata is served at
// (RFC 9728): the path-specific one, and the root.
func (rs *ResourceServer) MetadataPaths() []string {
	const root = "/.well-known/oauth-protected-resource"
	if rs.metaPath == root {
		return []string{root}
	}
	return []string{rs.metaPath, root}
}

// Resource is the canonical URI tokens must be issued for.
func (rs *ResourceServer) Resource() string { return rs.opts.Resource }

// MetadataHandler serves the protected resource metadata document.
func (rs *ResourceServer) MetadataHandler() http.Handler {
	scopes := slices.Clone(rs.opts.Scopes)
	for _, ss := range rs.opts.ToolScopes {
		for _, s := range ss {
			if !slices.Contains(scopes, s) {
				scopes = append(scopes, s)
			}
		}
	}
	slices.Sort(scopes)
	// [MCP 2025-11-25 / 2026-07-28, authorization] MCP servers MUST
	// implement OAuth 2.0 Protected Resource Metadata; the document MUST
	// include authorization_servers.
	doc := map[string]any{
		"resource":                 rs.opts.Resource,
		"authorization_servers":    rs.opts.Issuers,
		"bearer_methods_supported": []string{"header"},
		"resource_name":            "mcp-resume",
	}
	// [RFC 9728 §3.2] Claims with zero elements MUST be omitted from the
	// response: never null (a client's schema refuses null, and with it the
	// whole document).
	if len(scopes) > 0 {
		doc["scopes_supported"] = scopes
	}
	body, _ := json.Marshal(doc)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "max-age=3600")
		w.Header().Set("Access-Control-Allow-Origin", "*")
		_, _ = w.Write(body)
	})
}

// Token is what an accepted access token says.
type Token struct {
	Issuer, Subject string
	Scopes          []string
	Expiry          time.Time // zero: none said
	key             bool      // an API key of Options.Keys (Subject its principal)
	introspected    bool      // checked by introspection, at checked
	checked         time.Time
}

// Principal is the token's issuer and subject: who its requests, tasks, keys
// and limits belong to (an API key's principal for a key: such a name has no
// colon, an issuer has one).
func (t *Token) Principal() string {
	if t.key {
		return t.Subject
	}
	return t.Issuer + "#" + t.Subject
}

// Authenticate checks the access token r carries (transport.Authenticator):
// its Identity, or r answered with the refusal (401 and a challenge naming
// the metadata and the scope; 403 insufficient_scope; 503 when an
// authorization server cannot be reached) and false. The Identity's Expiry
// is the token's (with the skew) or, for an introspected token, at most
// Options.Recheck after its introspection, when its Renew introspects it
// again; a request served through Bound has its context end when the token
// is no longer valid.
func (rs *ResourceServer) Authenticate(w http.ResponseWriter, r *http.Request) (transport.Identity, bool) {
	addr, forwarded := rs.clientAddr(r)
	tok, ref := rs.check(r.Context(), r.Header.Get("Authorization"), source{key: sourceKey(addr), forwarded: forwarded})
	if ref != nil {
		ref.Write(w, nil)
		return transport.Identity{}, false
	}
	id := transport.Identity{
		Principal:   tok.Principal(),
		Expiry:      rs.validUntil(tok),
		ToolRefusal: func(tool string) *transport.Refusal { return rs.toolRefusal(tok, tool) },
	}
	if tok.introspected {
		_, raw, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		id.Renew = rs.renewal(strings.TrimSpace(raw), tok.Principal())
	}
	transport.Arm(r.Context(), id)
	return id, true
}

// renewRetry is how long what an introspected token authenticates lives on
// when its authorization server cannot be asked about it again.
const renewRetry = time.Minute

// renewal is the Identity.Renew of raw, an introspected token of principal:
// it introspects raw again (RFC 7662 leaves to the protected resource how
// long it trusts an answer) and says until when what raw authenticates
// stays valid: a token now inactive (revoked), or another principal's, or
// without the server's scopes, is not; one the authorization server cannot
// be asked about lives renewRetry longer, and is asked again then (a brief
// outage of the authorization server closes no connection).
func (rs *ResourceServer) renewal(raw, principal string) func(context.Context) (time.Time, bool) {
	return func(ctx context.Context) (time.Time, bool) {
		now := time.Now()
		tok, reason, _ := rs.intro.introspect(ctx, raw, now)
		switch {
		case tok == nil && reason == ReasonUnavailable:
			return now.Add(renewRetry), true
		case tok == nil || tok.Principal() != principal || len(uncovered(tok.Scopes, rs.opts.Scopes)) > 0:
			return time.Time{}, false
		}
		return rs.validUntil(tok), true
	}
}

var _ transport.Authenticator = (*ResourceServer)(nil)

// validUntil is when what tok authenticates stops being valid (zero: never):
// its expiry, as long as it is accepted (with the skew); for an introspected
// token, Options.Recheck after its introspection when that is sooner (RFC
// 7662 leaves to the protected resource how long it trusts an answer; a
// revocation is seen within Recheck).
func (rs *ResourceServer) validUntil(tok *Token) time.Time {
	var exp time.Time
	if !tok.Expiry.IsZero() {
		exp = tok.Expiry.Add(rs.opts.Skew)
	}
	if tok.introspected {
		if again := tok.checked.Add(rs.opts.Recheck); exp.IsZero() || again.Before(exp) {
			exp = again
		}
	}
	return exp
}

// source is where a request comes from, for the limit on introspections:
// its key (sourceKey), and whether it came through a proxy that is not
// trusted.
type source struct {
	key       string
	forwarded bool
}

// Check checks authorization, the Authorization header of a request from
// remote (its address, for the limit on introspections): the token, or the
// refusal to answer with.
func (rs *ResourceServer) Check(ctx context.Context, authorization, remote string) (*Token, *transport.Refusal) {
	return rs.check(ctx, authorization, source{key: sourceKey(remote)})
}

func (rs *ResourceServer) check(ctx context.Context, authorization string, src source) (*Token, *transport.Refusal) {
	scheme, raw, _ := strings.Cut(authorization, " ")
	raw = strings.TrimSpace(raw)
	switch {
	case authorization == "":
		return nil, rs.refuse(ReasonMissing, "", "an access token is required: send Authorization: Bearer <token>")
	case !strings.EqualFold(scheme, "Bearer") || raw == "" || strings.ContainsAny(raw, " \t"):
		return nil, rs.refuse(ReasonMalformed, "invalid_request", "the Authorization header must be Bearer <token>")
	case len(raw) > maxTokenBytes:
		return nil, rs.refuse(ReasonMalformed, "invalid_token", "the access token is too long")
	}
	if rs.opts.Keys != nil {
		if p, ok := rs.opts.Keys.Lookup(raw); ok {
			return &Token{Subject: p, key: true}, nil
		}
	}
	var tok *Token
	var reason spec.Reason
	var desc string
	if strings.Count(raw, ".") == 2 {
		tok, reason, desc = rs.verifiedJWT(ctx, raw)
	} else {
		tok, reason, desc = rs.intro.check(ctx, raw, src)
	}
	if tok == nil {
		switch reason {
		case ReasonRateLimited:
			rs.refused(reason)
			return nil, &transport.Refusal{Status: http.StatusTooManyRequests, Err: spec.RateLimited(reason, desc, time.Second)}
		case ReasonUnavailable:
			rs.refused(reason)
			return nil, &transport.Refusal{Status: http.StatusServiceUnavailable, Err: spec.NewError(spec.CodeInternalError, reason, desc)}
		}
		return nil, rs.refuse(reason, "invalid_token", desc)
	}
	if missing := uncovered(tok.Scopes, rs.opts.Scopes); len(missing) > 0 {
		return nil, rs.insufficient(rs.opts.Scopes)
	}
	return tok, nil
}

// toolRefusal is the answer to a call of tool by tok: nil when tok covers
// the tool's scopes, else 403 insufficient_scope with every scope the call
// needs.
func (rs *ResourceServer) toolRefusal(tok *Token, tool string) *transport.Refusal {
	need := rs.opts.ToolScopes[tool]
	if f := rs.opts.ToolScopesOf; f != nil {
		need = f(tool)
	}
	if len(need) == 0 || tok.key || len(uncovered(tok.Scopes, need)) == 0 {
		return nil
	}
	// [MCP 2026-07-28, authorization: step-up] servers SHOULD include all
	// scopes required for the current operation in a single challenge.
	return rs.insufficient(JoinScopes(rs.opts.Scopes, need))
}

// JoinScopes returns a's scopes and those of b it lacks, in that order; a
// itself (never written to) when b adds none.
func JoinScopes(a, b []string) []string {
	out := slices.Clip(a) // an append copies a first
	for _, s := range b {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// refuse is a 401: [MCP authorization, error handling] invalid or expired
// tokens MUST receive a HTTP 401 response; the challenge names the metadata
// (RFC 9728) and, as servers SHOULD, the scope.
func (rs *ResourceServer) refuse(reason spec.Reason, code, desc string) *transport.Refusal {
	rs.refused(reason)
	ch := `Bearer resource_metadata="` + rs.metaURL + `"`
	if len(rs.opts.Scopes) > 0 {
		ch += `, scope="` + strings.Join(rs.opts.Scopes, " ") + `"`
	}
	if code != "" {
		ch += `, error="` + code + `", error_description="` + quotable(desc) + `"`
	}
	return &transport.Refusal{Status: http.StatusUnauthorized, Challenge: ch, Err: spec.NewError(spec.CodeInvalidRequest, reason, desc)}
}

// insufficient is a 403 insufficient_scope naming scopes (step-up).
func (rs *ResourceServer) insufficient(scopes []string) *transport.Refusal {
	rs.refused(ReasonScope)
	s := strings.Join(scopes, " ")
	desc := "the access token does not cover the scopes this needs: " + s
	ch := `Bearer error="insufficient_scope", scope="` + s + `", resource_metadata="` + rs.metaURL + `", error_description="` + quotable(desc) + `"`
	e := spec.NewError(spec.CodeInvalidRequest, ReasonScope, desc)
	return &transport.Refusal{Status: http.StatusForbidden, Challenge: ch, Err: e}
}

func (rs *ResourceServer) refused(reason spec.Reason) {
	if rs.opts.OnRefused != nil {
		rs.opts.OnRefused(string(reason))
	}
}

// quotable makes s fit a quoted-string of a challenge.
func quotable(s string) string {
	return strings.NewReplacer(`"`, `'`, `\`, `/`, "\n", " ", "\r", " ").Replace(s)
}

// uncovered returns the scopes of need that granted does not cover. A granted
// scope covers itself and the scopes below it, named with it as a prefix and
// a colon ("files" covers "files:read"): [MCP 2026-07-28, authorization]
// servers MUST account for scope hierarchies, where a broader scope implies
// narrower ones.
func uncovered(granted, need []string) []string {
	var missing []string
	for _, n := range need {
		if !slices.ContainsFunc(granted, func(g string) bool { return g == n || strings.HasPrefix(n, g+":") }) {
			missing = append(missing, n)
		}
	}
	return missing
}

// resourceMatches reports whether v, an aud or resource of a token, names
// this server's resource (RFC 8707): exactly, or but for a trailing slash, a
// scheme or host in another case ([MCP authorization, canonical server URI]
// implementations SHOULD accept uppercase scheme and host components).
func (rs *ResourceServer) resourceMatches(v string) bool {
	want, err1 := url.Parse(rs.opts.Resource)
	got, err2 := url.Parse(v)
	if err1 != nil || err2 != nil {
		return v == rs.opts.Resource
	}
	return strings.EqualFold(want.Scheme, got.Scheme) && strings.EqualFold(want.Host, got.Host) &&
		strings.TrimSuffix(want.EscapedPath(), "/") == strings.TrimSuffix(got.EscapedPath(), "/") && want.RawQuery == got.RawQuery
}

// tokenKey is what a token is remembered by: its hash, never the token.
func tokenKey(raw string) [32]byte { return sha256.Sum256([]byte(raw)) }
