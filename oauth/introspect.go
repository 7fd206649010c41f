package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/mcp-resume/mcp-resume/spec"
)

// introspectKeep bounds how long an introspection's answer is kept for its
// token (never past the token's expiry): a client sends its token with every
// request, and the authorization server is asked about it once a while.
const introspectKeep = 30 * time.Second

// knownGoodFor bounds how long a token found active skips the limit on
// introspections when it is introspected again (never past its expiry).
const knownGoodFor = time.Hour

// introspector checks opaque tokens with RFC 7662 introspection, at the
// endpoint Options.Introspection names or the issuers' metadata give.
type introspector struct {
	rs *ResourceServer

	kept  checkedCache    // every verdict, for introspectKeep
	good  checkedCache    // tokens found active: they skip limit (only an active token enters, so made-up ones cannot push them out)
	limit introspectLimit // introspections of tokens not known good

	warnForwarded sync.Once // the operator is told once of a proxy not trusted
	warnNoSubject sync.Once // and of tokens that name no subject
}

// introspection is what an introspection answer says (RFC 7662 §2.2).
type introspection struct {
	Active   bool     `json:"active"`
	Scope    string   `json:"scope"`
	Sub      string   `json:"sub"`
	Iss      string   `json:"iss"`
	Exp      *float64 `json:"exp"`
	Nbf      *float64 `json:"nbf"`
	Aud      any      `json:"aud"`
	Resource any      `json:"resource"`
	Username string   `json:"username"`
	ClientID string   `json:"client_id"`
}

// check checks raw, an opaque token a request from src carries.
func (in *introspector) check(ctx context.Context, raw string, src source) (*Token, spec.Reason, string) {
	key := tokenKey(raw)
	now := time.Now()
	if v, ok := in.kept.get(key, now); ok {
		return v.tok, v.reason, v.desc
	}
	if _, known := in.good.get(key, now); !known && !in.limit.allow(src.key, now) {
		if src.forwarded {
			in.warnForwarded.Do(func() {
				in.rs.log.Warn().Msg("requests come through a proxy (X-Forwarded-For) that is not trusted: every client behind it shares one limit on new opaque tokens, and one client's made-up tokens hold back the others'; name the proxy in Options.TrustedProxies (--oauth-trusted-proxy)")
			})
		}
		return nil, ReasonRateLimited, "too many new tokens from this address, or from all; retry in a moment"
	}
	return in.introspect(ctx, raw, now)
}

// introspect asks the authorization server about raw now, and keeps its
// verdict.
func (in *introspector) introspect(ctx context.Context, raw string, now time.Time) (*Token, spec.Reason, string) {
	key := tokenKey(raw)
	endpoint, issuer := in.endpoint(ctx)
	if endpoint == "" {
		return nil, ReasonMalformed, "the access token is not a JWT, and no authorization server of this resource introspects tokens"
	}
	res, err := in.ask(ctx, endpoint, raw)
	var se *statusError
	if errors.As(err, &se) && se.refused && in.rs.opts.IntrospectionClient == "" {
		// The endpoint wants this server to authenticate, and it has no
		// credentials: it cannot check opaque tokens.
		in.rs.log.Warn().Str("endpoint", endpoint).Msg("the introspection endpoint refuses this server: give it client credentials to accept opaque tokens")
		return nil, ReasonMalformed, "the access token is not a JWT, and this server cannot introspect tokens"
	}
	if err != nil {
		in.rs.log.Warn().Str("endpoint", endpoint).Err(err).Msg("token introspection failed")
		return nil, ReasonUnavailable, "the authorization server cannot be asked about the token now; try again later"
	}
	tok, reason, desc := in.judge(res, issuer, now)
	until := now.Add(introspectKeep)
	if tok != nil && !tok.Expiry.IsZero() && tok.Expiry.Before(until) {
		until = tok.Expiry
	}
	in.kept.put(key, verdict{tok: tok, reason: reason, desc: desc, until: until})
	if tok != nil {
		known := now.Add(knownGoodFor)
		if !tok.Expiry.IsZero() && tok.Expiry.Before(known) {
			known = tok.Expiry
		}
		in.good.put(key, verdict{tok: tok, until: known})
	}
	return tok, reason, desc
}

// endpoint is the introspection endpoint to ask, and the issuer it answers
// for ("" when Options.Introspection names it and one issuer is configured:
// that one; else the token's iss decides).
func (in *introspector) endpoint(ctx context.Context) (string, string) {
	rs := in.rs
	if rs.opts.Introspection != "" {
		if len(rs.order) == 1 {
			return rs.opts.Introspection, rs.order[0].id
		}
		return rs.opts.Introspection, ""
	}
	for _, is := range rs.order {
		if meta, _, _ := is.state(ctx, ""); meta != nil && meta.IntrospectionEndpoint != "" {
			return meta.IntrospectionEndpoint, is.id
		}
	}
	return "", ""
}

// ask posts the token to endpoint.
func (in *introspector) ask(ctx context.Context, endpoint, raw string) (*introspection, error) {
	rs := in.rs
	form := url.Values{"token": {raw}, "token_type_hint": {"access_token"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if rs.opts.IntrospectionClient != "" {
		req.SetBasicAuth(url.QueryEscape(rs.opts.IntrospectionClient), url.QueryEscape(rs.opts.IntrospectionSecret))
	}
	resp, err := rs.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxDocBytes))
	if err != nil {
		return nil, err
	}
	var res introspection
	switch {
	case resp.StatusCode == http.StatusOK:
		if err := json.Unmarshal(b, &res); err != nil {
			return nil, err
		}
	case resp.StatusCode == http.StatusUnauthorized && json.Unmarshal(b, &res) == nil && !res.Active && strings.Contains(string(b), `"active"`):
		// An inactive token answered 401 (some servers do, RFC 7662 says 200).
	default:
		s := resp.StatusCode
		return nil, &statusError{status: resp.Status, refused: s == http.StatusBadRequest || s == http.StatusUnauthorized || s == http.StatusForbidden}
	}
	return &res, nil
}

// statusError is an introspection answered with a status other than 200;
// refused: one that says the server is not let in (400, 401, 403).
type statusError struct {
	status  string
	refused bool
}

func (e *statusError) Error() string { return "introspection answered " + e.status }

// judge decides what an introspection answer means for this server.
func (in *introspector) judge(res *introspection, issuer string, now time.Time) (*Token, spec.Reason, string) {
	rs := in.rs
	if !res.Active {
		return nil, ReasonInactive, "the access token is not active (expired, revoked or unknown)"
	}
	if res.Iss != "" {
		issuer = ""
		for _, is := range rs.order { // as configured, but for a trailing slash
			if strings.TrimSuffix(is.id, "/") == strings.TrimSuffix(res.Iss, "/") {
				issuer = is.id
			}
		}
		if issuer == "" {
			return nil, ReasonUnknownIssuer, "the access token was not issued by an authorization server of this resource"
		}
	}
	if issuer == "" {
		return nil, ReasonUnknownIssuer, "the introspection names no issuer, and several are configured"
	}
	if res.Exp != nil && now.After(time.Unix(int64(*res.Exp), 0).Add(rs.opts.Skew)) {
		return nil, ReasonExpired, "the access token has expired"
	}
	if res.Nbf != nil && now.Add(rs.opts.Skew).Before(time.Unix(int64(*res.Nbf), 0)) {
		return nil, ReasonNotYetValid, "the access token is not valid yet"
	}
	// [MCP authorization] servers MUST only accept tokens issued for
	// themselves: the answer must name this resource.
	if !rs.resourceClaimMatches(res.Aud) && !rs.resourceClaimMatches(res.Resource) {
		return nil, ReasonWrongAudience, "the access token was not issued for this resource (" + rs.opts.Resource + ")"
	}
	sub := res.Sub
	if sub == "" {
		sub = res.Username
	}
	switch {
	case sub != "":
	case rs.opts.ClientPrincipal && res.ClientID != "":
		sub = "client:" + res.ClientID
	default:
		// A principal made of nothing would be every such token's: one
		// user's requests, tasks and limits would be all users'.
		in.warnNoSubject.Do(func() {
			msg := "introspected tokens name no subject (sub or username) and are refused"
			if res.ClientID != "" {
				msg += "; to take their client (client_id) as their principal, set Options.ClientPrincipal (--oauth-client-principal): every user of one client is then one principal"
			}
			rs.log.Warn().Msg(msg)
		})
		return nil, ReasonNoSubject, "the introspection of the access token names no subject (sub or username): this server cannot tell whose it is"
	}
	t := &Token{Issuer: issuer, Subject: sub, Scopes: strings.Fields(res.Scope), checked: now, introspected: true}
	if res.Exp != nil {
		t.Expiry = time.Unix(int64(*res.Exp), 0)
	}
	return t, "", ""
}
