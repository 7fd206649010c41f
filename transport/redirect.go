package transport

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// A credential a client of ours attaches (an OAuth access token, an API key,
// a header the user gave) is for the origin it was configured for, and goes
// nowhere else. Every HTTP client that carries one (Streamable HTTP's
// ClientConn, the WebSocket handshake, an OAuth session's own requests)
// follows redirects through CheckRedirect: within that origin only, and never
// one that would change the request's method. The round trippers that attach
// credentials add them again on each hop, so the client's policy, not
// net/http's header stripping (which compares host names and not ports), is
// what keeps them home.

// maxRedirects is how many redirects a request follows, net/http's default.
const maxRedirects = 10

// CheckRedirect is the redirect policy (http.Client.CheckRedirect) of every
// HTTP client that carries a credential of ours. A redirect to another origin
// than the first request's, or one that would send a POST again as a GET, is
// not followed: the redirected request is never sent, and the client's Do
// returns a *RedirectError (in a *url.Error) that names the Location.
func CheckRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= maxRedirects {
		return fmt.Errorf("transport: %s %s: stopped after %d redirects", via[0].Method, via[0].URL.Redacted(), maxRedirects)
	}
	first, last := via[0], via[len(via)-1]
	e := &RedirectError{Method: last.Method, URL: last.URL.Redacted(), Location: req.URL.Redacted()}
	if req.Response != nil {
		e.Status = req.Response.Status
	}
	switch {
	case !SameOrigin(first.URL, req.URL):
		// [RFC 9110 §15.4] Consider removing header fields ... where there are
		// security implications; this includes but is not limited to
		// Authorization and Cookie. The Fetch standard removes Authorization
		// on a redirect to another origin; ours adds it again on every hop, so
		// the hop is not made.
		e.Reason = fmt.Sprintf("another origin (credentials go to %s only); give that URL if it is the server you mean", originText(first.URL))
		return e
	case req.Method != first.Method:
		// [RFC 9110 §15.4.8] the user agent MUST NOT change the request method
		// if it performs an automatic redirection (307; 308 alike): a 301,
		// 302 or 303 of a POST would send it again as a GET, without its
		// body (an MCP message lost without a word).
		e.Reason = fmt.Sprintf("it would send the %s again as a %s, without its body", first.Method, req.Method)
		return e
	}
	return nil
}

// SameOriginClient returns a copy of c (http.DefaultClient when nil) whose
// redirects go through CheckRedirect first, then through c's own
// CheckRedirect when it has one.
func SameOriginClient(c *http.Client) *http.Client {
	if c == nil {
		c = http.DefaultClient
	}
	cc := *c
	own := c.CheckRedirect
	cc.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if err := CheckRedirect(req, via); err != nil || own == nil {
			return err
		}
		return own(req, via)
	}
	return &cc
}

// RedirectError is the error of a redirect a client did not follow
// (CheckRedirect): the request it answered, where it pointed, and why it was
// not followed.
type RedirectError struct {
	Method, URL string // the request the server answered with the redirect
	Status      string // "307 Temporary Redirect"
	Location    string // where it pointed, resolved against URL
	Reason      string
}

func (e *RedirectError) Error() string {
	return fmt.Sprintf("%s %s: %s to %s, not followed: %s", e.Method, e.URL, e.Status, e.Location, e.Reason)
}

// SameOrigin reports whether a and b are one origin ([RFC 6454 §4]: scheme,
// host, port), a port left out being its scheme's default and a WebSocket
// URL counting as its handshake's (ws as http, wss as https). A URL without
// a host is no origin but its own: it is never the same as another.
func SameOrigin(a, b *url.URL) bool {
	oa, ob := originOf(a), originOf(b)
	return oa.host != "" && oa == ob
}

// originText returns u's origin as a URL prefix (http://127.0.0.1:9001), for
// messages.
func originText(u *url.URL) string {
	o := originOf(u)
	return o.scheme + "://" + u.Host
}

type originKey struct{ scheme, host, port string }

func originOf(u *url.URL) originKey {
	o := originKey{scheme: strings.ToLower(u.Scheme), host: strings.ToLower(u.Hostname()), port: u.Port()}
	switch o.scheme {
	case "ws":
		o.scheme = "http"
	case "wss":
		o.scheme = "https"
	}
	if o.port == "" {
		switch o.scheme {
		case "http":
			o.port = "80"
		case "https":
			o.port = "443"
		}
	}
	return o
}
