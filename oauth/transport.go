package oauth

import (
	"bytes"
	"errors"
	"io"
	"net/http"
)

// Transport is an http.RoundTripper that carries the session's token on
// every request to the server: a 401 gets the token renewed (or a login), a
// 403 insufficient_scope a login for the scopes it names, and the request is
// sent again with the new token.
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

var errNoReplay = &replayError{}

type replayError struct{}

func (*replayError) Error() string {
	return "oauth: the request was refused for its token and its body cannot be sent again"
}
