package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/mcp-resume/mcp-resume/gateway"
	"github.com/mcp-resume/mcp-resume/internal/backoff"
	"github.com/mcp-resume/mcp-resume/oauth"
	"github.com/mcp-resume/mcp-resume/transport"
)

const (
	// envIntrospectionSecret holds the secret of --oauth-client-id, which
	// authenticates the server to an introspection endpoint.
	envIntrospectionSecret = "MCP_RESUME_OAUTH_CLIENT_SECRET"
	// envUpstreamSecret holds the secret of --upstream-oauth-client-id.
	envUpstreamSecret = "MCP_RESUME_UPSTREAM_CLIENT_SECRET"
)

// oauthFlags are the flags of serve and gateway as an OAuth 2.1 protected
// resource, and of the gateway as an OAuth client of its upstream.
type oauthFlags struct {
	issuers       listFlag
	introspection string
	clientID      string
	scopes        string
	toolScopes    listFlag
	publicURL     string
	trustedProxy  listFlag
	clientPrinc   bool

	upstreamClientID string
	upstreamIssuer   string
	upstreamScopes   string
}

// listFlag is a repeatable flag whose values may also be comma-separated.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(s string) error {
	*l = append(*l, splitList(s)...)
	return nil
}

func (o *oauthFlags) register(fs *flag.FlagSet, gw bool) {
	fs.Var(&o.issuers, "oauth-issuer", "accept OAuth 2.1 access tokens from this authorization server (its issuer URL; metadata by RFC 8414 or OpenID Connect discovery) on HTTP and WebSocket, and serve protected resource metadata (RFC 9728) at /.well-known/oauth-protected-resource (repeatable). With --api-keys, the keys work too")
	fs.StringVar(&o.introspection, "oauth-introspection", "", "with --oauth-issuer: the RFC 7662 introspection endpoint for opaque tokens, when the issuer's metadata names none")
	fs.StringVar(&o.clientID, "oauth-client-id", "", "with --oauth-issuer: this server's client id at the introspection endpoint; its secret is read from "+envIntrospectionSecret)
	fs.StringVar(&o.scopes, "oauth-scope", "", "with --oauth-issuer: scopes every request's token must carry, comma-separated (named in the 401 challenge)")
	fs.Var(&o.toolScopes, "oauth-tool-scope", "with --oauth-issuer: `TOOL=SCOPE[ SCOPE]`, scopes a call of TOOL needs besides --oauth-scope; a token without them gets 403 insufficient_scope naming them (step-up) (repeatable)")
	fs.Var(&o.trustedProxy, "oauth-trusted-proxy", "with --oauth-issuer: `CIDR` of a reverse proxy in front of this server, whose X-Forwarded-For names the client, for the limit on new opaque tokens per client (repeatable, or comma-separated; an address alone is one host). Without it X-Forwarded-For is not read, and every client behind a proxy shares the proxy's limit")
	fs.BoolVar(&o.clientPrinc, "oauth-client-principal", false, "with --oauth-issuer: an introspected token that names no subject (neither sub nor username) belongs to its client (client_id), and every user of one client is one principal; without it such a token is refused (no_subject)")
	fs.StringVar(&o.publicURL, "public-url", "", "with --oauth-issuer: the MCP endpoint's URL as clients reach it, the resource tokens must be issued for (RFC 8707) (default: http://ADDR/PATH of the --http listener, which must then be loopback)")
	if gw {
		fs.StringVar(&o.upstreamClientID, "upstream-oauth-client-id", "", "with --upstream: call the upstream with tokens of the client credentials grant of this client id (its secret read from "+envUpstreamSecret+") at --upstream-oauth-issuer, for the resource the upstream's protected resource metadata names (its URL when it has none); the clients' own tokens are never sent upstream")
		fs.StringVar(&o.upstreamIssuer, "upstream-oauth-issuer", "", "with --upstream-oauth-client-id (required): the issuer of the authorization server the client is registered at; its secret goes to that issuer's token endpoint only, as its own metadata names it, and an upstream naming other authorization servers is refused")
		fs.StringVar(&o.upstreamScopes, "upstream-oauth-scope", "", "with --upstream-oauth-client-id: scopes asked for, comma-separated (default: those the upstream's challenge or metadata name)")
	}
}

// addToolScopes adds the scopes a policy file names for its tools to
// --oauth-tool-scope's (the two add up for a tool named in both).
func (o *oauthFlags) addToolScopes(scopes map[string][]string) error {
	if len(scopes) == 0 {
		return nil
	}
	if len(o.issuers) == 0 {
		return errors.New("--config names scopes for tools: they go with --oauth-issuer")
	}
	for _, name := range slices.Sorted(maps.Keys(scopes)) {
		o.toolScopes = append(o.toolScopes, name+"="+strings.Join(scopes[name], " "))
	}
	return nil
}

// check refuses flags that go with others missing.
func (o *oauthFlags) check(f *serveFlags) error {
	if len(o.issuers) == 0 {
		for _, v := range []struct{ name, val string }{{"--oauth-introspection", o.introspection}, {"--oauth-client-id", o.clientID},
			{"--oauth-scope", o.scopes}, {"--public-url", o.publicURL}, {"--oauth-tool-scope", o.toolScopes.String()},
			{"--oauth-trusted-proxy", o.trustedProxy.String()}} {
			if v.val != "" {
				return fmt.Errorf("%s goes with --oauth-issuer", v.name)
			}
		}
		if o.clientPrinc {
			return errors.New("--oauth-client-principal goes with --oauth-issuer")
		}
	}
	if len(o.issuers) > 0 && f.stdio {
		return errors.New("--oauth-issuer protects the HTTP and WebSocket listeners; on --stdio the client is the process that started this one")
	}
	if o.upstreamClientID == "" && (o.upstreamScopes != "" || o.upstreamIssuer != "") {
		return errors.New("--upstream-oauth-scope and --upstream-oauth-issuer go with --upstream-oauth-client-id")
	}
	if o.upstreamClientID != "" {
		switch {
		case f.upstream == "":
			return errors.New("--upstream-oauth-client-id goes with --upstream")
		case o.upstreamIssuer == "":
			return errors.New("--upstream-oauth-client-id: give --upstream-oauth-issuer, the issuer of the authorization server the client is registered at (its secret goes there and nowhere else)")
		case f.upstreamTokenEnv != "":
			return errors.New("--upstream-oauth-client-id and --upstream-token-env both give the upstream's credentials: give one")
		case os.Getenv(envUpstreamSecret) == "":
			return fmt.Errorf("--upstream-oauth-client-id: %s is not set or empty", envUpstreamSecret)
		}
		if err := oauth.CheckIssuer(o.upstreamIssuer); err != nil {
			return fmt.Errorf("--upstream-oauth-issuer: %w", err)
		}
	}
	return nil
}

// upstreamWrap is the gateway's own OAuth client of its upstream
// (--upstream-oauth-client-id): a machine's, the client credentials grant at
// the authorization server --upstream-oauth-issuer; nil without.
func (o *oauthFlags) upstreamWrap(upstream string, log *zerolog.Logger) func(http.RoundTripper) http.RoundTripper {
	if o.upstreamClientID == "" {
		return nil
	}
	return machineClient(upstream, o.upstreamClientID, os.Getenv(envUpstreamSecret), o.upstreamIssuer, splitList(o.upstreamScopes), log)
}

// machineClient is the gateway's own OAuth client of upstream: the client
// credentials grant of clientID at issuer, under each request to it.
func machineClient(upstream, clientID, secret, issuer string, scopes []string, log *zerolog.Logger) func(http.RoundTripper) http.RoundTripper {
	return wrap(oauth.NewSession(upstream, &oauth.ClientOptions{
		Machine: true, ClientID: clientID, ClientSecret: secret, ClientIssuer: issuer, Scopes: scopes, Logger: log,
	}))
}

// authn is how serve authenticates the requests of its network transports.
type authn struct {
	auth transport.Authenticator // nil: none
	rs   *oauth.ResourceServer   // nil without --oauth-issuer
	// ups are the resource servers of a gateway of several's upstreams' own
	// endpoints (/servers/NAME/mcp), each a protected resource of its own.
	ups map[string]*oauth.ResourceServer
	// agg is the gateway of several, once started: a tool's scopes are
	// those named for it by the name the aggregate serves it under and by
	// its upstream's (UPSTREAM/TOOL), on either endpoint.
	agg        atomic.Pointer[gateway.Aggregate]
	refusals   *prometheus.CounterVec // refused requests by reason
	unverified []string               // issuers not reached at start (watch)
}

// of is the authenticator of the endpoint of upstream ("" for the
// process's own).
func (a *authn) of(upstream string) transport.Authenticator {
	if rs := a.ups[upstream]; rs != nil {
		return rs
	}
	return a.auth
}

// servers are the resource servers: the process's own, then its upstreams'.
func (a *authn) servers() []*oauth.ResourceServer {
	out := []*oauth.ResourceServer{a.rs}
	for _, name := range slices.Sorted(maps.Keys(a.ups)) {
		out = append(out, a.ups[name])
	}
	return out
}

// newAuthn makes the authentication of the flags: OAuth (with keys beside it)
// when --oauth-issuer is given, else keys, else none. With OAuth, each of
// upstreams (a gateway of several's) is a protected resource of its own, at
// its endpoint's URL: a token is issued for one endpoint (RFC 8707).
func newAuthn(f *serveFlags, bound *listeners, keys *transport.KeySet, upstreams []string, log zerolog.Logger) (*authn, error) {
	a := &authn{refusals: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mcp_resume_auth_refusals_total",
		Help: "requests refused by authentication, by reason (missing_token, expired_token, wrong_audience, insufficient_scope, ...)"}, []string{"reason"})}
	o := &f.oauth
	if len(o.issuers) == 0 {
		if keys != nil {
			a.auth = countedKeys{keys, a.refusals}
		}
		return a, nil
	}
	resource := o.publicURL
	if resource == "" {
		ln, flagName := bound.http, "--http"
		if ln == nil {
			ln, flagName = bound.ws, "--ws"
		}
		if host, _, _ := net.SplitHostPort(ln.Addr().String()); !net.ParseIP(host).IsLoopback() {
			return nil, fmt.Errorf("--oauth-issuer: give --public-url, the MCP endpoint's URL as clients reach it (%s is not loopback)", flagName)
		}
		resource = "http://" + ln.Addr().String() + f.path
	}
	toolScopes := map[string][]string{}
	for _, ts := range o.toolScopes {
		name, scopes, ok := strings.Cut(ts, "=")
		if !ok || name == "" || strings.TrimSpace(scopes) == "" {
			return nil, fmt.Errorf("--oauth-tool-scope %q: want TOOL=SCOPE[ SCOPE]", ts)
		}
		toolScopes[name] = append(toolScopes[name], strings.Fields(scopes)...)
	}
	if o.introspection != "" {
		if u, err := url.Parse(o.introspection); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return nil, fmt.Errorf("--oauth-introspection %q: not an http(s) URL", o.introspection)
		}
	}
	var proxies []netip.Prefix
	for _, p := range o.trustedProxy {
		pr, err := netip.ParsePrefix(p)
		if err != nil {
			a, aerr := netip.ParseAddr(p)
			if aerr != nil {
				return nil, fmt.Errorf("--oauth-trusted-proxy %q: not an address or a CIDR prefix", p)
			}
			pr = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
		}
		proxies = append(proxies, pr.Masked())
	}
	secret := os.Getenv(envIntrospectionSecret)
	if (o.clientID == "") != (secret == "") {
		return nil, fmt.Errorf("--oauth-client-id and %s go together", envIntrospectionSecret)
	}
	opts := oauth.Options{
		Resource: resource, Issuers: o.issuers, Introspection: o.introspection,
		IntrospectionClient: o.clientID, IntrospectionSecret: secret,
		Scopes: splitList(o.scopes), ToolScopes: toolScopes,
		Keys:            keys,
		OnRefused:       func(reason string) { a.refusals.WithLabelValues(reason).Inc() },
		Logger:          &log,
		TrustedProxies:  proxies,
		ClientPrincipal: o.clientPrinc,
	}
	if len(upstreams) > 0 {
		opts.ToolScopesOf = func(tool string) []string {
			need := toolScopes[tool]
			if agg := a.agg.Load(); agg != nil {
				if g, name, ok := agg.Route(tool); ok {
					need = oauth.JoinScopes(need, toolScopes[gateway.LimitName(g.Name(), name)])
				}
			}
			return need
		}
	}
	rs, err := oauth.New(&opts)
	if err != nil {
		return nil, fmt.Errorf("--oauth-issuer: %w", err)
	}
	a.auth, a.rs = rs, rs
	if len(upstreams) > 0 {
		base, ok := strings.CutSuffix(resource, f.path)
		if !ok {
			return nil, fmt.Errorf("--public-url %s: for a gateway of several, the URL of --path (%s), under which /servers/NAME/mcp are", resource, f.path)
		}
		a.ups = map[string]*oauth.ResourceServer{}
		for _, name := range upstreams {
			up := opts
			up.Resource = base + serversPath + name + "/mcp"
			up.ToolScopesOf = func(tool string) []string {
				need := toolScopes[gateway.LimitName(name, tool)]
				if agg := a.agg.Load(); agg != nil {
					if served, ok := agg.NameOf(name, tool); ok {
						need = oauth.JoinScopes(need, toolScopes[served])
					}
				}
				return need
			}
			if a.ups[name], err = oauth.New(&up); err != nil {
				return nil, fmt.Errorf("--oauth-issuer: upstream %s: %w", name, err)
			}
		}
	}
	// Every resource server checks the issuers (each keeps their metadata
	// for its tokens), at once: an issuer not reached holds the start back
	// once, not once per server.
	servers := a.servers()
	unverified := make([][]string, len(servers))
	errs := make([]error, len(servers))
	var wg sync.WaitGroup
	for i, rs := range servers {
		wg.Go(func() { unverified[i], errs[i] = verifyIssuers(rs, o, log) })
	}
	wg.Wait()
	for i := range servers {
		if errs[i] != nil {
			return nil, errs[i]
		}
		a.unverified = oauth.JoinScopes(a.unverified, unverified[i])
	}
	return a, nil
}

// issuerCheckWait bounds the check of the issuers' metadata at start.
const issuerCheckWait = 10 * time.Second

// verifyIssuers checks every issuer's metadata as serve starts (RFC 8414
// §3.3: the issuer it names must be the one given): a definite mistake (it
// names another issuer, it is no authorization server's, it has nothing to
// check tokens with) stops serve with what to give instead, since every
// client's login would fail on the client's side; an issuer that cannot be
// reached now is said loudly and returned, to be checked again in the
// background (watch): a server starts while its identity provider is
// briefly down, and refuses its tokens (503) meanwhile.
func verifyIssuers(rs *oauth.ResourceServer, o *oauthFlags, log zerolog.Logger) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), issuerCheckWait)
	defer cancel()
	errs := make([]error, len(o.issuers))
	var wg sync.WaitGroup
	for i, id := range o.issuers {
		wg.Go(func() { errs[i] = rs.VerifyIssuer(ctx, id) })
	}
	wg.Wait()
	var unreachable []string
	for i, err := range errs {
		var ie *oauth.IssuerError
		switch {
		case err == nil:
		case errors.As(err, &ie) && ie.Unreachable:
			log.Error().Str("issuer", o.issuers[i]).Err(err).Msg("the authorization server cannot be reached: its tokens are refused (503) until it answers, and its metadata is checked then (tried again in the background); if its address is wrong, stop and fix --oauth-issuer")
			unreachable = append(unreachable, o.issuers[i])
		default:
			return nil, issuerFix(err, o)
		}
	}
	return unreachable, nil
}

// issuerFix is err, a definite mistake in an issuer, with what to give
// instead.
func issuerFix(err error, o *oauthFlags) error {
	var ie *oauth.IssuerError
	if !errors.As(err, &ie) {
		return fmt.Errorf("--oauth-issuer: %w", err)
	}
	msg := fmt.Sprintf("--oauth-issuer %s: %s", ie.Issuer, ie.Problem)
	switch {
	case ie.Want != "":
		msg += fmt.Sprintf("; give --oauth-issuer %s (the issuer identifier exactly as its metadata spells it)", ie.Want)
	case strings.Contains(ie.Problem, "jwks_uri"):
		msg += "; give its introspection endpoint with --oauth-introspection"
	default:
		msg += "; give the authorization server's issuer identifier: the \"issuer\" of its metadata (/.well-known/oauth-authorization-server or /.well-known/openid-configuration)"
	}
	return errors.New(msg)
}

// watch checks again, in the background until ctx ends, the issuers that
// could not be reached at start, saying when each answers and whether its
// metadata holds; stop waits for it.
func (a *authn) watch(ctx context.Context, log zerolog.Logger) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, id := range a.unverified {
		wg.Go(func() {
			pause := backoff.Double(time.Second, time.Minute)
			for backoff.Sleep(ctx, backoff.Jitter(pause.Next())) {
				var err error
				for _, rs := range a.servers() {
					tctx, tcancel := context.WithTimeout(ctx, issuerCheckWait)
					err = rs.VerifyIssuer(tctx, id)
					tcancel()
					if err != nil {
						break
					}
				}
				var ie *oauth.IssuerError
				switch {
				case err == nil:
					log.Warn().Str("issuer", id).Msg("the authorization server answers now, and its metadata holds: its tokens are accepted")
					return
				case errors.As(err, &ie) && ie.Unreachable:
					continue
				default:
					log.Error().Str("issuer", id).Msg("the authorization server answers now, but " + issuerFix(err, &oauthFlags{}).Error() + "; its tokens are refused: restart with the issuer fixed")
					return
				}
			}
		})
	}
	return func() {
		cancel()
		wg.Wait()
	}
}

// countedKeys is a KeySet whose refusals are counted (missing_token, or
// invalid_key for a key it does not know).
type countedKeys struct {
	keys     *transport.KeySet
	refusals *prometheus.CounterVec
}

func (c countedKeys) Authenticate(w http.ResponseWriter, r *http.Request) (transport.Identity, bool) {
	id, ok := c.keys.Authenticate(w, r)
	if !ok {
		reason := "invalid_key"
		if r.Header.Get("Authorization") == "" {
			reason = "missing_token"
		}
		c.refusals.WithLabelValues(reason).Inc()
	}
	return id, ok
}

// bound is h, whose requests' contexts end when their credentials stop being
// valid (transport.Bound: an event stream on an introspected token ends at
// its recheck, on a JWT at its expiry, on an API key when a reload removed
// it); h itself without authentication.
func (a *authn) bound(h http.Handler) http.Handler {
	if a == nil || a.auth == nil {
		return h
	}
	return transport.Bound(h)
}

// register serves the protected resource metadata on mux (without
// authentication: it is how a client learns where to log in).
func (a *authn) register(mux *http.ServeMux) {
	if a.rs == nil {
		return
	}
	h := a.rs.MetadataHandler()
	for _, p := range a.rs.MetadataPaths() {
		mux.Handle(p, h)
	}
	for _, rs := range a.ups { // their path's alone: the root is the process's own
		mux.Handle(rs.MetadataPaths()[0], rs.MetadataHandler())
	}
}

// require serves next only to authenticated requests, as the MCP endpoints
// do: /metrics tells how busy the server is and how many checks fail.
func (a *authn) require(next http.Handler) http.Handler {
	if a.auth == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := a.auth.Authenticate(w, r); ok {
			next.ServeHTTP(w, r)
		}
	})
}
