package oauth

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The URLs a server names to the client (its resource, its metadata, its
// authorization server's issuer and endpoints): which the client accepts, and
// how what a server says reaches a terminal.

// resourceOf is the resource of the MCP server at serverURL (RFC 8707): the
// URL itself without its fragment; a ws:// or wss:// URL in its http:// or
// https:// form, the URL its handshake (an HTTP GET, RFC 6455 §4.1) is sent
// to, the one RFC 9728 §3.3 has the metadata's resource match.
func resourceOf(serverURL string) (*url.URL, error) {
	u, err := url.Parse(serverURL)
	if err != nil {
		return nil, fmt.Errorf("oauth: the server URL %q: %w", serverURL, err)
	}
	switch strings.ToLower(u.Scheme) {
	case "ws":
		u.Scheme = "http"
	case "wss":
		u.Scheme = "https"
	case "http", "https":
	default:
		return nil, fmt.Errorf("oauth: the server URL %q is not http(s) or ws(s)", serverURL)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("oauth: the server URL %q has no host", serverURL)
	}
	u.Fragment, u.RawFragment = "", ""
	return u, nil
}

// origin is u's scheme and host, in lower case, without a default port.
func origin(u *url.URL) string {
	scheme := strings.ToLower(u.Scheme)
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if (scheme == "https" && port == "443") || (scheme == "http" && port == "80") {
		port = ""
	}
	if port != "" {
		host = net.JoinHostPort(host, port)
	} else if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return scheme + "://" + host
}

// sameOrigin reports whether a and b are URLs of one origin.
func sameOrigin(a, b string) bool {
	x, err1 := url.Parse(a)
	y, err2 := url.Parse(b)
	return err1 == nil && err2 == nil && x.Host != "" && origin(x) == origin(y)
}

// sameResource reports whether the resource identifier r is the resource
// want (resourceOf): [RFC 9728 §3.3] "The resource value returned MUST be
// identical to the protected resource's resource identifier value into which
// the well-known URI path suffix was inserted to create the URL used to
// retrieve the metadata", and, for a URL from the WWW-Authenticate header,
// "identical to the URL that the client used to make the request". Identical
// as URLs (RFC 3986 §6.2.2-6.2.3): the scheme and host in any case, a default
// port written or not, a trailing slash aside. Never a prefix: a resource
// above the server's path is another resource.
func sameResource(r string, want *url.URL) bool {
	u, err := url.Parse(r)
	if err != nil || u.Host == "" || u.Fragment != "" || u.User != nil {
		return false
	}
	return origin(u) == origin(want) && u.RawQuery == want.RawQuery &&
		strings.TrimSuffix(u.EscapedPath(), "/") == strings.TrimSuffix(want.EscapedPath(), "/")
}

// rootMetadataPath is where a whole origin's protected resource metadata is
// (RFC 9728 §3.1, no path inserted).
const rootMetadataPath = "/.well-known/oauth-protected-resource"

// originWide reports whether the metadata read at from, whose resource is r,
// makes the whole origin of want one resource: r is want's origin and the
// document is the origin's own, at its root well-known URL, which only the
// origin's owner serves (not a URL the server's challenge picked elsewhere).
// Such a resource's tokens go to every path of the origin, as its owner
// declared (the default of Cloudflare's workers-oauth-provider).
func originWide(r, from string, want *url.URL) bool {
	u, err1 := url.Parse(r)
	f, err2 := url.Parse(from)
	if err1 != nil || err2 != nil || u.Fragment != "" || u.RawQuery != "" || u.User != nil || (u.Path != "" && u.Path != "/") {
		return false
	}
	return origin(u) == origin(want) && origin(f) == origin(want) && f.Path == rootMetadataPath && f.RawQuery == ""
}

// isLoopbackHost reports whether host (no port) names this machine:
// localhost or a loopback address.
func isLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// checkEndpoint refuses an authorization server's URL (its issuer, an
// endpoint) that the client must not open, print or send a secret to: not
// printable ASCII (an escape sequence, a bidirectional override, a space),
// not https (http only for a loopback host), with user information (a
// browser shows "https://sso.example.com@evil.example/" as sso.example.com),
// or with a fragment. [RFC 6749 §3.1] The endpoint URI MUST NOT include a
// fragment component; [OAuth 2.1 §1.5] TLS is required for every endpoint
// but a loopback redirect. A file:, javascript: or search-ms: URL would reach
// the operating system's handler (the class of CVE-2025-6514).
func checkEndpoint(what, raw string) error {
	for i := 0; i < len(raw); i++ {
		if raw[i] <= ' ' || raw[i] >= 0x7f {
			return fmt.Errorf("oauth: %s %s is not a URL of printable ASCII: refused", what, quote(raw))
		}
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("oauth: %s %s: %w", what, quote(raw), err)
	}
	switch {
	case u.Host == "" || u.Opaque != "":
		return fmt.Errorf("oauth: %s %s is not an absolute http(s) URL: refused", what, quote(raw))
	case u.User != nil:
		return fmt.Errorf("oauth: %s %s carries user information: refused", what, quote(raw))
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return fmt.Errorf("oauth: %s %s has a fragment: refused (RFC 6749 §3.1)", what, quote(raw))
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && isLoopbackHost(u.Hostname()):
		return nil
	case u.Scheme == "http":
		return fmt.Errorf("oauth: %s %s is plain http off this machine: refused (OAuth needs TLS: https, or http to a loopback address)", what, quote(raw))
	}
	return fmt.Errorf("oauth: %s %s is not an http(s) URL: refused", what, quote(raw))
}

// checkMetadata refuses authorization server metadata the client must not
// use: [MCP authorization] a client MUST refuse to proceed when the server
// does not announce PKCE with S256; no authorization or token endpoint; an
// endpoint checkEndpoint refuses.
func checkMetadata(m *asMetadata) error {
	if m.AuthorizationEndpoint == "" || m.TokenEndpoint == "" {
		return fmt.Errorf("oauth: the authorization server %s names no authorization or token endpoint", quote(m.Issuer))
	}
	var errs []error
	for _, e := range []struct{ what, url string }{
		{"the authorization endpoint", m.AuthorizationEndpoint}, {"the token endpoint", m.TokenEndpoint},
		{"the registration endpoint", m.RegistrationEndpoint}, {"the revocation endpoint", m.RevocationEndpoint},
	} {
		if e.url != "" {
			errs = append(errs, checkEndpoint(e.what+" of "+quote(m.Issuer), e.url))
		}
	}
	return errors.Join(errs...)
}

// maxShown bounds the text of a server shown in an error.
const maxShown = 300

// printable is text a server sent (an error description, a code), fit for a
// terminal: control and format characters (an escape sequence, a
// bidirectional override) and invalid UTF-8 replaced with U+FFFD, at most
// maxShown bytes.
func printable(s string) string {
	if len(s) > maxShown {
		s = s[:maxShown] + "…"
	}
	return strings.Map(func(r rune) rune {
		if r == utf8.RuneError || (!unicode.IsGraphic(r) && r != ' ') {
			return utf8.RuneError
		}
		return r
	}, s)
}

// quote is a URL or name a server sent, quoted for an error message (Go
// syntax: every character that is not printable escaped).
func quote(s string) string {
	if len(s) > maxShown {
		s = s[:maxShown] + "…"
	}
	return fmt.Sprintf("%+q", s)
}
