package oauth_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-resume/mcp-resume/oauth"
)

// goodTokens answers active, for this resource, for the tokens named good-*
// (each its own subject); inactive for the rest.
func goodTokens(token string) map[string]any {
	if !strings.HasPrefix(token, "good-") {
		return nil
	}
	return map[string]any{"active": true, "sub": token, "aud": resource, "scope": "mcp"}
}

// newIntrospecting is a ResourceServer that introspects every opaque token
// at as (one issuer, whose metadata is not needed).
func newIntrospecting(t *testing.T, as *introspectionAS, opts oauth.Options) *oauth.ResourceServer {
	t.Helper()
	opts.Resource = resource
	opts.Issuers = []string{"https://as.example.test"}
	opts.Introspection = as.URL
	rs, err := oauth.New(&opts)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// Walking the addresses of one IPv6 /64 is one source: its made-up tokens
// are limited as one address's are; another /64 is another source.
func TestIntrospectLimitIPv6Prefix(t *testing.T) {
	as := newIntrospectionAS(t, goodTokens)
	rs := newIntrospecting(t, as, oauth.Options{})
	limited := 0
	for i := range 100 {
		if _, status, _ := authenticate(rs, fmt.Sprintf("[2001:db8:1:2::%x]:443", i+1), fmt.Sprintf("made-up-%d", i), ""); status == http.StatusTooManyRequests {
			limited++
		}
	}
	if n := as.Introspections.Load(); n > 30 || limited < 60 {
		t.Errorf("100 made-up tokens from 100 addresses of one /64: %d introspections, %d refused as rate limited", n, limited)
	}
	if _, status, body := authenticate(rs, "[2001:db8:1:3::1]:443", "good-neighbour", ""); status != http.StatusOK {
		t.Errorf("a good token from the next /64: %d %s", status, body)
	}
}

// Behind a reverse proxy the operator names, each client is its own source
// (X-Forwarded-For): one client's made-up tokens do not hold back another's
// first token. X-Forwarded-For from anyone else is not read: it cannot make
// new sources.
func TestIntrospectLimitTrustedProxy(t *testing.T) {
	as := newIntrospectionAS(t, goodTokens)
	proxy := "10.0.0.7:5000"
	flood := func(rs *oauth.ResourceServer, from, xff string) (limited int) {
		for i := range 60 {
			hops := xff
			if hops == "*" {
				hops = fmt.Sprintf("198.51.100.%d", i) // a made-up client per request
			}
			if _, status, _ := authenticate(rs, from, fmt.Sprintf("made-up-%s-%d", from, i), hops); status == http.StatusTooManyRequests {
				limited++
			}
		}
		return limited
	}

	trusting := newIntrospecting(t, as, oauth.Options{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}})
	if n := flood(trusting, proxy, "203.0.113.5:1234, 10.0.0.9"); n < 30 {
		t.Errorf("the attacker behind the trusted proxies was refused %d of 60 times", n)
	}
	if _, status, body := authenticate(trusting, proxy, "good-user", "192.0.2.44:4711"); status != http.StatusOK {
		t.Errorf("another client's first token behind the trusted proxy, during the flood: %d %s", status, body)
	}

	// Without the setting, everyone behind the proxy shares its address.
	plain := newIntrospecting(t, as, oauth.Options{})
	flood(plain, proxy, "203.0.113.5")
	if _, status, _ := authenticate(plain, proxy, "good-user", "192.0.2.44"); status != http.StatusTooManyRequests {
		t.Errorf("behind a proxy not named, a client's first token after another's flood: %d, want 429 (one shared source)", status)
	}
	// A client that writes X-Forwarded-For itself gains nothing.
	if n := flood(plain, "192.0.2.200:1000", "*"); n < 30 {
		t.Errorf("a client varying its own X-Forwarded-For was refused %d of 60 times", n)
	}
}

// Many sources together cost the authorization server no more than the
// global allowance: a thousand addresses, one made-up token each, at once.
func TestIntrospectLimitGlobal(t *testing.T) {
	as := newIntrospectionAS(t, goodTokens)
	rs := newIntrospecting(t, as, oauth.Options{})
	start := time.Now()
	for i := range 1000 {
		authenticate(rs, fmt.Sprintf("192.0.%d.%d:1000", i/250, i%250+1), fmt.Sprintf("made-up-%d", i), "")
	}
	// The global burst, and its rate for the time the loop took.
	want := 100 + 20*int64(time.Since(start).Seconds()+1)
	if n := as.Introspections.Load(); n > want {
		t.Errorf("a thousand sources, one made-up token each: %d introspections, want at most %d", n, want)
	}
}

// A token once found active is introspected again (when what was kept of it
// ends) even while its source, and every source, is past its allowance:
// made-up tokens hold back only tokens nobody has shown to be good.
func TestIntrospectLimitKnownGoodSkips(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		as := &introspectionAS{URL: "http://as.pipe/introspect"}
		n := servePipes(t, as.handler(goodTokens))
		rs := newIntrospecting(t, as, oauth.Options{Client: n.Client(t)})
		const addr = "192.0.2.1:1000"
		if _, status, body := authenticate(rs, addr, "good-owner", ""); status != http.StatusOK {
			t.Fatalf("the owner's token: %d %s", status, body)
		}
		time.Sleep(time.Minute) // what was kept of it has ended
		// Past the allowance: this source's, and the global one (from many sources).
		for i := range 30 {
			authenticate(rs, addr, fmt.Sprintf("made-up-here-%d", i), "")
		}
		for i := range 200 {
			authenticate(rs, fmt.Sprintf("192.0.2.%d:1000", i%100+2), fmt.Sprintf("made-up-%d", i), "")
		}
		if _, status, _ := authenticate(rs, addr, "good-stranger", ""); status != http.StatusTooManyRequests {
			t.Fatalf("a token never seen, past the allowance: %d, want 429", status)
		}
		before := as.Introspections.Load()
		if _, status, body := authenticate(rs, addr, "good-owner", ""); status != http.StatusOK {
			t.Fatalf("the owner's token known good, past the allowance: %d %s", status, body)
		}
		if as.Introspections.Load() != before+1 {
			t.Fatalf("the owner's token was not introspected again")
		}
	})
}

// The introspection carries the token and the server's own credentials to
// the introspection endpoint only: an endpoint answering a redirect to another
// origin is not followed (the token is refused as the endpoint being
// unavailable) and the other origin gets nothing.
func TestIntrospectionFollowsNoRedirect(t *testing.T) {
	other := newIntrospectionAS(t, goodTokens)
	redirecting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redirecting.Close)
	rs := newIntrospecting(t, &introspectionAS{URL: redirecting.URL + "/introspect"},
		oauth.Options{IntrospectionClient: "rs", IntrospectionSecret: "rs-secret"})
	if _, status, body := authenticate(rs, "192.0.2.1:443", "alice", ""); status != http.StatusServiceUnavailable {
		t.Fatalf("a token whose introspection is redirected: %d %s, want 503", status, body)
	}
	if n := other.Introspections.Load(); n != 0 {
		t.Fatalf("the redirect's origin was asked %d times, with the token and the server's secret", n)
	}
}
