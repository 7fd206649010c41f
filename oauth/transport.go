package oauth

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/mcp-resume/mcp-resume/transport"
)

// Transport is an http.RoundTripper that carries the session's token on
// every request to the server: a 401 gets the token renewed (or a login), a
// 403 insufficient_scope a login for the scopes it names, and the request is
// sent again with the new token. A request to another origin than the
// server's (a redirect an http.Client followed) is refused before the token
// is attached: the token goes to the server's origin only, and only that
// origin's answers drive discovery and logins. It is safe for concurrent use
// as its Session is: a request waits while another's login holds the Session.
type Transport struct {
	Session *Session
	Base    http.RoundTripper // default http.DefaultTransport
}

func (t *Transport) base() http.RoundTripper {
	if t.Base != nil {
		return t.Base
	}
	return http.DefaultTransport
}

// RoundTrip sends r with the session's token; see Transport. An error of the
// login (the user did not log in, a redirect that was refused, an
// authorization server away) is returned as the request's error, naming it.
func (t *Transport) RoundTrip(r *http.Request) (*http.Response, error) {
	s := t.Session
	if err := s.checkOrigin(r); err != nil {
		return nil, err
	}
	if err := overTLS(r.URL); err != nil {
		return nil, err
	}
	tok, err := s.Token(r.Context())
	if err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		req := r.Clone(r.Context())
		if attempt > 0 && r.Body != nil && r.Body != http.NoBody {
			if r.GetBody == nil {
				return nil, errNoReplay
			}
			if req.Body, err = r.GetBody(); err != nil {
				return nil, err
			}
		}
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := t.base().RoundTrip(req)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden {
			if tok != "" && resp.StatusCode < 400 {
				s.Succeeded(tok)
			}
			return resp, nil
		}
		ch := Bearer(resp.Header)
		if resp.StatusCode == http.StatusForbidden && ch.Param("error") != "insufficient_scope" {
			return resp, nil // not a matter of tokens
		}
		// Three rounds at most: a renewal, then a login, and a step-up.
		if attempt == 3 {
			return resp, nil
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		if tok, err = s.Recover(r.Context(), tok, resp.StatusCode, ch); err != nil {
			if errors.Is(err, ErrNoAuthorizationServer) {
				// Not an OAuth server: its refusal is the answer.
				resp.Body = io.NopCloser(bytes.NewReader(body))
				return resp, nil
			}
			return nil, err
		}
	}
}

// CloseIdleConnections closes the base's idle connections (http.Client's
// CloseIdleConnections reaches the base through it: a client that found its
// connection silent drops the pooled ones opened with it).
func (t *Transport) CloseIdleConnections() {
	if c, ok := t.base().(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// checkOrigin refuses r when it goes to another origin than the session's
// server: its token is for that server (an http.Client that follows
// redirects on its own would otherwise carry it to wherever a 307 points).
func (s *Session) checkOrigin(r *http.Request) error {
	server, err := url.Parse(s.url)
	if err == nil && transport.SameOrigin(server, r.URL) {
		return nil
	}
	via := ""
	if r.Response != nil && r.Response.Request != nil {
		via = fmt.Sprintf(" (%s %s answered %s)", r.Response.Request.Method, r.Response.Request.URL.Redacted(), r.Response.Status)
	}
	return fmt.Errorf("oauth: the token of %s is not sent to %s%s: another origin", s.url, r.URL.Redacted(), via)
}

// overTLS refuses a request to u that would carry a bearer token in the
// clear: [RFC 6750 §5.3] Clients MUST always use TLS (https) or equivalent
// transport security when making requests with bearer tokens. Plain http to
// a loopback address stays on the machine, and is taken.
func overTLS(u *url.URL) error {
	if strings.EqualFold(u.Scheme, "https") || isLoopbackHost(u.Hostname()) {
		return nil
	}
	return fmt.Errorf("oauth: no token is sent to %s over plain http (RFC 6750 §5.3: bearer tokens need TLS): give the server's https:// (or wss://) URL", u.Redacted())
}

// newHTTPClient is the default client of a session's own requests
// (metadata, registration, token endpoint): like every client that carries
// a credential of ours (a client secret, a refresh token, a code verifier),
// it follows no redirect out of the endpoint's origin.
func newHTTPClient() *http.Client {
	return &http.Client{Timeout: 30 * time.Second, CheckRedirect: transport.CheckRedirect}
}

var errNoReplay = &replayError{}

type replayError struct{}

func (*replayError) Error() string {
	return "oauth: the request was refused for its token and its body cannot be sent again"
}
